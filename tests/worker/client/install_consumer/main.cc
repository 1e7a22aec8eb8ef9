// Links Nereus::worker from an installed Nereus and connects to a coordinator
// that is not there: Connect must give up after startup_timeout_s with a
// non-OK Status naming the coordinator, not crash or hang.
// Usage: consumer PORT (a port where nobody listens).
#include <cstdio>
#include <string>

#include "nereus/client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer PORT\n");
    return 2;
  }
  nereus::ClientOptions options;
  options.coordinator = std::string("127.0.0.1:") + argv[1];
  options.startup_timeout_s = 1;
  auto client = nereus::Client::Connect(options);
  if (client.ok()) {
    std::fprintf(stderr, "FAIL: Connect to %s succeeded with nobody there\n", options.coordinator.c_str());
    return 1;
  }
  const std::string message = client.status().message();
  if (message.find(options.coordinator) == std::string::npos) {
    std::fprintf(stderr, "FAIL: the error does not name %s: %s\n", options.coordinator.c_str(), message.c_str());
    return 1;
  }
  std::printf("OK: Connect failed as expected: %s\n", message.c_str());
  return 0;
}

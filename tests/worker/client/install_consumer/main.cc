// Links Nereus::worker from an installed Nereus and connects to a coordinator
// that is not there: Connect must give up after startup_timeout_s with a
// non-OK Status naming the coordinator, not crash or hang. It also checks, as
// it compiles, that the public header stands alone: it brings in neither
// glog, gflags nor protobuf.
// Usage: consumer PORT (a port where nobody listens).
#include "nereus/client.h"

#if defined(CHECK) || defined(LOG) || defined(GOOGLE_LOG_INFO)
#error "nereus/client.h brings in glog"
#endif
#if defined(DECLARE_bool) || defined(DEFINE_bool)
#error "nereus/client.h brings in gflags"
#endif
#if defined(GOOGLE_PROTOBUF_VERSION)
#error "nereus/client.h brings in protobuf"
#endif

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer PORT\n");
    return 2;
  }
  nereus::ClientOptions options;
  options.coordinator = std::string("127.0.0.1:") + argv[1];
  options.startup_timeout_s = 1;
  std::printf("schedule %s, sfb %s\n", nereus::ScheduleName(options.schedule), nereus::SfbModeName(options.sfb));
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

// NetNamespace: a network namespace of our own (a test host), its loopback
// optionally shaped with tc, removed again on destruction.
#ifndef NEREUS_BENCH_NETNS_H_
#define NEREUS_BENCH_NETNS_H_

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace nereus {
namespace bench {

class NetNamespace {
 public:
  // Creates namespace `name`, brings its loopback up with an Ethernet-like
  // MTU of 1500 and, if rate_mbit > 0, shapes it (tc tbf) to that rate. All
  // loopback traffic inside shares the one shaped queue, both directions.
  // Fails (with the reason, e.g. no CAP_NET_ADMIN) if any step fails.
  static StatusOr<std::unique_ptr<NetNamespace>> Create(const std::string& name, double rate_mbit);
  ~NetNamespace();  // Deletes the namespace.

  const std::string& name() const { return name_; }
  // `argv` prefixed to run inside the namespace.
  std::vector<std::string> Wrap(const std::vector<std::string>& argv) const;

 private:
  explicit NetNamespace(std::string name) : name_(std::move(name)) {}
  std::string name_;
};

// Runs argv (no shell), returns its exit status and combined output.
int RunCommand(const std::vector<std::string>& argv, std::string* output);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_NETNS_H_

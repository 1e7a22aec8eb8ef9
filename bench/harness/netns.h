// NetNamespace: a network namespace of our own (a test host), its loopback
// optionally shaped with tc, removed again on destruction.
#ifndef NEREUS_BENCH_HARNESS_NETNS_H_
#define NEREUS_BENCH_HARNESS_NETNS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"

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

// An emulated cluster network: one namespace per host, each with an eth0 at
// 10.77.0.(h+1)/24, MTU 1500, whose veth peer is a port of one bridge in a
// namespace of its own (the switch). If rate_mbit > 0 both ends of every
// veth are shaped with tc tbf, so a host sends (its eth0) and receives (its
// switch port) at most rate_mbit; latency_us > 0 adds that one-way delay
// (tc netem on the sending side). Traffic within a host (loopback, or its
// own address) crosses no link. Names start with `prefix`.
class EmulatedNetwork {
 public:
  static StatusOr<std::unique_ptr<EmulatedNetwork>> Create(const std::string& prefix, int hosts, double rate_mbit,
                                                           double latency_us);
  ~EmulatedNetwork();  // Deletes every namespace made (their veths and bridge go with them).

  int hosts() const { return static_cast<int>(hosts_.size()); }
  const std::string& host_namespace(int h) const { return hosts_.at(h); }
  static std::string Address(int h) { return "10.77.0." + std::to_string(h + 1); }
  // `argv` prefixed to run on host h.
  std::vector<std::string> Wrap(int h, const std::vector<std::string>& argv) const;
  // Every namespace this object made (switch included).
  std::vector<std::string> namespaces() const;
  // The bytes host h's eth0 has sent and received so far (the kernel's
  // counters: everything that crossed its link, headers included).
  Status LinkBytes(int h, uint64_t* tx, uint64_t* rx) const;

 private:
  EmulatedNetwork() = default;
  std::string switch_;
  std::vector<std::string> hosts_;
};

// Namespaces named `base` + PID + "_..." whose PID no longer runs (a run
// killed with SIGKILL): deleted, with a line for each. Returns how many.
int RemoveStaleNamespaces(const std::string& base);

// Runs argv (no shell; common/launch/subprocess.h), returns its exit status and
// combined output; 127 with the reason appended if it cannot run.
int RunCommand(const std::vector<std::string>& argv, std::string* output);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_HARNESS_NETNS_H_

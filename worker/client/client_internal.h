// What only Nereus's own benchmarks configure on a client: kept out of the
// public ClientOptions (nereus/options.h) so that no trainer can set it; and
// what the C interface (c_api.cc) asks of the client beyond nereus/client.h.
#ifndef NEREUS_WORKER_CLIENT_CLIENT_INTERNAL_H_
#define NEREUS_WORKER_CLIENT_CLIENT_INTERNAL_H_

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common/base/status.h"
#include "nereus/client.h"

namespace nereus {

struct ClientInternals {
  // Benchmarks that emulate the device only (bench/harness/emulated_worker.h):
  // the client does not compute SFB updates (those weights are left as they
  // are: never train with this); a clock counts as applied once every
  // worker's factors of it are here, and the caller charges the rebuild to
  // its emulated device. A FactorApplier ignores it.
  bool sfb_emulated_rebuild = false;
  // Tests of HybComm's measured choice that must not depend on the
  // machine's speed: tensor name -> (seconds per clock through the servers,
  // as factors). The clock's period the trials read is then the sum, over
  // these tensors, of the cost of each one's path in that clock, instead of
  // the time measured.
  std::map<std::string, std::pair<double, double>> sfb_injected_costs;
};

// "name:ps_ms:sfb_ms[,...]" (nereus_worker's --sfb_inject_costs) as
// ClientInternals::sfb_injected_costs.
StatusOr<std::map<std::string, std::pair<double, double>>> ParseInjectedCosts(const std::string& text);

// Client::Connect with the internals above.
StatusOr<std::unique_ptr<Client>> ConnectClient(const ClientOptions& options, const ClientInternals& internals);

// What `handle` (a Push or Pull of `client`, not done yet) still awaits:
// each server (or worker) that has not answered, as a timed-out
// WaitWeights names them (RequestTable::DescribeOutstanding). For the C
// interface's bounded waits. `client` must come from Connect/ConnectClient.
std::string DescribeAwaited(const Client& client, const Handle& handle);

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_CLIENT_INTERNAL_H_

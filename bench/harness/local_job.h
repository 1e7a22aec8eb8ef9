// LocalJob: a whole job in one process (coordinator, servers, workers as
// threads and Client objects) talking over ZeroMQ on 127.0.0.1, for benchmarks.
#ifndef NEREUS_BENCH_HARNESS_LOCAL_JOB_H_
#define NEREUS_BENCH_HARNESS_LOCAL_JOB_H_

#include <memory>
#include <thread>
#include <vector>

#include "nereus/client.h"
#include "server/coordinator.h"
#include "server/server_node.h"
#include "worker/client/client_internal.h"

namespace nereus {
namespace bench {

struct LocalJobOptions {
  int servers = 1;
  int workers = 1;
  pb::JobConfig job;  // num_servers/num_workers are filled in.
  ClientOptions client;
  ClientInternals client_internals;
  ZmqTransportOptions server_transport;
  int server_apply_threads = 0;  // ParamServerOptions::apply_threads of every server.
  // The coordinator's --host_aggregation. Off: a local job's workers stand
  // for hosts of their own (the benchmarks time each worker's traffic, and
  // their raw ZeroMQ baseline has a connection per worker).
  HostAggregation host_aggregation = HostAggregation::kOff;
  // If set: every node uses CURVE with the keys there (nereus_keygen; the
  // clients' client.curve_dir is set from it).
  std::string curve_dir;
};

// The solver settings the benchmarks' servers update with, in the wire form
// they apply (a client's Init takes SgdConfigFromProto of it): SGD at a tiny
// fixed rate with momentum 0.9, the arithmetic of a real step with the
// weights barely moving. The transport and apply benches, their raw ZeroMQ
// baseline and the emulated workers all use it.
inline pb::SgdConfig BenchSgd() {
  pb::SgdConfig sgd;
  sgd.set_base_lr(1e-6f);
  sgd.set_lr_policy("fixed");
  sgd.set_momentum(0.9f);
  return sgd;
}

class LocalJob {
 public:
  // Starts the coordinator and servers, connects the workers' clients.
  static StatusOr<std::unique_ptr<LocalJob>> Start(LocalJobOptions options);
  // Finishes every client and joins every thread.
  ~LocalJob();
  Client& worker(int r) { return *clients_.at(r); }
  int workers() const { return static_cast<int>(clients_.size()); }
  Status Finish();

 private:
  LocalJob() = default;
  std::unique_ptr<Coordinator> coordinator_;
  std::thread coordinator_thread_;
  std::vector<std::unique_ptr<ServerNode>> servers_;
  std::vector<std::thread> server_threads_;
  std::vector<std::unique_ptr<Client>> clients_;
  bool finished_ = false;
};

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_HARNESS_LOCAL_JOB_H_

// nereus_server: a parameter-server shard (--role=server) or the job's
// coordinator (--role=coordinator).
#include <cstdlib>
#include <iostream>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "common/node.h"
#include "common/node_flags.h"
#include "server/coordinator.h"
#include "server/param_server.h"

DEFINE_string(role, "server", "server: hold a shard of the parameters; coordinator: run the job's rendezvous.");
DEFINE_int32(num_servers, 1, "Coordinator: number of server processes in the job.");
DEFINE_int32(num_workers, 1, "Coordinator: number of worker processes in the job.");
DEFINE_string(consistency, "bsp",
              "Coordinator: bsp (every update averages all workers' gradients of one clock), ssp (like bsp, but a "
              "worker may read weights up to --staleness clocks old) or async (each push is applied on arrival).");
DEFINE_int32(staleness, 0, "Coordinator: with --consistency=ssp, how many clocks a worker may run ahead.");
DEFINE_uint64(chunk_bytes, 1 << 20, "Coordinator: tensors are cut into chunks of at most this many bytes.");
DEFINE_int32(heartbeat_interval_ms, 1000, "Coordinator: how often every node sends a heartbeat.");
DEFINE_int32(heartbeat_timeout_ms, 5000,
             "Coordinator: a node silent this long is declared dead and the job is aborted.");

namespace nereus {
namespace {

StatusOr<pb::Consistency> ParseConsistency(const std::string& s) {
  if (s == "bsp") return pb::BSP;
  if (s == "ssp") return pb::SSP;
  if (s == "async") return pb::ASYNC;
  return InvalidArgumentError("--consistency must be bsp, ssp or async, got \"" + s + "\"");
}

int RunCoordinator() {
  auto consistency = ParseConsistency(FLAGS_consistency);
  if (!consistency.ok()) {
    LOG(ERROR) << consistency.status().message();
    return 2;
  }
  CoordinatorOptions o;
  o.bind = FLAGS_coordinator;
  o.startup_timeout_s = FLAGS_startup_timeout_s;
  o.job.set_num_servers(FLAGS_num_servers);
  o.job.set_num_workers(FLAGS_num_workers);
  o.job.set_consistency(*consistency);
  o.job.set_staleness(*consistency == pb::SSP ? FLAGS_staleness : 0);
  o.job.set_chunk_bytes(FLAGS_chunk_bytes);
  o.job.set_heartbeat_interval_ms(FLAGS_heartbeat_interval_ms);
  o.job.set_heartbeat_timeout_ms(FLAGS_heartbeat_timeout_ms);
  Coordinator coordinator(o);
  Status st = coordinator.Start();
  if (!st.ok()) {
    LOG(ERROR) << st.message();
    return 2;
  }
  st = coordinator.Run();
  return st.ok() ? 0 : 1;
}

// Routes a Node's data messages into a ParamServer and its replies back out.
class ServerNode : public ReplySink {
 public:
  explicit ServerNode(NodeOptions options) : node_(std::move(options)) {}

  int Run() {
    Status st = node_.Start(
        [this](const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
          OnData(from, std::move(msg), partial);
        },
        [](const Status&) {});
    if (!st.ok()) {
      LOG(ERROR) << "server: " << st.message();
      return 1;
    }
    {
      ParamServerOptions o;
      o.rank = node_.rank();
      o.num_workers = node_.job().num_workers();
      o.consistency = node_.job().consistency();
      o.staleness = node_.job().staleness();
      std::lock_guard<std::mutex> lock(mu_);
      server_ = std::make_unique<ParamServer>(o, this);
    }
    ready_.notify_all();
    st = node_.Finish();
    if (!st.ok()) {
      LOG(ERROR) << node_.name() << " exits: " << st.message();
      return 1;
    }
    LOG(INFO) << node_.name() << " shut down cleanly";
    return 0;
  }

  void Reply(const Endpoint& to, Message msg) override {
    Status st = node_.Send(to, std::move(msg));
    if (!st.ok()) LOG(WARNING) << node_.name() << ": reply to " << to << " failed: " << st.message();
  }

 private:
  void OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
    // Data can arrive between the start barrier and server_ being built.
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [this] { return server_ != nullptr; });
    lock.unlock();
    pb::Role role;
    int rank = -1;
    if (!node_.Lookup(from, &role, &rank) || role != pb::WORKER) rank = -1;
    server_->Handle(from, rank, std::move(msg), partial);
  }

  std::mutex mu_;
  std::condition_variable ready_;
  std::unique_ptr<ParamServer> server_;  // GUARDED_BY(mu_) until set, then read-only.
  Node node_;                            // Last: stopped before server_ goes away.
};

}  // namespace
}  // namespace nereus

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Nereus parameter server.\n"
      "  nereus_server --role=coordinator --coordinator=HOST:PORT --num_servers=S --num_workers=W [--consistency=...]\n"
      "  nereus_server --role=server --coordinator=HOST:PORT [--rank=R]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (FLAGS_role == "coordinator") return nereus::RunCoordinator();
  if (FLAGS_role != "server") {
    LOG(ERROR) << "--role must be server or coordinator, got \"" << FLAGS_role << "\"";
    return 2;
  }
  auto options = nereus::NodeOptionsFromFlags(nereus::pb::SERVER);
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 2;
  }
  nereus::ServerNode server(*options);
  return server.Run();
}

// nereus_server: a parameter-server shard (--role=server) or the job's
// coordinator (--role=coordinator).
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "common/base/init_binary.h"
#include "common/launch/subprocess.h"
#include "common/net/curve_keys.h"
#include "common/net/node.h"
#include "common/net/node_flags.h"
#include "server/coordinator.h"
#include "server/server_flags.h"
#include "server/server_node.h"

DEFINE_string(role, "server", "server: hold a shard of the parameters; coordinator: run the job's rendezvous.");
DEFINE_int32(num_servers, 1, "Coordinator: number of server processes in the job.");
DEFINE_int32(num_workers, 1, "Coordinator: number of worker processes in the job.");
DEFINE_string(consistency, "bsp",
              "Coordinator: bsp (every update averages all workers' gradients of one clock), ssp (like bsp, but a "
              "worker may read weights up to --staleness clocks old) or async (each push is applied on arrival).");
DEFINE_int32(staleness, 0, "Coordinator: with --consistency=ssp, how many clocks a worker may run ahead.");
DEFINE_string(host_aggregation, "auto",
              "Coordinator: host-local aggregation (docs/HOSTAGG.md). on: the workers of a host (the host of their "
              "endpoints) send their gradients to the host's first worker, which sums them in rank order, pushes "
              "the sum once for them all and hands them the weights it pulls back, so a host of L workers sends "
              "and receives about 1/L of the bytes; bsp and ssp only. auto: on when some host runs more than one "
              "worker, except under async. off: every worker pushes its own gradients.");
DEFINE_uint64(partition_bytes, 1 << 20,
              "Coordinator: every tensor is cut into partitions of at most this many bytes. A partition is "
              "what a server stores and updates, what the placement balances over servers, and what a worker's "
              "scheduler orders and credits.");
DEFINE_int32(heartbeat_interval_ms, 1000, "Coordinator: how often every node sends a heartbeat.");
DEFINE_int32(heartbeat_timeout_ms, 5000,
             "Coordinator: a node silent this long is declared dead and the job is aborted; the nodes wait as long "
             "for a silent coordinator (time to restart it with --resume) before they give up.");
DEFINE_string(checkpoint_dir, "",
              "Server: directory of this server's checkpoints (written with --checkpoint_every, read with --resume). "
              "Servers of one job may share it: the files carry the server's rank. Coordinator: where it keeps what "
              "it knows of the job (coordinator.state), so that a coordinator killed and restarted with --resume at "
              "the same address takes the job back (BSP with checkpoints); one started without --resume over the "
              "state of a job that has not ended refuses to start.");
DEFINE_int64(checkpoint_every, 0,
             "Server: under BSP, write a checkpoint of this server's shard (weights, solver history, clock, solver "
             "settings) every N clocks, all servers at the same clocks; 0: never. Refused under ssp and async.");
DEFINE_int32(checkpoint_keep, 2, "Server: keep the newest K complete checkpoints, delete older ones.");
DEFINE_int64(crash_at_clock, -1,
             "Server, test hook: once every partition of its shard has applied this many updates, finish writing the "
             "checkpoints already taken and kill this process (SIGKILL); -1: never.");

namespace nereus {
namespace {

// SIGTERM, SIGINT and SIGHUP (launch.sh stopping the job, Ctrl-C, scancel, a
// closed terminal) stop the job through the coordinator: its nodes get ABORT
// naming the signal and its state file says the job ended. Only a
// coordinator killed outright (SIGKILL, a crash, a lost host) leaves a job to
// take back with --resume. A thread of its own waits for the signal.
class StopOnSignal {
 public:
  StopOnSignal(Coordinator* coordinator, SignalPipe* signals) {
    PCHECK(::pipe2(done_, O_CLOEXEC) == 0);
    thread_ = std::thread([this, coordinator, signals] {
      pollfd fds[2] = {{signals->fd(), POLLIN, 0}, {done_[0], POLLIN, 0}};
      while (true) {
        if (::poll(fds, 2, -1) < 0 && errno != EINTR) PLOG(FATAL) << "poll";
        if (fds[1].revents != 0) return;
        if (const int sig = signals->Take(); sig != 0)
          coordinator->Stop(std::string("the coordinator was stopped by SIG") + sigabbrev_np(sig));
      }
    });
  }
  ~StopOnSignal() {
    ::close(done_[1]);  // End-of-file wakes the thread.
    thread_.join();
    ::close(done_[0]);
  }

 private:
  int done_[2];
  std::thread thread_;
};

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
  auto aggregation = ParseHostAggregation(FLAGS_host_aggregation);
  if (!aggregation.ok()) {
    LOG(ERROR) << aggregation.status().message();
    return 2;
  }
  CoordinatorOptions o;
  o.host_aggregation = *aggregation;
  o.bind = FLAGS_coordinator;
  o.startup_timeout_s = FLAGS_startup_timeout_s;
  o.job.set_num_servers(FLAGS_num_servers);
  o.job.set_num_workers(FLAGS_num_workers);
  o.job.set_consistency(*consistency);
  o.job.set_staleness(*consistency == pb::SSP ? FLAGS_staleness : 0);
  o.job.set_partition_bytes(FLAGS_partition_bytes);
  o.job.set_heartbeat_interval_ms(FLAGS_heartbeat_interval_ms);
  o.job.set_heartbeat_timeout_ms(FLAGS_heartbeat_timeout_ms);
  o.resume = FLAGS_resume;
  o.state_dir = FLAGS_checkpoint_dir;
  if (!FLAGS_curve_dir.empty()) {
    auto keys = LoadCurveKeys(FLAGS_curve_dir, CurveKeyName(pb::COORDINATOR, 0));
    if (!keys.ok()) {
      LOG(ERROR) << keys.status().message();
      return 2;
    }
    o.curve = std::move(keys).value();
  }
  Coordinator coordinator(o);
  Status st = coordinator.Start();
  if (!st.ok()) {
    LOG(ERROR) << st.message();
    return 2;
  }
  auto signals = SignalPipe::Create({SIGTERM, SIGINT, SIGHUP});
  if (!signals.ok()) {
    LOG(ERROR) << signals.status().message();
    return 1;
  }
  {
    StopOnSignal stop(&coordinator, signals->get());
    st = coordinator.Run();
  }
  return st.ok() ? 0 : 1;
}

}  // namespace
}  // namespace nereus

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Nereus parameter server.\n"
      "  nereus_server --role=coordinator --coordinator=HOST:PORT --num_servers=S --num_workers=W [--consistency=...]\n"
      "  nereus_server --role=server --coordinator=HOST:PORT [--rank=R] [--checkpoint_dir=DIR --checkpoint_every=N]\n"
      "  add --resume to every process of a job to restart it from its newest checkpoint",
      &argc, &argv);
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
  nereus::ServerCheckpointOptions checkpoints;
  checkpoints.dir = FLAGS_checkpoint_dir;
  checkpoints.every = FLAGS_checkpoint_every;
  checkpoints.keep = FLAGS_checkpoint_keep;
  checkpoints.resume = FLAGS_resume;
  checkpoints.crash_at_clock = FLAGS_crash_at_clock;
  nereus::Status valid = nereus::ValidateServerCheckpointOptions(checkpoints, options->rank);
  if (!valid.ok()) {
    LOG(ERROR) << valid.message();
    return 2;
  }
  auto apply_threads = nereus::ApplyThreadsFromFlags();
  if (!apply_threads.ok()) {
    LOG(ERROR) << apply_threads.status().message();
    return 2;
  }
  nereus::Status st = nereus::RunServer(*options, checkpoints, *apply_threads);
  if (!st.ok()) {
    LOG(ERROR) << "server exits: " << st.message();
    return 1;
  }
  return 0;
}

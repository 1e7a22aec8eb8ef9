#include "common/net/node_flags.h"

#include "common/net/curve_keys.h"

DEFINE_string(coordinator, "127.0.0.1:7000",
              "host:port of the job's coordinator. The coordinator listens there; servers and workers register there.");
DEFINE_int32(rank, -1,
             "Rank of this server or worker within its role (0-based). -1 lets the coordinator assign the lowest "
             "free rank.");
DEFINE_string(bind_host, "127.0.0.1", "Address this node listens on for its peers (a free port is chosen).");
DEFINE_int32(startup_timeout_s, 60,
             "Seconds to wait for every node to register before giving up with an error naming the missing ones.");
DEFINE_int32(io_threads, 1, "ZeroMQ I/O threads per node.");
DEFINE_int32(streams, 2,
             "Parallel connections from this node to each peer (workers use them with --schedule=full; one flow "
             "alone does not fill a fast link).");
DEFINE_bool(resume, false,
            "Restart a job from its newest checkpoint (docs/RELIABILITY.md). Give it to the coordinator and to every "
            "server and worker of the job: the coordinator picks the newest clock that every server's "
            "--checkpoint_dir holds complete, the servers load it and the workers start at that clock. Or, under "
            "BSP with checkpoints, give it to one dead server or worker restarted alone (same --rank) while the job "
            "waits for it: it rejoins and every process rolls back to that checkpoint in place.");
DEFINE_string(curve_dir, "",
              "Directory of the job's CURVE keys (made by nereus_keygen DIR --servers=S --workers=W). Every process "
              "of a job gets the same directory: connections are then encrypted and only the job's keys are "
              "admitted. Empty: plain TCP, open to anyone who can reach the ports (fine on 127.0.0.1).");
namespace nereus {

StatusOr<NodeOptions> NodeOptionsFromFlags(pb::Role role) {
  if (FLAGS_coordinator.empty()) return InvalidArgumentError("--coordinator must be host:port");
  if (FLAGS_startup_timeout_s < 1)
    return InvalidArgumentError("--startup_timeout_s must be >= 1, got " + std::to_string(FLAGS_startup_timeout_s));
  if (FLAGS_io_threads < 1)
    return InvalidArgumentError("--io_threads must be >= 1, got " + std::to_string(FLAGS_io_threads));
  if (FLAGS_streams < 1) return InvalidArgumentError("--streams must be >= 1, got " + std::to_string(FLAGS_streams));
  NodeOptions o;
  o.coordinator = FLAGS_coordinator;
  o.role = role;
  o.rank = FLAGS_rank;
  o.bind_host = FLAGS_bind_host;
  o.startup_timeout_s = FLAGS_startup_timeout_s;
  o.transport.io_threads = FLAGS_io_threads;
  o.transport.streams_per_peer = FLAGS_streams;
  o.resume = FLAGS_resume;
  if (!FLAGS_curve_dir.empty()) {
    if (FLAGS_rank < 0)
      return InvalidArgumentError("--curve_dir needs an explicit --rank (it picks the node's key pair)");
    ASSIGN_OR_RETURN(o.transport.curve, LoadCurveKeys(FLAGS_curve_dir, CurveKeyName(role, FLAGS_rank)));
  }
  return o;
}

}  // namespace nereus

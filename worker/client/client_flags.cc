#include "worker/client/client_flags.h"

DEFINE_string(schedule, "full",
              "Worker: how communication is ordered. sequential: push everything after the whole backward, pull "
              "everything before the next forward (no overlap); wfbp: push each layer as soon as its backward ends, "
              "first in first out, its pull riding along; priority: wfbp plus partitions queued by layer (the input "
              "side first) with at most --credit_bytes in flight per server; full: priority plus MG-WFBP merging "
              "of small layers (--merge) and --streams connections.");
DEFINE_uint64(credit_bytes, 2 << 20,
              "Worker, priority/full: bytes of pushes in flight to one server at once. Smaller lets an urgent "
              "partition overtake sooner; larger keeps a fast link busy.");
DEFINE_uint64(batch_bytes, 64 << 10,
              "Worker, every schedule: small pushes (or pulls) queued for one server at the moment one of them may "
              "leave (the --credit_bytes window is full, or they were handed over together) go as one message of at "
              "most this many bytes, in priority order; the server acks a batch once and answers its pulls in one "
              "reply. A push or pull of this size or more always goes alone; nothing waits for a batch to fill. "
              "Independent of --merge. 0: off (one message per partition or merged push).");
DEFINE_string(merge, "auto",
              "Worker, full: auto measures the link (alpha, beta) at start and the backward time of each layer in "
              "the first iterations, then merges consecutive layers by MG-WFBP's rule if its model says that ends the "
              "communication at least 1% sooner (else no merging); off sends every layer alone.");
DEFINE_string(timeline, "",
              "Worker: write a Chrome trace (Perfetto, chrome://tracing) of compute, queueing, transfers and "
              "server-side apply here at the end; {rank} in the name is replaced by the worker's rank.");
DEFINE_int32(timeline_every, 1, "Worker: keep every N-th iteration in --timeline, so files stay small.");
DEFINE_string(sfb, "auto",
              "Worker: sufficient-factor broadcasting of fully connected weights (BSP only). auto: per layer, "
              "HybComm's cost model: factors to every other worker when their bytes over the link plus rebuilding "
              "the update on every worker (a GEMM of 2(P1 K)MN FLOPs and an SGD step) cost no more than the full "
              "matrix's bytes (2MN(P1+P2-2)/P2 floats per node) plus the servers' apply; K the batch, P1 workers, "
              "P2 servers, rates from the --sfb_* flags below or timed at start; worker 0 logs the table; SSP/async "
              "fall back to the servers. on: every fully connected weight as factors (refused under SSP/async); "
              "off: everything through the servers.");
DEFINE_double(sfb_link_gbit, 0,
              "Worker, --sfb=auto: the link rate HybComm prices bytes at, Gbit/s each way per node. 0: timed with "
              "pings to the servers at start (the slowest worker's figure).");
DEFINE_double(sfb_rebuild_gflops, 0,
              "Worker, --sfb=auto: GFLOP/s of the GEMM that rebuilds an SFB layer's update where this worker does "
              "it. 0: this CPU's, timed at start (OpenBLAS, a 1024x1024 weight, K = 256); workers sharing a "
              "machine should each be given their share.");
DEFINE_double(sfb_update_gbytes, 0,
              "Worker, --sfb=auto: GB of weights per second of the SGD step after that rebuild. 0: this CPU's, "
              "timed at start (one thread).");
DEFINE_double(sfb_apply_gbytes, 0,
              "Worker, --sfb=auto: GB of weights per second a server averages the workers' gradients and steps, "
              "all its apply threads together. 0: one thread of this CPU, timed at start with the job's workers.");

DEFINE_int32(sfb_trial_clocks, 3,
             "Worker, --sfb=auto under BSP: HybComm's measured choice. After a warm-up, each fully connected layer "
             "runs this many clocks measured on each path (and a settling clock after each switch); the job keeps "
             "the path whose clocks were shorter (the slowest worker's median), handing the layer's weights and "
             "solver history over exactly at a clock boundary, and tries again when the clock's period drifts by "
             "more than 25% for 5 clocks. 0: the start-up cost model's choice only. Same on every worker.");
DEFINE_double(sfb_trial_trust_ratio, 10,
              "Worker, --sfb_trial_clocks > 0: the trials' first round leaves a layer on the path it starts on "
              "when the start-up cost model prices that path more than this many times cheaper than the other (a "
              "trial would only confirm it, running the slower path for a few clocks); a re-trial after a drift "
              "tries every layer. 0: try every layer. Same on every worker.");
DEFINE_string(sfb_schedule, "",
              "Worker, BSP: a forced schedule of paths, layer:clock:path[,...] with path sfb or ps (\"fc6\" names "
              "fc6/0): from that clock on, that layer travels that way (handed over exactly); --sfb gives the path "
              "before its first entry; no trials. For comparing a measured job with a fixed one. Same on every "
              "worker.");

namespace nereus {

StatusOr<ClientOptions> ClientOptionsFromFlags() {
  ASSIGN_OR_RETURN(NodeOptions node, NodeOptionsFromFlags(pb::WORKER));
  ClientOptions o;
  o.coordinator = node.coordinator;
  o.rank = node.rank;
  o.bind_host = node.bind_host;
  o.curve_dir = FLAGS_curve_dir;
  o.startup_timeout_s = node.startup_timeout_s;
  o.resume = node.resume;
  o.io_threads = node.transport.io_threads;
  o.streams = node.transport.streams_per_peer;
  ASSIGN_OR_RETURN(o.schedule, ParseSchedule(FLAGS_schedule));
  if (FLAGS_credit_bytes == 0) return InvalidArgumentError("--credit_bytes must be > 0");
  o.credit_bytes = FLAGS_credit_bytes;
  o.batch_bytes = FLAGS_batch_bytes;
  if (FLAGS_merge != "auto" && FLAGS_merge != "off")
    return InvalidArgumentError("--merge must be auto or off, got \"" + FLAGS_merge + "\"");
  o.merge = FLAGS_merge == "auto";
  if (FLAGS_timeline_every < 1)
    return InvalidArgumentError("--timeline_every must be >= 1, got " + std::to_string(FLAGS_timeline_every));
  o.timeline = FLAGS_timeline;
  o.timeline_every = FLAGS_timeline_every;
  ASSIGN_OR_RETURN(o.sfb, ParseSfbMode(FLAGS_sfb));
  o.sfb_link_gbit = FLAGS_sfb_link_gbit;
  o.sfb_rebuild_gflops = FLAGS_sfb_rebuild_gflops;
  o.sfb_update_gbytes = FLAGS_sfb_update_gbytes;
  o.sfb_apply_gbytes = FLAGS_sfb_apply_gbytes;
  if (FLAGS_sfb_trial_clocks < 0)
    return InvalidArgumentError("--sfb_trial_clocks must be >= 0, got " + std::to_string(FLAGS_sfb_trial_clocks));
  o.sfb_trial_clocks = FLAGS_sfb_trial_clocks;
  o.sfb_trial_trust_ratio = FLAGS_sfb_trial_trust_ratio;
  o.sfb_schedule = FLAGS_sfb_schedule;
  return o;
}

}  // namespace nereus

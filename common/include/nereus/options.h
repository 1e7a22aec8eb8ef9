// What a worker client is configured with: ClientOptions (how it joins the
// job and orders its communication) and SgdConfig (the solver settings that
// Client::Init hands to the servers). docs/CLIENT.md explains each choice and
// what it was measured to do; the words (clock, partition, credit, ...) are
// defined in nereus/client.h and docs/ARCHITECTURE.md.
//
// Part of Nereus's public API: includes only nereus/ headers and the standard
// library.
#ifndef NEREUS_OPTIONS_H_
#define NEREUS_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nereus/status.h"

namespace nereus {

// How a worker orders its communication (see Client::GradientsReady and
// Client::WaitWeights).
enum class Schedule {
  kSequential,  // Push everything after the whole backward (each push carries its pull); wait for everything before the
                // next forward.
  kWfbp,        // Push each layer when its backward ends, first in first out; its pull rides along.
  kPriority,    // WFBP plus priorities (layers nearer the input first) and at most credit_bytes in flight per server.
  kFull,        // Priority plus MG-WFBP merging of small layers and parallel streams.
};
StatusOr<Schedule> ParseSchedule(const std::string& name);  // sequential|wfbp|priority|full
const char* ScheduleName(Schedule s);

// How HybComm (Poseidon: Zhang et al., USENIX ATC 2017) sends the weight
// gradient of a tensor registered with factors (a fully connected layer's):
// kAuto decides per layer by what each path costs (docs/ARCHITECTURE.md,
// "HybComm"), kOn sends every such tensor as sufficient factors among the
// workers, kOff sends every one through the servers.
enum class SfbMode { kAuto, kOff, kOn };
StatusOr<SfbMode> ParseSfbMode(const std::string& name);  // auto|off|on
const char* SfbModeName(SfbMode mode);

struct ClientOptions {
  std::string coordinator = "127.0.0.1:7000";  // host:port of the coordinator.
  int rank = -1;                               // -1: the coordinator assigns one.
  std::string bind_host = "127.0.0.1";
  // If set: the directory of the job's CURVE keys (made by nereus_keygen);
  // every connection is encrypted and only the job's keys are admitted.
  // Needs rank >= 0.
  std::string curve_dir;
  int startup_timeout_s = 60;
  // The longest Client::WaitWeights waits (0: no bound). Past it WaitWeights
  // fails with kDeadlineExceeded naming the layer's tensors, the clock and
  // what is still awaited: each server that has not answered (and whether
  // the request left this client), each worker whose sufficient factors have
  // not come.
  int64_t wait_timeout_ms = 0;
  int io_threads = 1;  // ZeroMQ I/O threads.
  int streams = 2;     // Connections per server (used by kFull).
  Schedule schedule = Schedule::kFull;
  // kPriority/kFull: bytes of pushes in flight to one server at once (pull
  // requests are ordered by the same priorities but take no credit). Smaller
  // lets urgent partitions overtake sooner; larger keeps the link busier.
  uint64_t credit_bytes = 2 << 20;
  // Every schedule: small PUSHes (or PULLs) queued for one server at the
  // moment one of them may leave (the credit is in use, or they were
  // submitted together) go as one message of at most this many bytes, taken
  // in priority order; a unit of this size or more always goes alone. 0: off.
  uint64_t batch_bytes = 64 << 10;
  bool merge = true;  // kFull: MG-WFBP merging of small consecutive layers into merge groups.
  // kFull with merging: plan with this link model (seconds per message and
  // per byte) instead of timing PINGs at Init, e.g. for a link known in
  // advance, or a test that needs the plan not to depend on timing. Both > 0
  // to take effect.
  double merge_alpha_s = 0;
  double merge_beta_s_per_byte = 0;
  int merge_profile_iterations = 3;  // Clocks 1..N are timed before merges are planned.
  std::string timeline;              // If set, Finish() writes a Chrome trace here ("{rank}" is replaced).
  int timeline_every = 1;            // Keep every N-th clock in the timeline.
  // Join a job restarted from a checkpoint (every process of the job restarts
  // with resume set): job().start_clock is then the clock to continue from,
  // and Pull of that clock gives the checkpointed weights.
  bool resume = false;
  // Sufficient-factor broadcasting (--sfb) for tensors registered with
  // factors: kAuto applies HybComm's cost rule (Poseidon's, counting work
  // too) per tensor with the job's workers, servers and the tensor's
  // factor_rows; kOn sends every such tensor as factors; kOff never does.
  // Under SSP/async kAuto keeps them on the servers and kOn makes Init fail.
  SfbMode sfb = SfbMode::kAuto;
  // HybComm's cost model under kAuto (docs/ARCHITECTURE.md, "HybComm"): a
  // layer goes as factors iff its bytes over the link plus the rebuild of its
  // update on every worker cost no more than its bytes plus the servers'
  // apply. The rates it prices them with; 0 = measured at Init, and every
  // worker then takes the slowest worker's figure, so all choose alike.
  // Where this worker rebuilds SFB updates, for the table: "cpu" (the
  // client's own thread, common/update/sfb.h) unless the caller does it elsewhere.
  std::string sfb_rebuild_on = "cpu";
  // The rebuild's GEMM there, GFLOP/s (2 FLOPs per multiply-add), and its
  // SGD step, GB of weights per second. 0: this CPU's, timed once per
  // process (common/update/compute_rates.h); a process running several workers
  // should give each its share. A GPU's own figures, measured by whoever
  // rebuilds there.
  double sfb_rebuild_gflops = 0;
  double sfb_update_gbytes = 0;
  // A server's apply (average of the workers' gradients and SGD step), GB of
  // weights per second, all its apply threads together. 0: one thread of this
  // CPU with this job's worker count.
  double sfb_apply_gbytes = 0;
  // A node's link, Gbit/s each way. 0: merge_beta_s_per_byte if given, else
  // timed with PINGs to the servers at Init (as for merging).
  double sfb_link_gbit = 0;
  // kAuto under BSP: HybComm's measured choice (docs/ARCHITECTURE.md,
  // "HybComm"). After a warm-up, each layer that can go either way runs
  // this many clocks measured on each path (plus a settling clock after
  // each switch), the job keeps the path whose clocks were shorter, and
  // tries again when the clock's period drifts; a layer's path changes only
  // at a clock boundary, its weights and solver history handed over
  // exactly. 0: the start-up choice only (the cost model above). Every
  // worker must give the same value (checked at Init).
  int sfb_trial_clocks = 3;
  // The trials' first round leaves alone a layer whose start-up prices (the
  // cost model, with the rebuild's agreed overlap) are more than this many
  // times apart, the cheaper path being the one it starts on: a trial would
  // only confirm it, at the price of running the slower path for a few
  // clocks (measured on VGG-19 at 1 Gbit/s: fc6 7 times slower a clock
  // through the servers, and the trials 3.6% of a 1000-clock job). A
  // re-trial (after a drift) tries every layer. 0: try every layer. Every
  // worker must give the same value (checked at Init).
  double sfb_trial_trust_ratio = 10;
  // A forced schedule of paths, "layer:clock:path[,...]" (path sfb or ps;
  // "fc6" names the tensors "fc6/..."): from `clock` on, that layer's
  // gradients travel that way, whatever --sfb chose at the start (which
  // stays the path before the first entry); no trials then. BSP only. For
  // tests and benchmarks that compare a measured job with a fixed one.
  // Every worker must give the same (checked at Init).
  std::string sfb_schedule;
};

// Caffe's solver types; each keeps Caffe's history per parameter (one array,
// or two for kAdaDelta and kAdam). kAverage is not Caffe's: the servers keep
// the workers' average gradient of the last clock as the tensor's values (no
// learning rate, no history), so a trainer that runs its own optimizer pulls
// the averaged gradient (BSP only; never sent as sufficient factors).
enum class SolverType { kSgd, kNesterov, kAdaGrad, kRmsProp, kAdaDelta, kAdam, kAverage };

// The solver settings the servers (and, for tensors sent as factors, the
// workers) apply, with Caffe's meaning and names (caffe.SolverParameter). The
// defaults are Caffe's, except that Caffe has no default base_lr.
struct SgdConfig {
  float base_lr = 0;
  std::string lr_policy = "fixed";  // fixed, step, exp, inv, multistep, poly, sigmoid.
  float gamma = 0;
  float power = 0;
  int stepsize = 0;
  std::vector<int> stepvalue;  // multistep.
  int max_iter = 0;            // poly.
  float momentum = 0;
  float weight_decay = 0;
  std::string regularization_type = "L2";  // L2 or L1.
  SolverType type = SolverType::kSgd;
  float delta = 1e-8f;       // AdaGrad, RMSProp, AdaDelta, Adam.
  float momentum2 = 0.999f;  // Adam's beta2.
  float rms_decay = 0.99f;   // RMSProp.
};

}  // namespace nereus

#endif  // NEREUS_OPTIONS_H_

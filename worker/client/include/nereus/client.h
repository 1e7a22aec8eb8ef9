// The Nereus worker client: what a trainer links to keep its parameters on
// the parameter servers.
//
// Typical use, per worker process:
//   auto client = nereus::Client::Connect(options);          // joins the job
//   int w = client->RegisterTensor({"fc1.weight", {500, 800}});
//   client->Init(sgd, {initial_values...});                  // worker 0's values win
//   for (clock = 0; ...; ++clock) {
//     client->Pull(w, weights, clock).Wait();                 // weights after `clock` updates
//     ... forward/backward ...
//     client->Push(w, grads, clock);                          // returns at once
//   }
//   client->Finish();                                         // clean job shutdown
//
// Thread safety: every method may be called from any thread, concurrently.
// Communication runs on threads the client owns; nothing busy-waits.
#ifndef NEREUS_CLIENT_H_
#define NEREUS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/hybcomm.h"
#include "common/status.h"
#include "proto/nereus.pb.h"

namespace nereus {

// How a worker orders its communication (see GradientsReady/WaitWeights).
enum class Schedule {
  kSequential,  // Push everything after the whole backward (each push carries its pull); wait for everything before the
                // next forward.
  kWfbp,        // Push each layer when its backward ends, first in first out; its pull rides along.
  kPriority,    // WFBP plus priorities (layers nearer the input first) and at most credit_bytes in flight per server.
  kFull,        // Priority plus MG-WFBP merging of small layers and parallel streams.
};
StatusOr<Schedule> ParseSchedule(const std::string& name);  // sequential|wfbp|priority|full
const char* ScheduleName(Schedule s);

struct ClientOptions {
  std::string coordinator = "127.0.0.1:7000";  // host:port of the coordinator.
  int rank = -1;                               // -1: the coordinator assigns one.
  std::string bind_host = "127.0.0.1";
  // If set: the job's CURVE keys (nereus_keygen); every connection is
  // encrypted and only the job's keys are admitted. Needs rank >= 0.
  std::string curve_dir;
  int startup_timeout_s = 60;
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
  bool merge = true;  // kFull: MG-WFBP merging (--merge=auto|off).
  // kFull with merging: plan with this link model (seconds per message and
  // per byte) instead of timing PINGs at Init, e.g. for a link known in
  // advance, or a test that needs the plan not to depend on timing. Both > 0
  // to take effect.
  double merge_alpha_s = 0;
  double merge_beta_s_per_byte = 0;
  int merge_profile_iterations = 3;  // Clocks 1..N are timed before merges are planned.
  std::string timeline;              // If set, Finish() writes a Chrome trace here ("{rank}" is replaced).
  int timeline_every = 1;            // Keep every N-th clock in the timeline.
  // Join a job restarted from a checkpoint (every process gets --resume):
  // job().start_clock() is then the clock to continue from, and Pull of that
  // clock gives the checkpointed weights.
  bool resume = false;
  // Sufficient-factor broadcasting (--sfb) for tensors registered with
  // factors: kAuto applies HybComm's cost rule (common/hybcomm.h) per tensor
  // with the job's workers, servers and the tensor's factor_rows; kOn sends
  // every such tensor as factors; kOff never does. Under SSP/async kAuto
  // falls back to the servers and kOn makes Init fail.
  SfbMode sfb = SfbMode::kAuto;
  // HybComm's cost model under kAuto (docs/ARCHITECTURE.md, "HybComm"): a
  // layer goes as factors iff its bytes over the link plus the rebuild of its
  // update on every worker cost no more than its bytes plus the servers'
  // apply. The rates it prices them with; 0 = measured at Init, and every
  // worker then takes the slowest worker's figure, so all choose alike.
  // Where this worker rebuilds SFB updates, for the table: "cpu" (the
  // client's own thread, common/sfb.h) unless the caller does it elsewhere.
  std::string sfb_rebuild_on = "cpu";
  // The rebuild's GEMM there, GFLOP/s (2 FLOPs per multiply-add), and its
  // SGD step, GB of weights per second. 0: this CPU's, timed once per
  // process (common/compute_rates.h); a process running several workers
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
  // Benchmarks that emulate the device only: the client does not compute SFB
  // updates (those weights are left as they are: never train with this); a
  // clock counts as applied once every worker's factors of it are here, and
  // the caller charges the rebuild to its emulated device.
  bool sfb_emulated_rebuild = false;
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  float lr_mult = 1.0f;
  float decay_mult = 1.0f;
  // For the layer-wise API: the layer (0 = nearest the input; -1 = a layer of
  // its own, numbered by registration order), where the weights live (written
  // by WaitWeights) and where the gradients are read (by GradientsReady). Both
  // buffers hold the tensor's element count and must outlive the client.
  int layer = -1;
  float* data = nullptr;
  const float* diff = nullptr;
  // Sufficient factors (layer-wise API, a 2-D rows x cols weight of a fully
  // connected layer): the gradient of one clock is left^T * right, with
  // left = factor_rows x rows and right = factor_rows x cols (row-major).
  // For Caffe's InnerProduct: the top diff and the bottom data (swapped with
  // transpose). When given (factor_rows > 0, both pointers), the tensor may
  // travel as factors to the other workers instead of through the servers
  // (ClientOptions::sfb); then the buffers must hold the clock's factors when
  // GradientsReady is called for its layer (they are copied there), and
  // WaitWeights applies every worker's factors of the previous clock.
  int64_t factor_rows = 0;
  const float* factor_left = nullptr;
  const float* factor_right = nullptr;
};

// What a client has sent and received so far (messages and payload bytes).
struct ClientStats {
  uint64_t push_messages = 0;  // PUSH messages on the wire (a merged one or a batch counts once).
  uint64_t push_bytes = 0;
  uint64_t pull_messages = 0;  // Explicit PULL messages (a batch counts once; pulls riding on pushes are not counted).
  uint64_t factor_messages = 0;  // FACTORS messages to other workers (one per peer, tensor and clock).
  uint64_t factor_bytes = 0;
  uint64_t pull_bytes = 0;             // Weights received from the servers (pulls, and pulls riding on pushes).
  uint64_t factor_bytes_received = 0;  // Other workers' factors accepted.
  uint64_t factor_apply_us = 0;        // Time spent rebuilding and applying factor updates (a thread of the client).
  uint64_t batches = 0;                // PUSH or PULL messages that carried a batch of queued units (batch_bytes).
  uint64_t batched_units = 0;          // Units (messages the builder made) that left inside those batches.
};

// The completion of one asynchronous Push or Pull. Cheap to copy; copies share
// state. A default-constructed Handle is already done with OK.
class Handle {
 public:
  Handle();
  // Blocks until the operation completes; returns its outcome. A dead server,
  // an aborted job or a request the server refused give a non-OK status whose
  // message names the cause.
  Status Wait() const;
  // Like Wait(), but gives up after `timeout`: returns false if not done.
  bool WaitFor(std::chrono::milliseconds timeout, Status* status) const;
  bool done() const;
  // Pull: the number of updates included in the weights received (the
  // smallest over the tensor's chunks). Valid once done.
  int64_t version() const;

  struct State;
  explicit Handle(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

class Client {
 public:
  // Registers with the coordinator and blocks until every server and worker
  // of the job has joined (or startup_timeout_s passes).
  static StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  // Fails every outstanding handle and leaves the job (without Finish(), the
  // rest of the job sees this worker as dead).
  virtual ~Client();

  virtual int rank() const = 0;
  virtual int num_workers() const = 0;
  virtual int num_servers() const = 0;
  virtual const pb::JobConfig& job() const = 0;

  // Declares a tensor; returns its id (0, 1, ... in call order). Every worker
  // must register the same tensors in the same order (checked at Init). Only
  // before Init.
  virtual StatusOr<int> RegisterTensor(const TensorSpec& spec) = 0;

  // Worker 0 sends `initial_values[t]` (one pointer per registered tensor, each
  // of the tensor's element count) and the solver settings to the servers;
  // every worker then waits until all are initialized. Other workers' values
  // are ignored (pull clock 0 to start from worker 0's). Blocking.
  virtual Status Init(const pb::SgdConfig& sgd, const std::vector<const float*>& initial_values) = 0;

  // Sends tensor `tensor`'s gradient for `clock`. Returns at once; `grad` must
  // stay valid and unchanged until the handle is done (the bytes are sent
  // without copying). Done when every server holding a chunk acknowledged it
  // and the transport has let go of the bytes. If the handle fails (a dead
  // server, an aborted job), the transport may still read `grad` until the
  // Client is destroyed.
  virtual Handle Push(int tensor, const float* grad, int64_t clock) = 0;

  // Fetches tensor `tensor`'s weights for `clock` into `dst` (element count of
  // the tensor). Returns at once. Under BSP the weights include exactly the
  // updates of clocks 0..clock-1; under SSP at least clock - staleness of
  // them; under async whatever the servers hold. `dst` must stay valid until
  // the handle is done.
  virtual Handle Pull(int tensor, float* dst, int64_t clock) = 0;

  // The layer-wise API (tensors registered with data and diff). Iteration
  // `clock` of a trainer calls WaitWeights(l, clock) before layer l's forward
  // and GradientsReady(l, clock) after layer l's backward.
  //
  // Hands layer `layer`'s gradients for `clock` to the scheduler and returns
  // at once; the layer's fresh weights for clock + 1 are requested with them.
  // The diff buffers must not change until WaitWeights(layer, clock + 1)
  // returns. A layer without tensors is a no-op.
  virtual Status GradientsReady(int layer, int64_t clock) = 0;
  // Blocks until layer `layer`'s weights for `clock` are in its data buffers
  // (only that layer's). Repeated calls for the same clock return at once.
  virtual Status WaitWeights(int layer, int64_t clock) = 0;
  // Records a span (e.g. a layer's forward) on this worker's timeline, in
  // microseconds of CLOCK_MONOTONIC. No-op without options.timeline.
  virtual void TraceSpan(const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us) = 0;

  // Counters of what this client has sent. Thread-safe.
  virtual ClientStats stats() const = 0;

  // After Init: the tensors whose gradients travel as sufficient factors
  // (the HybComm choice), in id order.
  virtual std::vector<int> sfb_tensors() const = 0;

  // Blocks until every worker has entered barrier `name`.
  virtual Status Barrier(const std::string& name) = 0;

  // Writes the timeline (if configured), tells the job this worker is done and
  // blocks until the job shuts down (every worker finished). Call after the
  // last handle is done.
  virtual Status Finish() = 0;
};

}  // namespace nereus

#endif  // NEREUS_CLIENT_H_

// The Nereus worker client: what a trainer links to keep its parameters on
// the parameter servers. docs/CLIENT.md is the guide; this header is the
// contract.
//
// Typical use, per worker process:
//   auto client = nereus::Client::Connect(options).value();  // joins the job
//   int w = client->RegisterTensor({"fc1.weight", {500, 800}}).value();
//   client->Init(sgd, {initial_values...});                  // worker 0's values win
//   for (clock = 0; ...; ++clock) {
//     client->Pull(w, weights, clock).Wait();                 // weights after `clock` updates
//     ... forward/backward ...
//     client->Push(w, grads, clock);                          // returns at once
//   }
//   client->Finish();                                         // clean job shutdown
//
// Words (docs/ARCHITECTURE.md has the same glossary):
//   iteration     one forward and backward pass of the trainer over a batch.
//   clock         the number of an iteration as the job counts it: a worker
//                 pushes the gradients of clock c and pulls the weights for
//                 clock c + 1. Clocks start at 0 (or at job().start_clock).
//   version       how many updates a partition's weights include; under BSP
//                 the weights for clock c are version c.
//   partition     a piece of at most job().partition_bytes of one tensor:
//                 what a server stores and updates and what the scheduler
//                 orders.
//   WFBP          wait-free backpropagation: a layer's gradients leave as
//                 soon as its backward ends, overlapping the layers below.
//   merge group   consecutive small layers pushed as one message (MG-WFBP,
//                 Shi et al., INFOCOM 2019).
//   credit        bytes of pushes allowed in flight to one server.
//   SFB           sufficient-factor broadcasting: a fully connected layer's
//                 gradient sent as the two thin matrices whose product it is,
//                 to every other worker instead of through the servers.
//   HybComm       Poseidon's per-layer choice between the servers and SFB.
//   epoch         which formation of the job this is: 0 at start, one more
//                 each time the job rolls back to a checkpoint.
//
// Thread safety: every method may be called from any thread, concurrently.
// Communication runs on threads the client owns; nothing busy-waits.
//
// Part of Nereus's public API: includes only nereus/ headers and the standard
// library.
#ifndef NEREUS_CLIENT_H_
#define NEREUS_CLIENT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nereus/options.h"
#include "nereus/status.h"

namespace nereus {

// How updates are made visible to the workers.
enum class Consistency {
  kBsp,    // A partition's update for clock c averages every worker's gradient of c; Pull(clock) waits for exactly
           // updates 0..clock-1.
  kSsp,    // The same updates; Pull(clock) accepts weights with at least clock - staleness of them.
  kAsync,  // Each push is applied when it arrives (scaled by 1/num_workers); a pull gets what the server holds.
};
const char* ConsistencyName(Consistency c);  // "BSP", "SSP", "ASYNC"

// The job as the coordinator configured it, the same for every node.
struct JobInfo {
  int num_servers = 0;
  int num_workers = 0;
  Consistency consistency = Consistency::kBsp;
  int staleness = 0;             // kSsp.
  uint64_t partition_bytes = 0;  // The largest partition a tensor is cut into.
  // The job was restarted from its servers' checkpoint of start_clock (every
  // process with ClientOptions::resume); otherwise start_clock is 0.
  bool resume = false;
  int64_t start_clock = 0;
  // The largest checkpoint interval of the job's servers, in clocks (0: no
  // checkpoints; then no tensor travels as sufficient factors).
  int64_t checkpoint_every = 0;
};

// Rebuilds and applies the sufficient-factor updates of tensors whose
// weights the trainer keeps where the client cannot write them (a GPU
// worker's device), instead of the client's own rebuild into
// TensorSpec::data on its CPU (TensorSpec::factor_applier). Implemented by
// the trainer's side (worker/bridge: the bridge rebuilds with cuBLAS on
// the device).
class FactorApplier {
 public:
  struct RankFactors {
    int64_t k = 0;                 // Rows of this worker's factors.
    const float* left = nullptr;   // k x rows.
    const float* right = nullptr;  // k x cols.
  };
  virtual ~FactorApplier() = default;
  // Every worker's factors of `clock` for `tensor` (one of sfb_tensors()),
  // in rank order, valid during the call only. Called on a thread of the
  // client, in clock order per tensor, once per tensor and clock; the update
  // of `clock` (the workers' average of left^T * right, then the solver step
  // the servers would make) must be in the weights before the trainer's next
  // forward of the tensor's layer, which comes after this call returns
  // (WaitWeights(layer, clock + 1) waits for it). An error is returned by
  // that WaitWeights and every later one of a layer with such a tensor (and
  // by no other call): the trainer stops, and the job sees a dead worker.
  virtual Status ApplyFactors(int tensor, int64_t clock, const std::vector<RankFactors>& by_rank) = 0;
  // Where the rebuild runs and its speed there, for HybComm's table and cost
  // model (ClientOptions::sfb_rebuild_gflops and sfb_update_gbytes, when set,
  // win): the GEMM in GFLOP/s (2 FLOPs per multiply-add) and the solver step
  // in GB of weights per second, measured by the implementation; 0: unknown
  // (the client times its own CPU instead).
  virtual std::string rebuild_on() const = 0;
  virtual double rebuild_gflops() const = 0;
  virtual double update_gbytes() const = 0;
  // What decides the rebuild's arithmetic (the code, and a device's model
  // and library version, not which device of a host): every worker of a job
  // must rebuild alike, or the replicas drift apart by rounding, so Init
  // fails naming the workers whose engines differ. Default: rebuild_on().
  virtual std::string rebuild_engine() const { return rebuild_on(); }

  // HybComm's measured switching (ClientOptions::sfb_trial_clocks,
  // sfb_schedule): a tensor may change path at a clock boundary. Only an
  // applier that says so here takes part; with one that does not, the
  // client keeps the start-up choice. Default false.
  virtual bool switchable() const { return false; }
  // `tensor` travels as factors from `clock` on (through the servers
  // before). Its weights of `clock` reach the trainer as any pulled weights
  // do (TensorSpec::data, staged as usual); `history` (rows x cols, the
  // solver's momentum after the updates of clocks before `clock`, from the
  // servers) is valid during the call only, and the update of `clock`
  // starts from it. Called on a thread of the client, before
  // ApplyFactors(tensor, clock, ...). An error fails the job as one of
  // ApplyFactors does.
  virtual Status BeginFactors(int tensor, int64_t clock, const float* history);
  // `tensor` goes back through the servers from `clock` on: write its
  // weights and momentum history after the updates of clocks before
  // `clock` (its weights of `clock`) into `weights` and `history` (rows x
  // cols each, host memory). Called on worker 0 only, on the thread that
  // calls GradientsReady(layer, clock) of the tensor's layer, which comes
  // after WaitWeights(layer, clock) and the forward of `clock`. The client
  // hands them to the servers, which apply the update of `clock` from them.
  virtual Status EndFactors(int tensor, int64_t clock, float* weights, float* history);
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
  // With factors: where the tensor's SFB updates are applied. Null: the
  // client rebuilds them on its CPU into `data`. Otherwise the applier does
  // (it must outlive the client), and the client never writes `data` after
  // the initial weights (clock 0 or the job's start clock). Every tensor with
  // factors of one client has the same applier or none.
  FactorApplier* factor_applier = nullptr;
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
  // HybComm's measured switching: path changes so far (every tensor), and
  // clocks run on a path under trial (ClientOptions::sfb_trial_clocks).
  uint64_t sfb_switches = 0;
  uint64_t sfb_trial_clocks = 0;
  // Host-local aggregation (the coordinator's --host_aggregation): this
  // worker's PUSHes to its host's first worker (not in push_*, which count
  // what goes to the servers); on that first worker, the bytes of the other
  // local workers' gradients it summed into its own pushes and of the
  // weights it handed on to them.
  uint64_t host_push_messages = 0;
  uint64_t host_push_bytes = 0;
  uint64_t host_summed_bytes = 0;
  uint64_t host_relayed_bytes = 0;
};

// The lane of a span a trainer adds to the timeline (Client::TraceSpan).
enum class TraceLane { kCompute, kDeviceToHost, kHostToDevice };

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
  // smallest over the tensor's partitions). Valid once done.
  int64_t version() const;

  struct State;  // Defined inside the library.

 private:
  friend struct HandleAccess;  // The library's way to make a Handle of a State.
  explicit Handle(std::shared_ptr<State> state);

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
  virtual const JobInfo& job() const = 0;

  // Declares a tensor; returns its id (0, 1, ... in call order). Every worker
  // must register the same tensors in the same order (checked at Init). Only
  // before Init.
  virtual StatusOr<int> RegisterTensor(const TensorSpec& spec) = 0;

  // Worker 0 sends `initial_values[t]` (one pointer per registered tensor, each
  // of the tensor's element count) and the solver settings to the servers;
  // every worker then waits until all are initialized. Other workers' values
  // are ignored (pull clock 0 to start from worker 0's). Blocking.
  virtual Status Init(const SgdConfig& sgd, const std::vector<const float*>& initial_values) = 0;

  // Sends tensor `tensor`'s gradient for `clock`. Returns at once; `grad` must
  // stay valid and unchanged until the handle is done (the bytes are sent
  // without copying). Done when every server holding a partition acknowledged it
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
  // Bounded by ClientOptions::wait_timeout_ms when set (kDeadlineExceeded,
  // naming what is awaited).
  virtual Status WaitWeights(int layer, int64_t clock) = 0;
  // Records a span (e.g. a layer's forward) on this worker's timeline, in
  // microseconds of CLOCK_MONOTONIC, on `lane`: the trainer's compute, or a
  // copy of a layer between the device and the host (a GPU worker's
  // staging). No-op without options.timeline.
  virtual void TraceSpan(const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us,
                         TraceLane lane = TraceLane::kCompute) = 0;

  // Counters of what this client has sent. Thread-safe.
  virtual ClientStats stats() const = 0;

  // After Init: the tensors whose gradients of the latest clock started (or
  // of the job's first, before any) travel as sufficient factors (HybComm's
  // choice), in id order.
  virtual std::vector<int> sfb_tensors() const = 0;
  // Whether tensor `tensor`'s gradient of `clock` travels as sufficient
  // factors. Under HybComm's measured switching a tensor's path may change
  // at a clock boundary: the path of `clock` is final once WaitWeights of
  // clock - 1 (any layer) has returned, so a trainer that asks in
  // WaitWeights(layer, clock) before the layer's forward knows how the
  // layer's gradient of `clock` will travel (e.g. whether to compute it:
  // one sent as factors is rebuilt from them) and how its update of clock
  // - 1 came (SfbAt(tensor, clock - 1): rebuilt from factors, or pulled).
  virtual bool SfbAt(int tensor, int64_t clock) const = 0;

  // Blocks until every worker has entered barrier `name`.
  virtual Status Barrier(const std::string& name) = 0;

  // Every worker calls it with the same `name` and `n`; blocks until all
  // have, then `values` (n floats) holds worker `root`'s values on every
  // worker. Through the coordinator, as part of a barrier: for small state
  // (a model's buffers, a few KB), not for weights (Init and Pull move those).
  // InvalidArgument for a root outside the job or a NaN in the root's values;
  // workers that give different n abort the job, naming them.
  virtual Status Broadcast(const std::string& name, float* values, size_t n, int root) = 0;

  // Writes the timeline (if configured), tells the job this worker is done and
  // blocks until the job shuts down (every worker finished). Call after the
  // last handle is done.
  virtual Status Finish() = 0;

  // This worker cannot go on because of `why` (its trainer failed: a bad
  // record, a refused setting): tells the job, which ends at once with an
  // error naming this worker and `why` on every node, instead of waiting out
  // --heartbeat_timeout_ms for its silence; then every wait of this client
  // returns `why`. Call it instead of Finish, before the client is destroyed
  // (the message leaves as the client shuts down). A job that rolls back
  // (IsRollback) has not failed: do not call it then. Nothing after the job
  // has ended or aborted.
  virtual void Fail(const Status& why) = 0;
};

}  // namespace nereus

#endif  // NEREUS_CLIENT_H_

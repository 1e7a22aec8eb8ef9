// FactorExchange: sufficient-factor broadcasting among the workers
// (common/update/sfb.h) for the tensors HybComm sent that way.
#ifndef NEREUS_WORKER_CLIENT_FACTOR_EXCHANGE_H_
#define NEREUS_WORKER_CLIENT_FACTOR_EXCHANGE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "common/net/message.h"
#include "common/update/sfb.h"
#include "nereus/client.h"
#include "worker/client/handle_state.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"

namespace nereus {

// Owns, per tensor that may travel as factors, the factors received for the
// clocks not yet applied (by clock, by worker rank), the momentum history and
// the number of updates applied to the tensor's data buffer, and the applier
// thread. Its lock guards all of that and is taken after the LayerPipeline's
// and before the RequestTable's.
//
// A tensor travels as factors over a segment of clocks [from, until): from
// the job's first clock (Configure) or from a switch (StartFactors: its
// weights of `from` come from the servers, its history with them), up to a
// switch back (StopFactors). FACTORS are accepted for the clocks of the
// segment only.
//
// Threads: the user threads build sends (GradientsReady, under the
// LayerPipeline's lock) and wait (WaitWeights, no client lock held); the
// Node's receive thread stores peers' factors (OnFactors); the abort handler
// wakes every waiter (Abort). The applier thread (started by Configure when
// there are SFB tensors, joined by the destructor) applies a clock's update
// as soon as every worker's factors of it are here, so the GEMM overlaps the
// rest of the backward and the next forward up to the layer: a tensor's data
// is written only between its GradientsReady(c) and WaitWeights(c + 1), when
// the trainer does not read it.
class FactorExchange {
 public:
  // Replies (FACTORS_ACK, ERROR) to a peer; called on the receive thread.
  using ReplyFn = std::function<Status(const Endpoint& to, Message msg)>;
  // The worker rank of the node at `from`; false if it is not a worker of the job.
  using WorkerRankFn = std::function<bool(const Endpoint& from, int* rank)>;

  // `requests` must outlive this object.
  FactorExchange(RequestTable* requests, ReplyFn reply, WorkerRankFn worker_rank)
      : requests_(requests), reply_(std::move(reply)), worker_rank_(std::move(worker_rank)) {}
  ~FactorExchange();  // Stops and joins the applier thread.
  FactorExchange(const FactorExchange&) = delete;
  FactorExchange& operator=(const FactorExchange&) = delete;

  struct TensorInfo {
    int id = -1;
    std::string name;
    FactorShape shape;  // The weight: rows x cols.
    int64_t batch = 0;  // K: rows of this worker's factors.
    float lr_mult = 1.0f, decay_mult = 1.0f;
    float* data = nullptr;         // The weights (updated by Advance).
    const float* left = nullptr;   // batch x rows, read at BuildSends.
    const float* right = nullptr;  // batch x cols.
    // Applies the updates where the trainer keeps the weights (then `data`
    // is not written); null: this client rebuilds into `data`.
    FactorApplier* applier = nullptr;
  };

  // Init, before any peer can send factors (every worker's Init ends at a
  // common barrier). Every tensor's data holds the weights of clock 0.
  // Destinations of messages to worker w are num_servers + w (ServerQueues).
  // `rebuild` false (ClientInternals::sfb_emulated_rebuild, benchmarks only):
  // a complete clock is marked applied without computing its update, so the
  // tensors' data keep their values.
  // `active[i]`: tensors[i] travels as factors from `start` (the job's first
  // clock) on; the others start through the servers (empty: all active).
  void Configure(const pb::SgdConfig& sgd, int num_workers, int rank, int num_servers, std::vector<TensorInfo> tensors,
                 bool rebuild = true, const std::vector<bool>& active = {}, int64_t start = 0);
  bool Has(int tensor) const;

  // HybComm's switches (LayerPipeline, at the start of clock - 1, before any
  // peer can send factors of `clock`). StartFactors: `tensor` travels as
  // factors from `clock` on; its data will hold the weights of `clock`
  // (pulled) before this worker hands over its factors of `clock`, and its
  // history arrives into the buffer returned (rows x cols floats) with the
  // completion of `history_ready` (the servers' LEND_REPLYs), which the
  // update of `clock` waits for. StopFactors: the last clock sent as factors
  // is clock - 1.
  float* StartFactors(int tensor, int64_t clock, const StatePtr& history_ready);
  void StopFactors(int tensor, int64_t clock);
  // The state `tensor` hands back to the servers at `clock` (the first clock
  // through them again, StopFactors(tensor, clock) called and its updates
  // up to clock - 1 applied): its weights (in TensorInfo::data: the client's
  // rebuild wrote them there, or the applier's EndFactors does now) and its
  // momentum history (kept alive by the buffer's owner).
  Status HandBackState(int tensor, int64_t clock, const float** weights, Buffer* history);

  // GradientsReady(clock): copies this worker's factors of `tensor` (the
  // trainer overwrites its buffers in the next forward), keeps them as its
  // own part of `clock`'s update and appends one FACTORS message per other
  // worker to `out`, each registered so that its FACTORS_ACK completes one
  // unit of `push` (an ERROR fails it) and releases `bytes` of credit.
  // Returns the number of messages appended. FailedPrecondition if this
  // worker already handed over factors of `tensor` for `clock`.
  StatusOr<int> BuildSends(int tensor, int64_t clock, uint64_t priority, const StatePtr& push,
                           std::vector<QueuedMessage>* out);

  // WaitWeights(clock): blocks until `tensor`'s data holds `clock` updates
  // (each clock c is applied once every worker's factors of c are here).
  // Returns at once if it already does; the abort status if the job fails
  // while waiting; FailedPrecondition if this worker never handed over its
  // own factors of a clock that is needed.
  // With a `deadline` (max: none): past it, DeadlineExceeded naming the
  // tensor, the clock and the workers whose factors have not come.
  Status Advance(int tensor, int64_t clock,
                 std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max());

  // Receive thread: a FACTORS message. Stores it and answers FACTORS_ACK, or
  // refuses it with ERROR (naming why) and changes nothing: a sender that is
  // not another worker of the job, an unknown tensor, frames of the wrong
  // size (ParseFactors), a clock outside [applied, applied + 1], a duplicate.
  void OnFactors(const Endpoint& from, const Message& msg);

  // The job failed: every Advance returns `why` from now on.
  void Abort(const Status& why);

  // Other workers' factor bytes accepted, and the time the applier spent
  // rebuilding and applying updates (ClientStats).
  uint64_t received_bytes() const { return received_bytes_.load(); }
  uint64_t apply_us() const { return apply_us_.load(); }

  // For tests and the log: updates applied to `tensor`.
  int64_t applied(int tensor) const;

 private:
  struct Clock {
    std::vector<Factors> by_rank;  // k == 0: not here yet.
    int count = 0;
  };
  struct State {
    TensorInfo info;
    int64_t applied = 0;  // Updates in info.data (in a segment).
    // The segment of clocks sent as factors: [from, until); from < 0: none yet.
    int64_t from = -1, until = std::numeric_limits<int64_t>::max();
    // Momentum, rows * cols: made (zero) at the start of each segment; the
    // applier thread takes its own reference with each clock.
    std::shared_ptr<std::vector<float>> history;
    StatePtr history_ready;      // The servers' history of `from` is in `history` (null: nothing to wait for).
    bool begin_pending = false;  // With an applier: BeginFactors of `from` not yet called.
    std::map<int64_t, Clock> pending;
    int64_t own_clock = -1;  // Last clock this worker handed over.
    FactorScratch scratch;   // The applier's.
  };
  Status Refuse(const Endpoint& from, const pb::Header& h, const std::string& why);
  // Stores, and queues the clock for the applier once it is complete.
  Status Store(int sender, int tensor, int64_t clock, Factors f) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyLoop() NEREUS_LOCKS_EXCLUDED(mu_);

  RequestTable* const requests_;
  const ReplyFn reply_;
  const WorkerRankFn worker_rank_;

  mutable Mutex mu_;
  CondVar cv_;
  pb::SgdConfig sgd_;                                  // Set by Configure, then read-only.
  int num_workers_ = 0, rank_ = -1, num_servers_ = 0;  // Likewise.
  bool rebuild_ = true;                                // Likewise.
  // The map's shape is fixed by Configure; the applier works on a State it
  // took from ready_ without mu_ (info, history, scratch are its own then).
  std::map<int, State> tensors_ NEREUS_GUARDED_BY(mu_);
  Status abort_ NEREUS_GUARDED_BY(mu_);
  std::deque<std::pair<int, int64_t>> ready_ NEREUS_GUARDED_BY(mu_);  // (tensor, clock) complete, in order.
  bool stopping_ NEREUS_GUARDED_BY(mu_) = false;
  std::thread applier_;
  std::atomic<uint64_t> received_bytes_{0}, apply_us_{0};
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_FACTOR_EXCHANGE_H_

// ParamServer: one shard of the parameters. Holds the partitions placed on it
// (weights and the solver's history: one or two arrays per partition), collects
// the workers' gradients, applies Caffe's solver step (common/update/sgd.h
// SolverStep, of the type INIT_PARTITION's SgdConfig names) once per partition per
// clock, and answers pulls as soon as the requested version exists.
//
// Updates run on the Handle() thread (apply_threads 0) or on a pool of
// apply_threads threads (server/apply_pool.h), several partitions at once: the
// receive thread then only checks, stores and acks, and goes on reading
// while the partitions are updated. A partition's own updates stay one at a time and
// in clock order, each computed exactly as on one thread, so the weights are
// bitwise the same whatever the number of threads. While a partition is being
// updated, its weights, history and scratch belong to the update: a pull
// that comes meanwhile, even for a version the partition already has, is
// answered when the update ends, with the new version (it has at least the
// updates asked for). A worker that pulls each clock before pushing it (as
// every Nereus client does) never meets this: by the time every worker has
// pushed clock c, each has its weights of clock c.
//
// Lending (BSP, HybComm's measured switching; docs/ARCHITECTURE.md,
// "HybComm"): a LEND of version v makes the workers the owners of a
// partition's updates of clocks >= v (its tensor travels as sufficient
// factors among them). The server answers it with the arrays asked for once
// the partition has version v, and from then on makes no update of a clock
// >= v: pushes of such a clock are stored (at most one clock's, the one the
// hand-back will start from) and pulls of a later version wait. A HAND_BACK
// of version v' >= v brings the weights and the solver's histories the
// workers reached; the partition takes version v' and its updates resume
// with the pushes of clock v'. Both are checked whole before anything
// changes (ERROR otherwise).
#ifndef NEREUS_SERVER_PARAM_SERVER_H_
#define NEREUS_SERVER_PARAM_SERVER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "common/net/message.h"
#include "common/net/refusal_log.h"
#include "server/apply_pool.h"
#include "server/checkpoint.h"

namespace nereus {

// Where a ParamServer's replies go. Node implements it in production; tests
// can capture replies directly.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void Reply(const Endpoint& to, Message msg) = 0;
};

// With a pool, a group of updates started by one Handle() call whose
// gradients total fewer bytes than this is still made on the Handle() thread:
// waking a pool thread (tens of microseconds on a virtual machine) costs
// more than updating 64 KB. It is --batch_bytes' default, the most a
// batched push carries.
constexpr uint64_t kInlineApplyBytes = 64 << 10;

struct ParamServerOptions {
  int rank = 0;
  int num_workers = 1;
  pb::Consistency consistency = pb::BSP;
  int staleness = 0;          // SSP: a pull for clock c accepts version >= c - staleness.
  int max_clocks_ahead = 64;  // Pushes more than this many clocks ahead are refused.
  // BSP: every `checkpoint_every` clocks (0: never), once every partition of this
  // shard has applied exactly that many updates, the shard's state goes to
  // `checkpoint_sink` (weights and history copied). Called on the thread that
  // made the clock's last update (the Handle() thread or a pool thread),
  // under the server's lock; it may block (back-pressure).
  int64_t checkpoint_every = 0;
  std::function<void(std::unique_ptr<ShardState>)> checkpoint_sink;
  // Called (on that same thread) each time every partition of this shard has
  // applied at least `clock` updates (BSP/SSP; after a checkpoint of that
  // clock was handed over). A test hook: nereus_server --crash_at_clock.
  std::function<void(int64_t clock)> on_clock;
  // The job's shape, recorded in checkpoints and checked when one is loaded.
  int num_servers = 1;
  uint64_t partition_bytes = 0;
  // 0: every update is made on the Handle() thread, before Handle() returns.
  // N >= 1: on a pool of N threads (see above); updates of less than
  // kInlineApplyBytes in all, started by one Handle() call, are still made
  // on the Handle() thread (a hand-off costs more than they do).
  int apply_threads = 0;
  uint64_t inline_apply_bytes = kInlineApplyBytes;
  // Test hook: called on the thread about to make an update of (tensor,
  // partition) for `clock` (a pool thread, without the server's lock; or the
  // Handle() thread, with it). Null: none.
  std::function<void(int tensor, int partition, int64_t clock)> before_update;
  // Host-local aggregation (pb::JobConfig.host_aggregation): each worker's
  // host group by worker rank (Node::HostGroup), ascending. A PUSH must then
  // come from its host's first worker and cover exactly its host's workers
  // (Header.covers); the update adds the host sums in rank order and scales
  // by 1/num_workers. Empty: every worker pushes its own gradients.
  std::vector<std::vector<int>> host_groups;
};

// Clocks beyond this are refused (a peer's number must not overflow the
// server's arithmetic; 2^40 clocks is centuries of training).
constexpr int64_t kMaxClock = int64_t{1} << 40;

// Thread-compatible: Handle() must not be called concurrently (the node's
// receive thread is the only caller). Snapshot(), ExportState(), WaitIdle()
// and StopApplyThreads() may be called from any thread. With apply_threads
// >= 1 the sink's Reply() is also called from the pool's threads (never two
// at once: every reply is sent under the server's lock).
class ParamServer {
 public:
  ParamServer(ParamServerOptions options, ReplySink* sink);
  // Waits for the updates in flight (StopApplyThreads).
  ~ParamServer();

  // Handles one request from `from` (a worker of rank `worker_rank`, or -1 if
  // the sender is not a known worker). Never crashes on a bad request: it
  // answers ERROR naming the problem and leaves the parameters untouched.
  void Handle(const Endpoint& from, int worker_rank, StatusOr<Message> msg, const pb::Header& partial)
      NEREUS_LOCKS_EXCLUDED(mu_);

  // A copy of partition (tensor, partition)'s weights and its version (tests). Waits
  // until no update is in flight (WaitIdle).
  StatusOr<std::pair<std::vector<float>, int64_t>> Snapshot(int tensor, int partition) const NEREUS_LOCKS_EXCLUDED(mu_);

  // Blocks until every update started so far has been made and its replies
  // sent (returns at once with apply_threads 0).
  void WaitIdle() const NEREUS_LOCKS_EXCLUDED(mu_);

  // Waits for the updates in flight, then makes every later one on the
  // Handle() thread and stops the pool's threads. Call it before the sink
  // goes away (ServerNode: before its Node), as the pool's threads reply.
  // Idempotent.
  void StopApplyThreads() NEREUS_LOCKS_EXCLUDED(mu_);
  int num_partitions() const NEREUS_LOCKS_EXCLUDED(mu_);

  // Loads a checkpoint (before the first Handle()): the partitions, their
  // versions, weights and history, and the solver settings. The job's
  // INIT_PARTITIONs must then name exactly these partitions with the same layout
  // (else they are refused, naming the difference); the first INIT_PARTITION's
  // solver settings replace the checkpoint's, as Caffe's resume takes the
  // current solver file. Errors name what does not match the job.
  Status Restore(ShardState state) NEREUS_LOCKS_EXCLUDED(mu_);

  // This shard's state now (tests; the checkpoint hook builds the same).
  // Waits until no update is in flight (WaitIdle).
  std::unique_ptr<ShardState> ExportState() const NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  struct PendingClock {
    // By worker rank: a worker's gradients, or a host's sum at the host's
    // first worker (the others' entries empty, their `covered` set).
    std::vector<Buffer> grads;
    std::vector<bool> covered;  // By worker rank: its gradients are in (alone or in a sum).
    int count = 0;              // Workers covered.
  };
  struct PendingPull {
    Endpoint to;
    uint64_t request_id;
    int64_t min_version;
    int32_t priority;
  };
  struct PendingLend {
    Endpoint to;
    uint64_t request_id;
    std::vector<std::string> arrays;
  };
  // One partition's share of a PUSH (a whole plain PUSH, or one part of a merged one).
  struct PushPart {
    int tensor;
    int partition;
    int64_t clock;
    uint64_t pull_request_id;
    std::vector<Buffer> payload;
    std::vector<int> covers;  // The workers it sums (Header.covers), the sender first.
  };
  // A PULL_REPLY waiting to be sent at the end of the current Handle() call;
  // replies to one destination go out merged.
  struct OutPart {
    pb::Part part;
    Buffer weights;
    int32_t priority;
  };
  struct Partition {
    pb::PartitionMeta meta;
    std::shared_ptr<std::vector<float>> weights;  // Shared with pull replies in flight.
    // The buffer an update writes into when `weights` is still shared: the
    // previous weights, reused once no reply or checkpoint holds them.
    std::shared_ptr<std::vector<float>> spare;
    std::vector<float> history;               // Caffe's history of the solver type.
    std::vector<float> history2;              // AdaDelta and Adam: the second history; else empty.
    std::vector<float> average;               // Scratch for the averaged gradient.
    int64_t version = 0;                      // Updates applied.
    std::map<int64_t, PendingClock> pending;  // BSP/SSP: clock -> gradients.
    std::vector<PendingPull> pulls;           // Waiting for a newer version.
    int64_t apply_begin_us = 0;               // Of the last update.
    int64_t apply_us = 0;
    bool initialized = true;  // false: restored, no INIT_PARTITION yet.
    // An update of this partition is being made (on the pool): weights, spare,
    // history, history2 and average are the update's until it ends.
    bool applying = false;
    // ASYNC: pushes not yet applied, in arrival order (clock, gradient).
    std::deque<std::pair<int64_t, Buffer>> async_grads;
    // Lent to the workers from this version on (-1: not lent): no update of
    // a clock >= lent_from until the HAND_BACK.
    int64_t lent_from = -1;
    std::vector<PendingLend> lends;  // LENDs waiting for version lent_from.
    // LENDs of a later version than lent_from, waiting for its HAND_BACK: a
    // layer that goes back to the servers at clock s and is lent again from
    // s' > s can have a worker's LEND of s' arrive before worker 0's
    // HAND_BACK of s (they travel on different connections), version first.
    std::vector<std::pair<int64_t, PendingLend>> deferred_lends;
  };
  // One update of one partition: what it reads, and when it was made.
  struct Update {
    Partition* partition = nullptr;
    int64_t clock = 0;                 // BSP/SSP: the pending clock (== version); ASYNC: the push's clock.
    std::vector<const float*> grads;   // BSP/SSP: in worker-rank order (a host's sum at its first worker), held by
                                       // partition->pending until Complete.
    Buffer async_grad;                 // ASYNC: the gradient, held here.
    uint64_t bytes = 0;                // Gradient bytes read.
    int64_t begin_us = 0, end_us = 0;  // When Compute ran.
  };
  using Key = std::pair<int, int>;  // (tensor, partition)

  Status HandleInit(const Endpoint& from, const Message& msg) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status HandlePush(const Endpoint& from, int worker, const Message& msg) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status CheckPush(int worker, const PushPart& p, uint64_t bytes) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a PUSH of `worker` may cover `covers` (see ParamServerOptions::host_groups).
  Status CheckCovers(int worker, const std::vector<int>& covers) const;
  void StorePush(const Endpoint& from, int worker, PushPart p) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status HandlePull(const Endpoint& from, const Message& msg) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status HandleLend(const Endpoint& from, int worker, const Message& msg) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status HandleHandBack(const Endpoint& from, int worker, const Message& msg) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The names of a partition's state arrays, in the order a HAND_BACK carries them:
  // "weights", "history" and, for AdaDelta and Adam, "update_history".
  std::vector<std::string> StateArrays() const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a HAND_BACK: p's deferred LENDs become its lends (or are refused,
  // naming why, if the HAND_BACK passed their version).
  void TakeDeferredLends(Partition* p) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers p's LENDs once p has version lent_from and no update is in flight.
  void AnswerLends(Partition* p) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StatusOr<Partition*> FindPartition(const pb::Header& h) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether p's next update can start now (it is not being updated and its
  // gradients are all in); if so marks p applying and fills *u.
  bool TakeUpdate(Partition* p, Update* u) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether p's next update has every gradient it needs.
  bool TakeUpdateReady(const Partition* p) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the updates of the partitions in ready_ (made ready by this Handle()
  // call): on this thread, or as one task on the pool.
  void StartUpdates() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the updates of `group`, and then every update they make ready,
  // until none is left (a pool task; called without the lock).
  void RunUpdates(std::vector<Update> group) NEREUS_LOCKS_EXCLUDED(mu_);
  // The arithmetic of one update: the average of the gradients (in
  // worker-rank order; one: taken as it is) and one solver step. Touches
  // only u->partition's weights, spare, history(2) and average, which are the
  // update's while it is applying: called with or without the lock.
  void Compute(Update* u);
  // After Compute, under the lock: the version, the timing, the clock
  // hooks, and the pulls now answerable.
  void Complete(Update* u) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerPulls(Partition* p) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendWeights(Partition* p, const Endpoint& to, uint64_t request_id, int32_t priority)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushReplies() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendError(const Endpoint& to, const pb::Header& request, const Status& status)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Ack(const Endpoint& to, pb::Op op, const pb::Header& request) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t MinVersion(int64_t clock) const;
  // Keeps min_version_/at_min_ current after p's version grew by one.
  void VersionAdvanced(int64_t old_version) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a version jumped (a HAND_BACK): recounts, and runs the clock hooks
  // of every clock the smallest version passed.
  void VersionsJumped() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecountMin() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnClock(int64_t clock) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::unique_ptr<ShardState> ExportLocked(int64_t clock) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status CheckRestoredInitialized() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ParamServerOptions options_;
  ReplySink* const sink_;
  bool have_sgd_ = false;
  pb::SgdConfig sgd_;

  // Guards everything below but the arrays an update in flight owns (see
  // Partition::applying); Handle() and the end of every update hold it.
  mutable Mutex mu_;
  mutable CondVar idle_cv_;  // Signalled when in_flight_ drops to 0.
  std::map<Key, Partition> partitions_ NEREUS_GUARDED_BY(mu_);
  std::vector<Partition*> ready_ NEREUS_GUARDED_BY(mu_);  // Partitions the current Handle() call may have made ready.
  int in_flight_ NEREUS_GUARDED_BY(mu_) = 0;              // Pool tasks submitted and not yet done.
  int applying_ NEREUS_GUARDED_BY(mu_) = 0;               // Partitions with applying set.
  bool inline_only_ NEREUS_GUARDED_BY(mu_) = false;       // StopApplyThreads was called.
  // Null with apply_threads 0 and after StopApplyThreads.
  std::unique_ptr<ApplyPool> pool_ NEREUS_GUARDED_BY(mu_);
  // Filled and flushed within Handle().
  std::map<Endpoint, std::vector<OutPart>> outbox_ NEREUS_GUARDED_BY(mu_);
  // The smallest version over partitions_ and how many partitions have it.
  int64_t min_version_ NEREUS_GUARDED_BY(mu_) = 0;
  size_t at_min_ NEREUS_GUARDED_BY(mu_) = 0;
  int64_t restored_clock_ NEREUS_GUARDED_BY(mu_) = -1;  // The checkpoint loaded by Restore(), or -1.
  // false from Restore() until every restored partition was initialized.
  bool restored_checked_ NEREUS_GUARDED_BY(mu_) = true;
  RefusalLog refusals_;  // Refused requests, rate-limited per peer (its own lock).
};

}  // namespace nereus

#endif  // NEREUS_SERVER_PARAM_SERVER_H_

// ParamServer: one shard of the parameters. Holds the chunks placed on it
// (weights and the solver's history: one or two arrays per chunk), collects
// the workers' gradients, applies Caffe's solver step (common/sgd.h
// SolverStep, of the type INIT_CHUNK's SgdConfig names) once per chunk per
// clock, and answers pulls as soon as the requested version exists.
#ifndef NEREUS_SERVER_PARAM_SERVER_H_
#define NEREUS_SERVER_PARAM_SERVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/message.h"
#include "common/refusal_log.h"
#include "common/status.h"
#include "server/checkpoint.h"

namespace nereus {

// Where a ParamServer's replies go. Node implements it in production; tests
// can capture replies directly.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void Reply(const Endpoint& to, Message msg) = 0;
};

struct ParamServerOptions {
  int rank = 0;
  int num_workers = 1;
  pb::Consistency consistency = pb::BSP;
  int staleness = 0;          // SSP: a pull for clock c accepts version >= c - staleness.
  int max_clocks_ahead = 64;  // Pushes more than this many clocks ahead are refused.
  // BSP: every `checkpoint_every` clocks (0: never), once every chunk of this
  // shard has applied exactly that many updates, the shard's state goes to
  // `checkpoint_sink` (weights shared copy-on-write, history copied). Called
  // on the Handle() thread; it may block (back-pressure).
  int64_t checkpoint_every = 0;
  std::function<void(std::unique_ptr<ShardState>)> checkpoint_sink;
  // Called on the Handle() thread each time every chunk of this shard has
  // applied at least `clock` updates (BSP/SSP; after a checkpoint of that
  // clock was handed over). A test hook: nereus_server --crash_at_clock.
  std::function<void(int64_t clock)> on_clock;
  // The job's shape, recorded in checkpoints and checked when one is loaded.
  int num_servers = 1;
  uint64_t chunk_bytes = 0;
};

// Clocks beyond this are refused (a peer's number must not overflow the
// server's arithmetic; 2^40 clocks is centuries of training).
constexpr int64_t kMaxClock = int64_t{1} << 40;

// Thread-compatible: Handle() must not be called concurrently (the node's
// receive thread is the only caller). Snapshot() may be called from any thread.
class ParamServer {
 public:
  ParamServer(ParamServerOptions options, ReplySink* sink);

  // Handles one request from `from` (a worker of rank `worker_rank`, or -1 if
  // the sender is not a known worker). Never crashes on a bad request: it
  // answers ERROR naming the problem and leaves the parameters untouched.
  void Handle(const Endpoint& from, int worker_rank, StatusOr<Message> msg, const pb::Header& partial);

  // A copy of chunk (tensor, chunk)'s weights and its version (tests).
  StatusOr<std::pair<std::vector<float>, int64_t>> Snapshot(int tensor, int chunk) const;
  int num_chunks() const;

  // Loads a checkpoint (before the first Handle()): the chunks, their
  // versions, weights and history, and the solver settings. The job's
  // INIT_CHUNKs must then name exactly these chunks with the same layout
  // (else they are refused, naming the difference); the first INIT_CHUNK's
  // solver settings replace the checkpoint's, as Caffe's resume takes the
  // current solver file. Errors name what does not match the job.
  Status Restore(ShardState state);

  // This shard's state now (tests; the checkpoint hook builds the same).
  std::unique_ptr<ShardState> ExportState() const;

 private:
  struct PendingClock {
    std::vector<Buffer> grads;  // By worker rank.
    int count = 0;
  };
  struct PendingPull {
    Endpoint to;
    uint64_t request_id;
    int64_t min_version;
    int32_t priority;
  };
  // One chunk's share of a PUSH (a whole plain PUSH, or one part of a merged one).
  struct PushPart {
    int tensor;
    int chunk;
    int64_t clock;
    uint64_t pull_request_id;
    std::vector<Buffer> payload;
  };
  // A PULL_REPLY waiting to be sent at the end of the current Handle() call;
  // replies to one destination go out merged.
  struct OutPart {
    pb::Part part;
    Buffer weights;
    int32_t priority;
  };
  struct Chunk {
    pb::ChunkMeta meta;
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
    bool initialized = true;  // false: restored, no INIT_CHUNK yet.
  };
  using Key = std::pair<int, int>;  // (tensor, chunk)

  Status HandleInit(const Endpoint& from, const Message& msg);
  Status HandlePush(const Endpoint& from, int worker, const Message& msg);
  Status CheckPush(int worker, const PushPart& p, uint64_t bytes);
  void StorePush(const Endpoint& from, int worker, PushPart p);
  Status HandlePull(const Endpoint& from, const Message& msg);
  StatusOr<Chunk*> FindChunk(const pb::Header& h);
  void ApplyReady(Chunk* c);
  // One update of `c` by the average of `grads` (in worker-rank order; one:
  // taken as it is).
  void Apply(Chunk* c, const std::vector<const float*>& grads, int64_t iter);
  void AnswerPulls(Chunk* c);
  void SendWeights(Chunk* c, const Endpoint& to, uint64_t request_id, int32_t priority);
  void FlushReplies();
  void SendError(const Endpoint& to, const pb::Header& request, const Status& status);
  void Ack(const Endpoint& to, pb::Op op, const pb::Header& request);
  int64_t MinVersion(int64_t clock) const;
  // Keeps min_version_/at_min_ current after c's version grew by one.
  void VersionAdvanced(int64_t old_version);
  void RecountMin();
  void OnClock(int64_t clock);
  std::unique_ptr<ShardState> ExportLocked(int64_t clock) const;
  Status CheckRestoredInitialized();

  const ParamServerOptions options_;
  ReplySink* const sink_;
  bool have_sgd_ = false;
  pb::SgdConfig sgd_;

  mutable std::mutex mu_;  // Guards chunks_ against Snapshot(); Handle() holds it.
  std::map<Key, Chunk> chunks_;
  std::map<Endpoint, std::vector<OutPart>> outbox_;  // Filled and flushed within Handle().
  // The smallest version over chunks_ and how many chunks have it.
  int64_t min_version_ = 0;
  size_t at_min_ = 0;
  int64_t restored_clock_ = -1;   // The checkpoint loaded by Restore(), or -1.
  bool restored_checked_ = true;  // false from Restore() until every restored chunk was initialized.
  RefusalLog refusals_;           // Refused requests, rate-limited per peer.
};

}  // namespace nereus

#endif  // NEREUS_SERVER_PARAM_SERVER_H_

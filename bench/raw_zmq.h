// The raw ZeroMQ baselines of `nereus_bench transport`.
//
// "fair" (the default) moves what a Nereus job moves, the way it moves it,
// with nothing of Nereus in between: the same topology (S server nodes and W
// worker nodes, each with its own ZeroMQ context and I/O thread, talking over
// TCP on 127.0.0.1), the same messages (a tensor cut into the same partitions,
// placed on the same servers by ShardMap; a push is one message per partition
// answered by an ack, a pull a request per partition answered by the partition's
// bytes), the same connections (--streams per worker and server, partitions
// spread over them alike), the same buffer handling (gradients and server
// weights go out zero-copy; a server keeps each received gradient frame
// until the partition's next one replaces it, or with an update until the
// update; a pulled partition is received into ZeroMQ's message and copied into
// the worker's one reused destination buffer, as ReplyRouter::ReceiveWeights
// does), the same window of operations in flight and the same phases in one
// job after the same warm-up. What it leaves out is ours to pay for: the
// protobuf header (a 16-byte struct instead), the request table, the
// scheduler, the SGD step, the handle and its thread hand-off (a raw worker
// polls its own sockets), and BSP (a raw server answers a pull at once).
// RawFair's `update` adds back the one of these any parameter server pays,
// the update (--raw_update), made on threads beside the receive thread as a
// Nereus server makes it (--apply_threads).
//
// "stream" is the first baseline: W threads stream zero-copy messages of the
// tensor's size one way through PUSH/PULL sockets of one context. It is an
// upper bound on one-way bytes, not a like-for-like comparison.
#ifndef NEREUS_BENCH_RAW_ZMQ_H_
#define NEREUS_BENCH_RAW_ZMQ_H_

#include <cstdint>
#include <memory>

#include "common/base/status.h"
#include "proto/nereus.pb.h"

namespace nereus {
namespace bench {

struct RawResult {
  double gbps = 0;   // Tensor bytes moved (both ways for push+pull), Gbit/s.
  double cpu_s = 0;  // Process CPU seconds while it ran (all threads).
  double wall_s = 0;
};

enum class RawOp { kPush, kPull, kPushPull };

struct RawFairOptions {
  int servers = 1;
  int workers = 1;
  uint64_t bytes = 0;            // The tensor.
  uint64_t partition_bytes = 0;  // Cut into partitions of at most this, placed by ShardMap.
  int iters = 1;                 // Timed operations per worker, per phase.
  int window = 4;                // push and pull: operations in flight per worker.
  // Null: no update. Else the servers also do the one thing a parameter
  // server must do that ZeroMQ does not: once every worker has pushed a
  // partition, take one Caffe SGD step with this config (at `base_lr`) on their
  // gradients averaged in worker order, with the functions ParamServer makes
  // its updates with (SgdStepAveraged; in place, or out of place into a spare
  // buffer while a pull reply still holds the weights).
  const pb::SgdConfig* update = nullptr;
  // With an update: 0, on the server's receive thread right after the ack;
  // N, on N threads of its own beside the receive thread, as a Nereus server
  // with --apply_threads=N (a pull of a partition being updated then waits for
  // the update, as on a Nereus server).
  int apply_threads = 0;
  // Connections (DEALERs) from each worker to each server; partition i travels
  // on connection i % streams, as a Nereus client spreads partitions over
  // its --streams connections.
  int streams = 1;
  // push+pull operations made before the timed phases (a Nereus job of the
  // transport bench makes as many).
  int warmup = 0;
};

struct RawFairResult {
  RawResult push, pull, pushpull;
};

// One job (every connection made and answered once first), then `warmup`
// push+pulls untimed, then the three phases timed in turn, as a Nereus job of
// the transport bench runs them: `iters` pushes with `window` in flight,
// `iters` pulls with `window` in flight (into separate buffers), `iters`
// push+pulls one at a time (the push and the pull of a clock together).
// Pulls are answered at once (no BSP wait) but for a partition being updated.
StatusOr<RawFairResult> RawFair(const RawFairOptions& options);

// One server and one worker of the fair baseline, for pull round trips of
// one `bytes` partition (a 16-byte request, the partition back, copied into place),
// timed one at a time so that they can be interleaved with Nereus's.
class RawRttJob {
 public:
  static StatusOr<std::unique_ptr<RawRttJob>> Start(uint64_t bytes);
  ~RawRttJob();
  double PullMicros();  // One round trip, in microseconds.

 private:
  RawRttJob();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The one-way stream baseline (see above).
RawResult RawStream(int senders, int receivers, uint64_t bytes, int iters);

// CPU seconds used by this process so far (every thread).
double ProcessCpuSeconds();

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_RAW_ZMQ_H_

// The raw ZeroMQ baselines of `nereus_bench transport`.
//
// "fair" (the default) moves what a Nereus job moves, the way it moves it,
// with nothing of Nereus in between: the same topology (S server nodes and W
// worker nodes, each with its own ZeroMQ context and I/O thread, talking over
// TCP on 127.0.0.1), the same messages (a tensor cut into the same chunks,
// placed on the same servers by ShardMap; a push is one message per chunk
// answered by an ack, a pull a request per chunk answered by the chunk's
// bytes), the same buffer handling (gradients and server weights go out
// zero-copy; a server keeps each received gradient frame until the chunk's
// next one replaces it; a pulled chunk is received into ZeroMQ's message and
// copied into the worker's one reused destination buffer, as
// ReplyRouter::ReceiveWeights does) and the same window of operations in
// flight. What it leaves out is ours to pay for: the protobuf header (a
// 16-byte struct instead), the request table, the scheduler, the SGD step,
// the handle and its thread hand-off (a raw worker polls its own sockets), and
// BSP (a raw server answers a pull at once). RawFair's `update` adds back the
// one of these any parameter server pays, the update (--raw_update).
//
// "stream" is the first baseline: W threads stream zero-copy messages of the
// tensor's size one way through PUSH/PULL sockets of one context. It is an
// upper bound on one-way bytes, not a like-for-like comparison.
#ifndef NEREUS_BENCH_RAW_ZMQ_H_
#define NEREUS_BENCH_RAW_ZMQ_H_

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "proto/nereus.pb.h"

namespace nereus {
namespace bench {

struct RawResult {
  double gbps = 0;   // Tensor bytes moved (both ways for push+pull), Gbit/s.
  double cpu_s = 0;  // Process CPU seconds while it ran (all threads).
  double wall_s = 0;
};

enum class RawOp { kPush, kPull, kPushPull };

// `iters` operations of a `bytes` tensor per worker, `window` in flight
// (push, pull) or one at a time (push+pull: the push and the pull of a clock
// together), cut into `chunk_bytes` chunks over `servers` servers.
//
// `update` (null: none) makes the servers also do the one thing a parameter
// server must do that ZeroMQ does not: once every worker has pushed a chunk,
// take one Caffe SGD step with this config (at `base_lr`) on their gradients
// averaged in worker order, on the server's thread right after the ack, the
// way ParamServer::Apply makes it (SgdStep or SgdStepAveraged; in place, or
// out of place into a spare buffer while a pull reply still holds them).
// Pulls are still answered at once (no BSP wait), so this baseline never
// waits where a Nereus server would.
StatusOr<RawResult> RawFair(RawOp op, int servers, int workers, uint64_t bytes, uint64_t chunk_bytes, int iters,
                            int window, const pb::SgdConfig* update = nullptr);

// One server and one worker of the fair baseline, for pull round trips of
// one `bytes` chunk (a 16-byte request, the chunk back, copied into place),
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

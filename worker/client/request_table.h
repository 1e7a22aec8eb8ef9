// RequestTable: the client's outstanding requests, by request id.
#ifndef NEREUS_WORKER_CLIENT_REQUEST_TABLE_H_
#define NEREUS_WORKER_CLIENT_REQUEST_TABLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "worker/client/handle_state.h"

namespace nereus {

// What the reply to one request completes.
struct Request {
  enum class Kind {
    kAck,   // PUSH_ACK / INIT_ACK: one unit of `state`.
    kPull,  // PULL_REPLY (explicit, or riding on a push): a partition into `dst`.
    kPong,  // PONG of a calibration PING.
  };
  Request() = default;
  // A request of `kind` completing `state`, sent to `server`.
  Request(Kind kind, StatePtr state, int server) : kind(kind), state(std::move(state)), server(server) {}

  Kind kind = Kind::kAck;
  StatePtr state;
  int server = 0;
  uint64_t credit = 0;   // Released to the server's queue on completion.
  float* dst = nullptr;  // kPull: where the partition goes.
  uint64_t length = 0;   // kPull: partition elements.
  std::string what;      // For error messages and the timeline.
  int64_t clock = 0;
  int64_t enqueue_us = 0, dispatch_us = 0;
  std::vector<uint64_t> piggyback;  // kAck: pulls that ride on this push.
  bool rides_push = false;          // kPull: rides on a push (it leaves when that push does).
  // kAck of a PUSH held by host-local aggregation until the host's other
  // workers' gradients come (HostAggregator).
  bool held = false;
};

// Owns every request that awaits a reply, the request ids and the job's abort
// status. Touched by user threads (registering), the servers' queues
// (stamping dispatch times), the receive thread (taking replies) and the
// abort handler (failing everything). Thread-safe; its lock is a leaf.
class RequestTable {
 public:
  // A fresh request id (never 0).
  uint64_t NextId();

  // Registers `r` under `id`. After FailAll the job is gone and no reply will
  // come: r.state fails at once instead, as if FailAll had come just after.
  void Add(uint64_t id, Request r);

  // Removes request `id` into `out`; false if there is none (already failed).
  bool Take(uint64_t id, Request* out);

  // Records when request `id` left its queue (if it is still outstanding).
  void StampDispatch(uint64_t id, int64_t us);
  // Request `id` (a PUSH) is held by host-local aggregation, or no longer.
  void SetHeld(uint64_t id, bool held);

  // Fails every outstanding request with `why` (annotated with what each
  // was); the first `why` is kept as aborted().
  void FailAll(const Status& why);

  // OK until FailAll.
  Status aborted() const;

  // What a timed-out wait for `state` names: each request still awaiting a
  // reply that completes it, in request-id order, with its destination (a
  // server; past the first `num_servers`, another worker) and whether it
  // left this client, at most 4 and a count of the rest; or, with none
  // open, that the transport still holds the sent bytes.
  std::string DescribeOutstanding(const Handle::State* state, int num_servers) const;

 private:
  mutable Mutex mu_;
  uint64_t next_id_ NEREUS_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Request> requests_ NEREUS_GUARDED_BY(mu_);
  Status abort_ NEREUS_GUARDED_BY(mu_);
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_REQUEST_TABLE_H_

// PriorityScheduler: orders a worker's outgoing partitions per server.
#ifndef NEREUS_WORKER_CLIENT_PRIORITY_SCHEDULER_H_
#define NEREUS_WORKER_CLIENT_PRIORITY_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "common/base/mutex.h"

namespace nereus {

// Each server has a queue; the most urgent item (smallest priority, then the
// earliest enqueued) is sent first, and at most `credit_bytes` are in flight
// to a server at once (an item larger than the credit is sent alone). A newly
// queued urgent item goes ahead of every queued less urgent one; items already
// sent are never recalled. Thread-safe. `send` runs under the scheduler's lock,
// in dispatch order, and must not call back into the scheduler.
//
// Batching (batch_bytes > 0 and a `send_batch`): when the item about to be
// sent is small (batch_cost < batch_bytes) and more items of the same
// batch_kind wait behind it in its server's queue, they leave together: the
// next most urgent items are taken in priority order while they are of that
// kind, fit the credit and keep the batch's cost within batch_bytes; the
// first one that does not stops the batch (it is never skipped over, so a
// batch never sends a less urgent item before a more urgent one). Only items
// already queued are batched: nothing waits for a batch to fill.
class PriorityScheduler {
 public:
  struct Item {
    int server = 0;
    uint64_t priority = 0;       // Smaller is more urgent.
    uint64_t bytes = 0;          // Counted against the credit until Complete().
    std::function<void()> send;  // Puts the item on the wire (alone).
    // Batching: items of the same nonzero kind may leave as one batch; cost
    // is what the item adds to it (0: never batched). `unit` is opaque here,
    // handed to send_batch with the item.
    int batch_kind = 0;
    uint64_t batch_cost = 0;
    std::shared_ptr<void> unit;
  };
  // Puts two or more items (of one server and kind, in priority order) on
  // the wire as one message. Runs under the scheduler's lock, like `send`.
  using BatchSend = std::function<void(std::vector<Item>* batch)>;

  // credit_bytes == 0: no limit (everything is sent at once, in queue order).
  // batch_bytes == 0 or no send_batch: every item is sent alone.
  PriorityScheduler(int num_servers, uint64_t credit_bytes, uint64_t batch_bytes = 0, BatchSend send_batch = nullptr);

  void Enqueue(Item item);
  // Queues every item, then sends: items enqueued together may batch.
  void EnqueueAll(std::vector<Item> items);
  // An item of `bytes` to `server` has completed: frees its credit, sends more.
  void Complete(int server, uint64_t bytes);

  uint64_t in_flight(int server) const;
  size_t queued(int server) const;

 private:
  struct Entry {
    uint64_t priority;
    uint64_t seq;
    mutable Item item;
    bool operator>(const Entry& o) const { return priority != o.priority ? priority > o.priority : seq > o.seq; }
  };
  struct Server {
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    uint64_t in_flight = 0;
  };
  void Dispatch(Server* s) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Fits(const Server& s, uint64_t bytes) const {
    return credit_ == 0 || s.in_flight == 0 || s.in_flight + bytes <= credit_;
  }

  const uint64_t credit_;
  const uint64_t batch_bytes_;
  const BatchSend send_batch_;
  mutable Mutex mu_;
  uint64_t seq_ NEREUS_GUARDED_BY(mu_) = 0;
  std::vector<Server> servers_ NEREUS_GUARDED_BY(mu_);
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_PRIORITY_SCHEDULER_H_

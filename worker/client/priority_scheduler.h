// PriorityScheduler: orders a worker's outgoing partitions per server.
#ifndef NEREUS_WORKER_PRIORITY_SCHEDULER_H_
#define NEREUS_WORKER_PRIORITY_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <vector>

namespace nereus {

// Each server has a queue; the most urgent item (smallest priority, then the
// earliest enqueued) is sent first, and at most `credit_bytes` are in flight
// to a server at once (an item larger than the credit is sent alone). A newly
// queued urgent item goes ahead of every queued less urgent one; items already
// sent are never recalled. Thread-safe. `send` runs under the scheduler's lock,
// in dispatch order, and must not call back into the scheduler.
class PriorityScheduler {
 public:
  struct Item {
    int server = 0;
    uint64_t priority = 0;       // Smaller is more urgent.
    uint64_t bytes = 0;          // Counted against the credit until Complete().
    std::function<void()> send;  // Puts the item on the wire.
  };

  // credit_bytes == 0: no limit (everything is sent at once, in queue order).
  PriorityScheduler(int num_servers, uint64_t credit_bytes);

  void Enqueue(Item item);
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
  void Dispatch(Server* s);  // REQUIRES(mu_)

  const uint64_t credit_;
  mutable std::mutex mu_;
  uint64_t seq_ = 0;               // GUARDED_BY(mu_)
  std::vector<Server> servers_;    // GUARDED_BY(mu_)
};

}  // namespace nereus

#endif  // NEREUS_WORKER_PRIORITY_SCHEDULER_H_

// HostAggregator: host-local aggregation on a host's first worker
// (pb::JobConfig.host_aggregation, docs/HOSTAGG.md).
#ifndef NEREUS_WORKER_CLIENT_HOST_AGGREGATOR_H_
#define NEREUS_WORKER_CLIENT_HOST_AGGREGATOR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "common/net/message.h"
#include "common/net/node.h"
#include "worker/client/server_queues.h"
#include "worker/client/tensor_registry.h"

namespace nereus {

// The workers of a host send the gradients of every partition that goes
// through the servers (each PUSH, plain, merged or batched) to the host's
// first worker (its lowest rank) instead of the partition's server. There,
// this class holds the first worker's own PUSHes to the servers until every
// other local worker's gradients of each of their partitions (tensor,
// partition, clock) are in, replaces each by the sum in rank order (own
// first: it has the lowest rank), marks the message as covering the host's
// workers (Header.covers) and lets it go with its own priority: a partition
// leaves the host as soon as every local worker has produced it, in the
// client's priority order. The weights that ride back on that push (its
// pull) are handed on to every local worker whose push asked for them, under
// its own request id; an error for them is handed on likewise.
//
// A local worker's PUSH is acknowledged (PUSH_ACK) as soon as it is stored
// here: its credit to this worker is freed, and its pushed buffers are no
// longer its own.
//
// Thread-safe: Hold runs on user threads (ServerQueues::Submit), the rest
// on the Node's receive thread. Messages that complete on the receive
// thread are submitted from there (ServerQueues::SubmitHeld), never under
// this class's lock.
class HostAggregator {
 public:
  // Every pointer must outlive this object. `tensors` validates the local
  // workers' pushes (they come after every worker's Init); `requests` marks
  // the PUSHes held (RequestTable::SetHeld).
  HostAggregator(Node* node, ServerQueues* queues, const TensorRegistry* tensors, RequestTable* requests)
      : node_(node), queues_(queues), tensors_(tensors), requests_(requests) {}

  // Once the job is known (Client start-up): the host's workers, ascending,
  // this worker first; the number of servers (destinations below it are
  // servers). Local pushes that came before are handled now.
  void Configure(std::vector<int> group, int num_servers) NEREUS_LOCKS_EXCLUDED(mu_);

  // ServerQueues::Submit: takes out of `messages` this worker's PUSHes to
  // servers and holds them; appends those (of this call or held before)
  // whose every part has every local worker's gradients, summed.
  void Hold(std::vector<QueuedMessage>* messages) NEREUS_LOCKS_EXCLUDED(mu_);

  // A PUSH from worker `rank` at `from` (ReplyRouter). A malformed one, or
  // one from a worker of another host, is answered with ERROR naming why.
  void OnLocalPush(const Endpoint& from, int rank, Message msg) NEREUS_LOCKS_EXCLUDED(mu_);

  // The weights answering this worker's pull `id` arrived (version, the
  // server's apply times, the frames): hands them on to the local workers
  // whose pushes carried a pull of that partition and clock.
  void Relay(uint64_t id, int64_t version, int64_t apply_begin_us, int64_t apply_us, const std::vector<Buffer>& frames)
      NEREUS_LOCKS_EXCLUDED(mu_);
  // This worker's pull `id` failed: so do the local workers' it stood for.
  void FailRelay(uint64_t id, const Status& why) NEREUS_LOCKS_EXCLUDED(mu_);

  // Gradients of local workers summed, and weights handed on (ClientStats).
  uint64_t summed_bytes() const NEREUS_LOCKS_EXCLUDED(mu_);
  uint64_t relayed_bytes() const NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::tuple<int, int, int64_t>;  // (tensor, partition, clock)
  // A local worker's gradients of one partition and clock, and the request
  // id of the pull its push carried (0: none).
  struct Share {
    Endpoint from;
    Buffer grad;
    uint64_t pull_id = 0;
  };
  // One of this worker's PUSHes, held.
  struct Held {
    QueuedMessage unit;
    std::vector<Key> keys;  // Per part, in payload order.
    int missing = 0;        // Parts still waiting for a local worker.
  };
  struct Slot {
    std::map<int, Share> shares;  // By local rank.
    std::shared_ptr<Held> held;   // The own PUSH this part is in (null: not yet).
    int part = -1;                // Its index there.
  };

  // The keys of `msg`'s parts, and each part's pull request id.
  static void PartsOf(const Message& msg, std::vector<Key>* keys, std::vector<uint64_t>* pulls);
  void TakeLocal(const Endpoint& from, int rank, Message msg, std::vector<QueuedMessage>* ready,
                 std::vector<std::pair<Endpoint, Message>>* replies) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `h` has every share: sums its parts, records the relays and moves it to `ready`.
  // Takes `h` by value: the slots it erases hold the callers' references.
  void Finish(std::shared_ptr<Held> h, std::vector<QueuedMessage>* ready,
              std::vector<std::pair<Endpoint, Message>>* replies) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An ERROR answering `request` (each unit of a batch).
  // Removes and returns the local pulls this worker's pull `id` stands for
  // (none: empty), counting `bytes` handed on to each.
  std::vector<std::pair<Endpoint, uint64_t>> TakeRelays(uint64_t id, uint64_t bytes) NEREUS_LOCKS_EXCLUDED(mu_);
  static Message ErrorReply(const pb::Header& request, const std::string& why);
  void Send(std::vector<std::pair<Endpoint, Message>> replies);

  Node* const node_;
  ServerQueues* const queues_;
  const TensorRegistry* const tensors_;
  RequestTable* const requests_;  // Marks the held PUSHes (timed-out waits name them).

  mutable Mutex mu_;
  std::vector<int> group_ NEREUS_GUARDED_BY(mu_);  // Empty until Configure.
  int num_servers_ NEREUS_GUARDED_BY(mu_) = 0;
  struct Early {
    Endpoint from;
    int rank;
    Message msg;
  };
  std::vector<Early> early_ NEREUS_GUARDED_BY(mu_);  // Local pushes before Configure.
  std::map<Key, Slot> slots_ NEREUS_GUARDED_BY(mu_);
  // This worker's pull id -> the local workers' (endpoint, pull id) it stands for.
  std::map<uint64_t, std::vector<std::pair<Endpoint, uint64_t>>> relays_ NEREUS_GUARDED_BY(mu_);
  uint64_t summed_bytes_ NEREUS_GUARDED_BY(mu_) = 0;
  uint64_t relayed_bytes_ NEREUS_GUARDED_BY(mu_) = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_HOST_AGGREGATOR_H_

// ServerQueues: the per-server queues between the client and the wire.
#ifndef NEREUS_WORKER_CLIENT_SERVER_QUEUES_H_
#define NEREUS_WORKER_CLIENT_SERVER_QUEUES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/net/message.h"
#include "common/net/node.h"
#include "nereus/client.h"
#include "worker/client/priority_scheduler.h"
#include "worker/client/request_table.h"

namespace nereus {

class HostAggregator;

// A built message waiting in its server's queue.
struct QueuedMessage {
  int server;           // Destination: server `server`, or worker `server - num_servers` above that.
  uint64_t priority;    // Smaller is more urgent (0 for everything when not prioritized).
  uint64_t bytes;       // Payload bytes counted against the server's credit.
  int stream;           // Connection to the server (kFull spreads partitions).
  uint64_t request_id;  // Stamped with its dispatch time.
  Message msg;
  // What this unit adds to a batch (--batch_bytes): a PUSH's payload bytes,
  // the weights a PULL asks for. 0: never batched (INIT_PARTITION, FACTORS).
  uint64_t batch_bytes = 0;
};

// The batch of `units` (two or more PUSHes, or two or more PULLs, to one
// server, in the order given) as one wire message: every unit's parts (a
// plain unit becomes one part) with the unit's request id on each, the
// payload frames in the same order, header request_id 0, the first unit's
// destination and stream, the smallest header priority. The units' requests
// stay separate in the RequestTable (see nereus.proto, Header.parts).
QueuedMessage CoalesceUnits(std::vector<QueuedMessage> units);

// Owns the PriorityScheduler (one queue and one credit per server) and the
// counters of what was sent. Submit runs on user threads; messages leave on
// whichever thread dispatches them (the submitter, or the receive thread
// when a reply frees credit). Thread-safe.
//
// Small PUSHes (or PULLs) queued together for one server leave as one
// message of at most `batch_bytes` (Start): see PriorityScheduler and
// CoalesceUnits.
class ServerQueues {
 public:
  // `node` and `requests` must outlive this object; Start before Submit.
  ServerQueues(Node* node, RequestTable* requests) : node_(node), requests_(requests) {}

  // Once the job is known: `credit_bytes` per destination, 0 for no limit.
  // Destinations 0..num_servers-1 are the servers, num_servers + w is worker
  // w (sufficient factors go to the other workers with the same priorities
  // and credit as pushes).
  // `batch_bytes` > 0 batches small queued units per server up to that many
  // bytes (0: every unit alone).
  void Start(int num_servers, int num_workers, uint64_t credit_bytes, uint64_t batch_bytes = 0);

  // Host-local aggregation, on a host's first worker: every Submit passes
  // its messages through `aggregator` (HostAggregator::Hold) first. Set once,
  // before the first Submit.
  void set_aggregator(HostAggregator* aggregator) { aggregator_ = aggregator; }

  // Queues `messages` in order. Never call under a lock a send can take
  // (the scheduler may send at once, stamping the RequestTable).
  void Submit(std::vector<QueuedMessage> messages);
  // Submit without the aggregator (the messages it lets go).
  void SubmitHeld(std::vector<QueuedMessage> messages);

  // The request that held `credit` bytes on `server` completed.
  void Release(int server, uint64_t credit);

  // Weights received from a server (counted by the ReplyRouter).
  void CountPulled(uint64_t bytes) { pull_bytes_.fetch_add(bytes); }

  ClientStats stats() const;

 private:
  Node* const node_;
  RequestTable* const requests_;
  std::unique_ptr<PriorityScheduler> scheduler_;  // Set by Start, then read-only.
  int num_servers_ = 0;                           // Likewise.
  HostAggregator* aggregator_ = nullptr;          // Likewise (set_aggregator).
  std::atomic<uint64_t> push_messages_{0}, push_bytes_{0}, pull_messages_{0};
  std::atomic<uint64_t> factor_messages_{0}, factor_bytes_{0};
  std::atomic<uint64_t> batches_{0}, batched_units_{0};
  std::atomic<uint64_t> pull_bytes_{0};
  std::atomic<uint64_t> host_push_messages_{0}, host_push_bytes_{0};

  // `to_worker`: the message goes to another worker (FACTORS, or a PUSH to
  // the host's first worker).
  void Count(const Message& msg, bool to_worker);
  void SendBatch(std::vector<PriorityScheduler::Item>* batch);
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_SERVER_QUEUES_H_

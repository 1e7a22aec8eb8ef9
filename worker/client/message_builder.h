// MessageBuilder: turns partitions into PUSH, PULL and INIT_PARTITION messages.
#ifndef NEREUS_WORKER_CLIENT_MESSAGE_BUILDER_H_
#define NEREUS_WORKER_CLIENT_MESSAGE_BUILDER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "nereus/client.h"
#include "worker/client/handle_state.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/tensor_registry.h"

namespace nereus {

// Builds the messages of one operation and registers, in the RequestTable,
// what each reply completes. Owns nothing but the queueing policy (priority
// and stream of each partition, from the schedule); reads the registry
// (frozen) and registers requests. Called by user threads, concurrently.
// The messages go to ServerQueues::Submit afterwards; nothing completes
// before they are submitted.
//
// A new message kind gets a Build* function here and its reply a case in
// ReplyRouter.
class MessageBuilder {
 public:
  MessageBuilder(const ClientOptions& options, const TensorRegistry* tensors, RequestTable* requests)
      : options_(options), tensors_(tensors), requests_(requests) {}

  // Host-local aggregation, on a worker other than its host's first: every
  // PUSH goes to `destination` (ServerQueues' index of that first worker),
  // which pushes the host's sum and hands back the weights of the pulls
  // riding on it. Set once, before the first BuildPushes.
  void set_push_via(int destination) { push_via_ = destination; }

  // Appends the PUSH messages of `refs` (partitions of `tensors`, whose gradient
  // buffers are `grads`) to `out`: one per partition, or merged per server up to
  // partition_bytes when `merge`. Each message's ack completes one unit of
  // `push`; the payloads hold `guard`, which completes one more when the
  // transport has released them all. With `pull_of`, each partition's weights for
  // clock + 1 ride along, land in the tensor's data buffer and complete one
  // unit of pull_of(tensor).
  void BuildPushes(const std::vector<PartitionRef>& refs, const std::vector<const float*>& grads,
                   const std::vector<int>& tensors, int64_t clock, const std::function<StatePtr(int)>& pull_of,
                   const StatePtr& push, const std::shared_ptr<SendGuard>& guard, uint64_t base_priority,
                   std::vector<QueuedMessage>* out, bool merge = false);

  // Appends one PULL per partition of `refs` into `dst` (the tensor's buffer) for
  // `clock`; each reply completes one unit of `pull`.
  void BuildPulls(const std::vector<PartitionRef>& refs, float* dst, int64_t clock, const StatePtr& pull,
                  uint64_t base_priority, std::vector<QueuedMessage>* out);

  // HybComm's switches (BSP). A LEND per partition of `refs` for version
  // `clock`, asking for the solver's history, which its LEND_REPLY writes
  // into `history` (the tensor's rows x cols) at the partition's offset,
  // completing one unit of `done`; with `history` null, asking for nothing
  // (a tensor sent as factors from the job's first clock, whose history is
  // zero: the LEND only tells the servers).
  void BuildLends(const std::vector<PartitionRef>& refs, float* history, int64_t clock, const StatePtr& done,
                  uint64_t base_priority, std::vector<QueuedMessage>* out);
  // A HAND_BACK per partition of `refs`: the weights (`weights`, sent without
  // copying and held by `guard`) and `history` at version `clock`; each ack
  // completes one unit of `push`.
  void BuildHandBacks(const std::vector<PartitionRef>& refs, const float* weights, const Buffer& history, int64_t clock,
                      const StatePtr& push, const std::shared_ptr<SendGuard>& guard, uint64_t base_priority,
                      std::vector<QueuedMessage>* out);

  // Appends the INIT_PARTITION messages of `tensor` (values and solver settings);
  // each ack completes one unit of `state`, `guard` one more.
  void BuildInit(int tensor, const pb::SgdConfig& sgd, const float* values, const StatePtr& state,
                 const std::shared_ptr<SendGuard>& guard, std::vector<QueuedMessage>* out);

 private:
  bool Prioritized() const;
  // Queue order: (layer, partition) when prioritized, arrival order otherwise.
  uint64_t Priority(uint64_t base, uint64_t partition) const { return Prioritized() ? base + partition : 0; }
  int StreamFor(uint64_t partition) const;
  // Registers `r` (the request of partition `ref` at `clock`, queued at
  // `now`, described as "<what> of tensor ... partition ...") under a new id
  // and returns the message that carries it: to its server, the `order`-th
  // of its call in queue order, taking `credit` of the server's credit (and
  // giving it back on completion); its header's op, id, tensor, partition,
  // clock and priority set.
  QueuedMessage Enqueue(Request r, const char* what, pb::Op op, const PartitionRef& ref, int64_t clock, int64_t now,
                        uint64_t base_priority, uint64_t order, uint64_t credit);

  const ClientOptions options_;
  const TensorRegistry* const tensors_;
  RequestTable* const requests_;
  int push_via_ = -1;  // -1: each PUSH to its partition's server.
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_MESSAGE_BUILDER_H_

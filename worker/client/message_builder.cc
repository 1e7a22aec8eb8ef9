#include "worker/client/message_builder.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "worker/client/timeline.h"

namespace nereus {

bool MessageBuilder::Prioritized() const {
  return options_.schedule == Schedule::kPriority || options_.schedule == Schedule::kFull;
}

int MessageBuilder::StreamFor(uint64_t partition) const {
  const int n = std::max(1, options_.streams);
  return options_.schedule == Schedule::kFull ? static_cast<int>(partition % n) : 0;
}

void MessageBuilder::BuildPushes(const std::vector<PartitionRef>& refs, const std::vector<const float*>& grads,
                                 const std::vector<int>& tensors, int64_t clock,
                                 const std::function<StatePtr(int)>& pull_of, const StatePtr& push,
                                 const std::shared_ptr<SendGuard>& guard, uint64_t base_priority,
                                 std::vector<QueuedMessage>* out, bool merge) {
  auto grad_of = [&](int tensor) {
    for (size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i] == tensor) return grads[i];
    LOG(FATAL) << "no gradient buffer for tensor " << tensor;
    return static_cast<const float*>(nullptr);
  };
  const int64_t now = MonotonicMicros();
  // Index in `out` of the message being filled per server (merge only).
  const size_t first = out->size();
  std::map<int, size_t> open;
  // The ack request of out[first + i]; registered once its message is whole.
  std::vector<Request> acks;
  uint64_t partition = 0;
  for (const PartitionRef& r : refs) {
    const PartitionPlacement& c = *r.placement;
    const TensorSpec& spec = tensors_->spec(r.tensor);
    const uint64_t bytes = c.length * sizeof(float);
    Buffer payload(guard, grad_of(r.tensor) + c.offset, bytes);
    // Merged per server as ever; sent to it, or to the host's first worker.
    const int to = push_via_ >= 0 ? push_via_ : c.server;
    uint64_t pull_id = 0;
    if (pull_of) {
      pull_id = requests_->NextId();
      Request pr(Request::Kind::kPull, pull_of(r.tensor), to);
      pr.dst = spec.data + c.offset;
      pr.length = c.length;
      pr.what = "weights of tensor \"" + spec.name + "\" partition " + std::to_string(c.partition);
      pr.clock = clock + 1;
      pr.enqueue_us = now;
      pr.rides_push = true;
      requests_->Add(pull_id, std::move(pr));
    }
    size_t at = out->size();
    auto it = open.find(c.server);
    if (merge && it != open.end() && (*out)[it->second].bytes + bytes <= tensors_->partition_bytes()) at = it->second;
    if (at == out->size()) {
      out->push_back(QueuedMessage{to, Priority(base_priority, partition), 0, StreamFor(partition), requests_->NextId(),
                                   Message()});
      ++partition;
      open[c.server] = at;
      QueuedMessage& w = out->back();
      w.msg.header.set_op(pb::PUSH);
      w.msg.header.set_request_id(w.request_id);
      w.msg.header.set_dtype(pb::FLOAT32);
      Request ack(Request::Kind::kAck, push, to);
      ack.what = "PUSH of tensor \"" + spec.name + "\" partition " + std::to_string(c.partition);
      ack.clock = clock;
      ack.enqueue_us = now;
      acks.push_back(std::move(ack));
    }
    QueuedMessage& w = (*out)[at];
    Request& ack = acks[at - first];
    if (pull_id != 0) ack.piggyback.push_back(pull_id);
    w.bytes += bytes;
    ack.credit = w.bytes;
    pb::Part part;
    part.set_tensor(r.tensor);
    part.set_partition(c.partition);
    part.set_clock(clock);
    part.set_payload_bytes(bytes);
    part.set_pull_request_id(pull_id);
    *w.msg.header.add_parts() = part;
    w.msg.payload.push_back(std::move(payload));
    if (!merge) open.erase(c.server);
  }
  for (size_t i = first; i < out->size(); ++i) {
    requests_->Add((*out)[i].request_id, std::move(acks[i - first]));
    (*out)[i].batch_bytes = (*out)[i].bytes;
    // Single-part messages use the plain header fields.
    pb::Header& h = (*out)[i].msg.header;
    if (h.parts_size() != 1) continue;
    const pb::Part p = h.parts(0);
    h.clear_parts();
    h.set_tensor(p.tensor());
    h.set_partition(p.partition());
    h.set_clock(p.clock());
    h.set_pull_request_id(p.pull_request_id());
    h.set_priority(static_cast<int32_t>(p.tensor() * 1000 + p.partition()));
  }
}

QueuedMessage MessageBuilder::Enqueue(Request r, const char* what, pb::Op op, const PartitionRef& ref, int64_t clock,
                                      int64_t now, uint64_t base_priority, uint64_t order, uint64_t credit) {
  const PartitionPlacement& c = *ref.placement;
  const uint64_t id = requests_->NextId();
  r.credit = credit;
  r.what = std::string(what) + " of tensor \"" + tensors_->spec(ref.tensor).name + "\" partition " +
           std::to_string(c.partition);
  r.clock = clock;
  r.enqueue_us = now;
  requests_->Add(id, std::move(r));
  QueuedMessage w{c.server, Priority(base_priority, order), credit, StreamFor(order), id, Message()};
  pb::Header& h = w.msg.header;
  h.set_op(op);
  h.set_request_id(id);
  h.set_tensor(ref.tensor);
  h.set_partition(c.partition);
  h.set_clock(clock);
  h.set_priority(static_cast<int32_t>(ref.tensor * 1000 + c.partition));
  return w;
}

void MessageBuilder::BuildPulls(const std::vector<PartitionRef>& refs, float* dst, int64_t clock, const StatePtr& pull,
                                uint64_t base_priority, std::vector<QueuedMessage>* out) {
  const int64_t now = MonotonicMicros();
  uint64_t partition = 0;
  for (const PartitionRef& ref : refs) {
    const PartitionPlacement& c = *ref.placement;
    Request r(Request::Kind::kPull, pull, c.server);
    r.dst = dst + c.offset;
    r.length = c.length;
    // A pull request is a few bytes and its reply leaves the server when
    // the update exists: it is ordered by priority but takes no credit
    // (holding credit while the server waits for other workers would stall
    // the pushes that update needs).
    QueuedMessage w = Enqueue(std::move(r), "PULL", pb::PULL, ref, clock, now, base_priority, partition++, 0);
    w.batch_bytes = c.length * sizeof(float);  // The reply's size.
    out->push_back(std::move(w));
  }
}

void MessageBuilder::BuildLends(const std::vector<PartitionRef>& refs, float* history, int64_t clock,
                                const StatePtr& done, uint64_t base_priority, std::vector<QueuedMessage>* out) {
  const int64_t now = MonotonicMicros();
  uint64_t partition = 0;
  for (const PartitionRef& ref : refs) {
    const PartitionPlacement& c = *ref.placement;
    // Answered as a pull is (ReplyRouter: the one frame into dst).
    Request r(history != nullptr ? Request::Kind::kPull : Request::Kind::kAck, done, c.server);
    r.dst = history != nullptr ? history + c.offset : nullptr;
    r.length = history != nullptr ? c.length : 0;
    QueuedMessage w = Enqueue(std::move(r), "history", pb::LEND, ref, clock, now, base_priority, partition++, 0);
    if (history != nullptr) w.msg.header.add_state_arrays("history");
    out->push_back(std::move(w));
  }
}

void MessageBuilder::BuildHandBacks(const std::vector<PartitionRef>& refs, const float* weights, const Buffer& history,
                                    int64_t clock, const StatePtr& push, const std::shared_ptr<SendGuard>& guard,
                                    uint64_t base_priority, std::vector<QueuedMessage>* out) {
  const int64_t now = MonotonicMicros();
  uint64_t partition = 0;
  for (const PartitionRef& ref : refs) {
    const PartitionPlacement& c = *ref.placement;
    const uint64_t bytes = c.length * sizeof(float);
    QueuedMessage w = Enqueue(Request(Request::Kind::kAck, push, c.server), "HAND_BACK", pb::HAND_BACK, ref, clock, now,
                              base_priority, partition++, 2 * bytes);
    pb::Header& h = w.msg.header;
    h.set_dtype(pb::FLOAT32);
    h.add_state_arrays("weights");
    h.add_state_arrays("history");
    w.msg.payload.emplace_back(guard, weights + c.offset, bytes);
    w.msg.payload.push_back(history.Slice(c.offset * sizeof(float), bytes));
    out->push_back(std::move(w));
  }
}

void MessageBuilder::BuildInit(int tensor, const pb::SgdConfig& sgd, const float* values, const StatePtr& state,
                               const std::shared_ptr<SendGuard>& guard, std::vector<QueuedMessage>* out) {
  const TensorSpec& spec = tensors_->spec(tensor);
  for (const PartitionRef& r : tensors_->Refs(tensor)) {
    const PartitionPlacement& c = *r.placement;
    const uint64_t id = requests_->NextId();
    Request req(Request::Kind::kAck, state, c.server);
    req.what = "INIT_PARTITION of tensor \"" + spec.name + "\" partition " + std::to_string(c.partition);
    requests_->Add(id, std::move(req));
    QueuedMessage w{c.server, 0, 0, 0, id, Message()};
    pb::Header& h = w.msg.header;
    h.set_op(pb::INIT_PARTITION);
    h.set_request_id(id);
    h.set_tensor(tensor);
    h.set_partition(c.partition);
    h.set_dtype(pb::FLOAT32);
    auto* meta = h.mutable_partition_meta();
    meta->set_tensor(tensor);
    meta->set_partition(c.partition);
    meta->set_offset(c.offset);
    meta->set_length(c.length);
    meta->set_lr_mult(spec.lr_mult);
    meta->set_decay_mult(spec.decay_mult);
    meta->set_tensor_name(spec.name);
    *h.mutable_sgd() = sgd;
    w.msg.payload.emplace_back(guard, values + c.offset, c.length * sizeof(float));
    out->push_back(std::move(w));
  }
}

}  // namespace nereus

#include "worker/client/server_queues.h"

#include <algorithm>
#include <utility>

#include "worker/client/host_aggregator.h"
#include "worker/client/timeline.h"

namespace nereus {

QueuedMessage CoalesceUnits(std::vector<QueuedMessage> units) {
  CHECK(!units.empty());
  QueuedMessage out{units[0].server, units[0].priority, 0, units[0].stream, 0, Message(), 0};
  pb::Header& h = out.msg.header;
  const pb::Op op = units[0].msg.header.op();
  CHECK(op == pb::PUSH || op == pb::PULL) << OpName(op);
  h.set_op(op);
  h.set_request_id(0);
  if (op == pb::PUSH) h.set_dtype(pb::FLOAT32);
  // A host's sums (host-local aggregation) cover its workers, all alike.
  *h.mutable_covers() = units[0].msg.header.covers();
  int32_t priority = units[0].msg.header.priority();
  for (QueuedMessage& u : units) {
    const pb::Header& uh = u.msg.header;
    CHECK_EQ(uh.op(), op);
    CHECK_EQ(u.server, out.server);
    CHECK_EQ(uh.covers_size(), h.covers_size());
    priority = std::min(priority, uh.priority());
    out.bytes += u.bytes;
    out.batch_bytes += u.batch_bytes;
    if (uh.parts_size() == 0) {
      pb::Part* p = h.add_parts();
      p->set_tensor(uh.tensor());
      p->set_partition(uh.partition());
      p->set_clock(uh.clock());
      p->set_payload_bytes(u.msg.payload_bytes());
      p->set_request_id(u.request_id);
      p->set_pull_request_id(uh.pull_request_id());
    } else {
      for (const pb::Part& part : uh.parts()) {
        pb::Part* p = h.add_parts();
        *p = part;
        p->set_request_id(u.request_id);
      }
    }
    for (Buffer& b : u.msg.payload) out.msg.payload.push_back(std::move(b));
  }
  h.set_priority(priority);
  return out;
}

void ServerQueues::Start(int num_servers, int num_workers, uint64_t credit_bytes, uint64_t batch_bytes) {
  num_servers_ = num_servers;
  scheduler_ =
      std::make_unique<PriorityScheduler>(num_servers + num_workers, credit_bytes, batch_bytes,
                                          [this](std::vector<PriorityScheduler::Item>* batch) { SendBatch(batch); });
}

void ServerQueues::Count(const Message& msg, bool to_worker) {
  if (msg.header.op() == pb::PUSH && to_worker) {
    host_push_messages_.fetch_add(1);
    host_push_bytes_.fetch_add(msg.payload_bytes());
  } else if (msg.header.op() == pb::PUSH) {
    push_messages_.fetch_add(1);
    push_bytes_.fetch_add(msg.payload_bytes());
  } else if (msg.header.op() == pb::PULL) {
    pull_messages_.fetch_add(1);
  } else if (msg.header.op() == pb::HAND_BACK) {
    push_bytes_.fetch_add(msg.payload_bytes());  // A switch's state, with the other bytes to the servers.
  } else if (msg.header.op() == pb::FACTORS) {
    factor_messages_.fetch_add(1);
    factor_bytes_.fetch_add(msg.payload_bytes());
  }
}

void ServerQueues::Submit(std::vector<QueuedMessage> messages) {
  if (aggregator_ != nullptr) aggregator_->Hold(&messages);
  SubmitHeld(std::move(messages));
}

void ServerQueues::SubmitHeld(std::vector<QueuedMessage> messages) {
  if (messages.empty()) return;
  std::vector<PriorityScheduler::Item> items;
  items.reserve(messages.size());
  for (QueuedMessage& m : messages) {
    PriorityScheduler::Item item;
    item.server = m.server;
    item.priority = m.priority;
    item.bytes = m.bytes;
    // Requests to servers batch, and PUSHes to the host's first worker
    // (host-local aggregation: a batch there completes several of its held
    // pushes at once, which then batch again); a destination above
    // num_servers_ is a worker.
    const pb::Op op = m.msg.header.op();
    if ((m.server < num_servers_ && (op == pb::PUSH || op == pb::PULL)) ||
        (m.server >= num_servers_ && op == pb::PUSH)) {
      item.batch_kind = op;
      item.batch_cost = m.batch_bytes;
    }
    const Endpoint* to = m.server < num_servers_ ? &node_->server(m.server) : &node_->worker(m.server - num_servers_);
    auto shared = std::make_shared<QueuedMessage>(std::move(m));
    item.unit = shared;
    const bool to_worker = m.server >= num_servers_;
    item.send = [this, to, shared, to_worker] {
      requests_->StampDispatch(shared->request_id, MonotonicMicros());
      Count(shared->msg, to_worker);
      Status st = node_->Send(*to, std::move(shared->msg), shared->stream);
      if (!st.ok()) LOG(ERROR) << "worker " << node_->rank() << ": send failed: " << st;
    };
    items.push_back(std::move(item));
  }
  scheduler_->EnqueueAll(std::move(items));
}

void ServerQueues::SendBatch(std::vector<PriorityScheduler::Item>* batch) {
  const int64_t now = MonotonicMicros();
  std::vector<QueuedMessage> units;
  units.reserve(batch->size());
  for (PriorityScheduler::Item& item : *batch) {
    QueuedMessage& u = *std::static_pointer_cast<QueuedMessage>(item.unit);
    requests_->StampDispatch(u.request_id, now);
    units.push_back(std::move(u));
  }
  batches_.fetch_add(1);
  batched_units_.fetch_add(units.size());
  QueuedMessage m = CoalesceUnits(std::move(units));
  const bool to_worker = m.server >= num_servers_;
  Count(m.msg, to_worker);
  Status st = node_->Send(to_worker ? node_->worker(m.server - num_servers_) : node_->server(m.server),
                          std::move(m.msg), m.stream);
  if (!st.ok()) LOG(ERROR) << "worker " << node_->rank() << ": send of a batch failed: " << st;
}

void ServerQueues::Release(int server, uint64_t credit) {
  if (credit > 0) scheduler_->Complete(server, credit);
}

ClientStats ServerQueues::stats() const {
  ClientStats s;
  s.push_messages = push_messages_.load();
  s.push_bytes = push_bytes_.load();
  s.pull_messages = pull_messages_.load();
  s.factor_messages = factor_messages_.load();
  s.factor_bytes = factor_bytes_.load();
  s.batches = batches_.load();
  s.batched_units = batched_units_.load();
  s.pull_bytes = pull_bytes_.load();
  s.host_push_messages = host_push_messages_.load();
  s.host_push_bytes = host_push_bytes_.load();
  return s;
}

}  // namespace nereus

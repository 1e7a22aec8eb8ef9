#include "worker/client/server_queues.h"

#include <utility>

#include "worker/client/timeline.h"

namespace nereus {

void ServerQueues::Start(int num_servers, int num_workers, uint64_t credit_bytes) {
  num_servers_ = num_servers;
  scheduler_ = std::make_unique<PriorityScheduler>(num_servers + num_workers, credit_bytes);
}

void ServerQueues::Submit(std::vector<QueuedMessage> messages) {
  for (QueuedMessage& m : messages) {
    PriorityScheduler::Item item;
    item.server = m.server;
    item.priority = m.priority;
    item.bytes = m.bytes;
    const Endpoint* to = m.server < num_servers_ ? &node_->server(m.server) : &node_->worker(m.server - num_servers_);
    auto shared = std::make_shared<QueuedMessage>(std::move(m));
    item.send = [this, to, shared] {
      requests_->StampDispatch(shared->request_id, MonotonicMicros());
      if (shared->msg.header.op() == pb::PUSH) {
        push_messages_.fetch_add(1);
        push_bytes_.fetch_add(shared->msg.payload_bytes());
      } else if (shared->msg.header.op() == pb::PULL) {
        pull_messages_.fetch_add(1);
      } else if (shared->msg.header.op() == pb::FACTORS) {
        factor_messages_.fetch_add(1);
        factor_bytes_.fetch_add(shared->msg.payload_bytes());
      }
      Status st = node_->Send(*to, std::move(shared->msg), shared->stream);
      if (!st.ok()) LOG(ERROR) << "worker " << node_->rank() << ": send failed: " << st;
    };
    scheduler_->Enqueue(std::move(item));
  }
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
  return s;
}

}  // namespace nereus

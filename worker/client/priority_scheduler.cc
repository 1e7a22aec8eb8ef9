#include "worker/client/priority_scheduler.h"

#include <glog/logging.h>

#include <utility>

namespace nereus {

PriorityScheduler::PriorityScheduler(int num_servers, uint64_t credit_bytes, uint64_t batch_bytes, BatchSend send_batch)
    : credit_(credit_bytes),
      batch_bytes_(send_batch ? batch_bytes : 0),
      send_batch_(std::move(send_batch)),
      servers_(num_servers) {}

void PriorityScheduler::Enqueue(Item item) {
  MutexLock lock(&mu_);
  CHECK_GE(item.server, 0);
  CHECK_LT(item.server, static_cast<int>(servers_.size()));
  Server& s = servers_[item.server];
  const uint64_t p = item.priority;
  s.queue.push(Entry{p, seq_++, std::move(item)});
  Dispatch(&s);
}

void PriorityScheduler::EnqueueAll(std::vector<Item> items) {
  MutexLock lock(&mu_);
  std::vector<bool> touched(servers_.size(), false);
  for (Item& item : items) {
    CHECK_GE(item.server, 0);
    CHECK_LT(item.server, static_cast<int>(servers_.size()));
    touched[item.server] = true;
    const uint64_t p = item.priority;
    servers_[item.server].queue.push(Entry{p, seq_++, std::move(item)});
  }
  for (size_t i = 0; i < servers_.size(); ++i)
    if (touched[i]) Dispatch(&servers_[i]);
}

void PriorityScheduler::Complete(int server, uint64_t bytes) {
  MutexLock lock(&mu_);
  Server& s = servers_.at(server);
  CHECK_GE(s.in_flight, bytes) << "completing more bytes than are in flight";
  s.in_flight -= bytes;
  Dispatch(&s);
}

void PriorityScheduler::Dispatch(Server* s) {
  while (!s->queue.empty()) {
    if (!Fits(*s, s->queue.top().item.bytes)) return;
    Item item = std::move(s->queue.top().item);
    s->queue.pop();
    s->in_flight += item.bytes;
    const bool batchable =
        batch_bytes_ > 0 && item.batch_kind != 0 && item.batch_cost > 0 && item.batch_cost < batch_bytes_;
    if (!batchable || s->queue.empty()) {
      item.send();
      continue;
    }
    std::vector<Item> batch;
    uint64_t cost = item.batch_cost;
    const int kind = item.batch_kind;
    batch.push_back(std::move(item));
    while (!s->queue.empty()) {
      const Item& next = s->queue.top().item;
      if (next.batch_kind != kind || next.batch_cost == 0 || cost + next.batch_cost > batch_bytes_ ||
          !Fits(*s, next.bytes))
        break;
      cost += next.batch_cost;
      s->in_flight += next.bytes;
      batch.push_back(std::move(s->queue.top().item));
      s->queue.pop();
    }
    if (batch.size() == 1) {
      batch[0].send();
    } else {
      send_batch_(&batch);
    }
  }
}

uint64_t PriorityScheduler::in_flight(int server) const {
  MutexLock lock(&mu_);
  return servers_.at(server).in_flight;
}

size_t PriorityScheduler::queued(int server) const {
  MutexLock lock(&mu_);
  return servers_.at(server).queue.size();
}

}  // namespace nereus

#include "worker/client/priority_scheduler.h"

#include <glog/logging.h>

namespace nereus {

PriorityScheduler::PriorityScheduler(int num_servers, uint64_t credit_bytes)
    : credit_(credit_bytes), servers_(num_servers) {}

void PriorityScheduler::Enqueue(Item item) {
  std::lock_guard<std::mutex> lock(mu_);
  CHECK_GE(item.server, 0);
  CHECK_LT(item.server, static_cast<int>(servers_.size()));
  Server& s = servers_[item.server];
  const uint64_t p = item.priority;
  s.queue.push(Entry{p, seq_++, std::move(item)});
  Dispatch(&s);
}

void PriorityScheduler::Complete(int server, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Server& s = servers_.at(server);
  CHECK_GE(s.in_flight, bytes) << "completing more bytes than are in flight";
  s.in_flight -= bytes;
  Dispatch(&s);
}

void PriorityScheduler::Dispatch(Server* s) {
  while (!s->queue.empty()) {
    const Entry& top = s->queue.top();
    if (credit_ != 0 && s->in_flight > 0 && s->in_flight + top.item.bytes > credit_) return;
    Item item = std::move(top.item);
    s->queue.pop();
    s->in_flight += item.bytes;
    item.send();
  }
}

uint64_t PriorityScheduler::in_flight(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return servers_.at(server).in_flight;
}

size_t PriorityScheduler::queued(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return servers_.at(server).queue.size();
}

}  // namespace nereus

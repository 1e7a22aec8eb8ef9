#include "worker/client/request_table.h"

#include <utility>

namespace nereus {

uint64_t RequestTable::NextId() {
  MutexLock lock(&mu_);
  return next_id_++;
}

void RequestTable::Add(uint64_t id, Request r) {
  Status abort;
  {
    MutexLock lock(&mu_);
    if (abort_.ok()) {
      requests_.emplace(id, std::move(r));
      return;
    }
    abort = abort_;
  }
  r.state->Fail(abort.Annotate(r.what));
}

bool RequestTable::Take(uint64_t id, Request* out) {
  MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  *out = std::move(it->second);
  requests_.erase(it);
  return true;
}

void RequestTable::StampDispatch(uint64_t id, int64_t us) {
  MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it != requests_.end()) it->second.dispatch_us = us;
}

void RequestTable::FailAll(const Status& why) {
  std::map<uint64_t, Request> requests;
  {
    MutexLock lock(&mu_);
    if (abort_.ok()) abort_ = why;
    requests.swap(requests_);
  }
  for (auto& [id, r] : requests) r.state->Fail(why.Annotate(r.what));
}

Status RequestTable::aborted() const {
  MutexLock lock(&mu_);
  return abort_;
}

}  // namespace nereus

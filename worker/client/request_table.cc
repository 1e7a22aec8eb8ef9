#include "worker/client/request_table.h"

#include <set>
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

void RequestTable::SetHeld(uint64_t id, bool held) {
  MutexLock lock(&mu_);
  auto it = requests_.find(id);
  if (it != requests_.end()) it->second.held = held;
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

std::string RequestTable::DescribeOutstanding(const Handle::State* state, int num_servers) const {
  constexpr size_t kNamed = 4;
  std::string out;
  size_t open = 0;
  MutexLock lock(&mu_);
  // Pulls riding on a push that has not left yet.
  std::set<uint64_t> queued_riders, held_riders;
  for (const auto& [id, r] : requests_) {
    if (r.dispatch_us == 0) queued_riders.insert(r.piggyback.begin(), r.piggyback.end());
    if (r.held) held_riders.insert(r.piggyback.begin(), r.piggyback.end());
  }
  for (const auto& [id, r] : requests_) {
    if (r.state.get() != state) continue;
    if (++open > kNamed) continue;
    const std::string peer = r.server < num_servers ? "server " + std::to_string(r.server)
                                                    : "worker " + std::to_string(r.server - num_servers);
    const bool held = r.held || (r.rides_push && held_riders.count(id) > 0);
    const bool queued = r.rides_push ? queued_riders.count(id) > 0 : r.dispatch_us == 0;
    out += (out.empty() ? "" : "; ") + peer + " (" + r.what + " of clock " + std::to_string(r.clock) +
           (held     ? ", held here for the gradients of this host's other workers (host-local aggregation)"
            : queued ? ", still queued here"
                     : ", sent") +
           ")";
  }
  if (open > kNamed) out += "; and " + std::to_string(open - kNamed) + " more";
  if (open == 0) out = "the transport to let go of the bytes it sends";
  return out;
}

Status RequestTable::aborted() const {
  MutexLock lock(&mu_);
  return abort_;
}

}  // namespace nereus

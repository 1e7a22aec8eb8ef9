#include "worker/client/host_aggregator.h"

#include <algorithm>
#include <set>
#include <utility>

namespace nereus {

namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string out = "{";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "}";
}

std::string PartName(int tensor, int partition, int64_t clock) {
  return "tensor " + std::to_string(tensor) + " partition " + std::to_string(partition) + " clock " +
         std::to_string(clock);
}

}  // namespace

void HostAggregator::PartsOf(const Message& msg, std::vector<Key>* keys, std::vector<uint64_t>* pulls) {
  const pb::Header& h = msg.header;
  if (h.parts_size() == 0) {
    keys->emplace_back(h.tensor(), h.partition(), h.clock());
    pulls->push_back(h.pull_request_id());
    return;
  }
  for (const pb::Part& p : h.parts()) {
    keys->emplace_back(p.tensor(), p.partition(), p.clock());
    pulls->push_back(p.pull_request_id());
  }
}

Message HostAggregator::ErrorReply(const pb::Header& request, const std::string& why) {
  Message m;
  pb::Header& h = m.header;
  h.set_op(pb::ERROR);
  h.set_error_op(request.op());
  h.set_error(why);
  bool batch = false;
  for (const pb::Part& p : request.parts()) batch = batch || p.request_id() != 0;
  if (batch) {
    // A batch: every unit in it is refused (ReplyRouter fails each).
    for (const pb::Part& p : request.parts()) h.add_parts()->set_request_id(p.request_id());
  } else {
    h.set_request_id(request.request_id());
  }
  return m;
}

void HostAggregator::Send(std::vector<std::pair<Endpoint, Message>> replies) {
  for (auto& [to, msg] : replies) {
    Status st = node_->Send(to, std::move(msg));
    if (!st.ok()) LOG(ERROR) << "worker " << node_->rank() << ": host-local aggregation: send to " << to << ": " << st;
  }
}

void HostAggregator::Configure(std::vector<int> group, int num_servers) {
  std::vector<QueuedMessage> ready;
  std::vector<std::pair<Endpoint, Message>> replies;
  {
    MutexLock lock(&mu_);
    group_ = std::move(group);
    num_servers_ = num_servers;
    std::vector<Early> early = std::move(early_);
    early_.clear();
    for (Early& e : early) TakeLocal(e.from, e.rank, std::move(e.msg), &ready, &replies);
  }
  Send(std::move(replies));
  if (!ready.empty()) queues_->SubmitHeld(std::move(ready));
}

void HostAggregator::Hold(std::vector<QueuedMessage>* messages) {
  std::vector<QueuedMessage> out;
  std::vector<std::pair<Endpoint, Message>> replies;
  {
    MutexLock lock(&mu_);
    if (group_.size() <= 1) return;
    for (QueuedMessage& m : *messages) {
      if (m.server >= num_servers_ || m.msg.header.op() != pb::PUSH) {
        out.push_back(std::move(m));
        continue;
      }
      auto held = std::make_shared<Held>();
      std::vector<uint64_t> pulls;
      PartsOf(m.msg, &held->keys, &pulls);
      held->unit = std::move(m);
      requests_->SetHeld(held->unit.request_id, true);
      for (size_t i = 0; i < held->keys.size(); ++i) {
        Slot& s = slots_[held->keys[i]];
        // The builder never makes two pushes of one partition and clock
        // (a second GradientsReady of a clock is refused before).
        CHECK(s.held == nullptr) << "two pushes of "
                                 << PartName(std::get<0>(held->keys[i]), std::get<1>(held->keys[i]),
                                             std::get<2>(held->keys[i]));
        s.held = held;
        s.part = static_cast<int>(i);
        if (s.shares.size() + 1 < group_.size()) ++held->missing;
      }
      if (held->missing == 0) Finish(held, &out, &replies);
    }
  }
  *messages = std::move(out);
  Send(std::move(replies));
}

void HostAggregator::OnLocalPush(const Endpoint& from, int rank, Message msg) {
  std::vector<QueuedMessage> ready;
  std::vector<std::pair<Endpoint, Message>> replies;
  {
    MutexLock lock(&mu_);
    if (group_.empty()) {
      early_.push_back(Early{from, rank, std::move(msg)});
      return;
    }
    TakeLocal(from, rank, std::move(msg), &ready, &replies);
  }
  Send(std::move(replies));
  if (!ready.empty()) queues_->SubmitHeld(std::move(ready));
}

void HostAggregator::TakeLocal(const Endpoint& from, int rank, Message msg, std::vector<QueuedMessage>* ready,
                               std::vector<std::pair<Endpoint, Message>>* replies) {
  const pb::Header& h = msg.header;
  auto refuse = [&](const std::string& why) {
    LOG(ERROR) << "worker " << node_->rank() << ": host-local aggregation refused a PUSH from worker " << rank << ": "
               << why;
    replies->emplace_back(from, ErrorReply(h, why));
  };
  if (std::find(group_.begin() + 1, group_.end(), rank) == group_.end()) {
    refuse("PUSH from worker " + std::to_string(rank) + " to worker " + std::to_string(node_->rank()) +
           ", which aggregates only its host's workers " + RankList(group_));
    return;
  }
  if (h.dtype() != pb::FLOAT32) {
    refuse("unsupported dtype " + pb::DType_Name(h.dtype()) + " for PUSH (only FLOAT32)");
    return;
  }
  std::vector<Key> keys;
  std::vector<uint64_t> pulls;
  PartsOf(msg, &keys, &pulls);
  if (msg.payload.size() != keys.size()) {
    refuse("PUSH with " + std::to_string(keys.size()) + " part(s) and " + std::to_string(msg.payload.size()) +
           " payload frames");
    return;
  }
  if (!tensors_->frozen()) {
    refuse("PUSH before this worker's Init");
    return;
  }
  std::set<Key> seen;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto [tensor, partition, clock] = keys[i];
    const std::string name = PartName(tensor, partition, clock);
    if (tensor < 0 || tensor >= tensors_->size() || partition < 0 ||
        partition >= static_cast<int>(tensors_->partitions(tensor).size())) {
      refuse("PUSH of unknown " + name);
      return;
    }
    const uint64_t bytes = tensors_->partitions(tensor)[partition].length * sizeof(float);
    if (msg.payload[i].size() != bytes) {
      refuse("PUSH of " + name + " carries " + std::to_string(msg.payload[i].size()) + " bytes, the partition " +
             std::to_string(bytes));
      return;
    }
    if (clock < 0) {
      refuse("PUSH of " + name + ": negative clock");
      return;
    }
    auto it = slots_.find(keys[i]);
    if (!seen.insert(keys[i]).second || (it != slots_.end() && it->second.shares.count(rank) != 0)) {
      refuse("duplicate PUSH from worker " + std::to_string(rank) + " of " + name);
      return;
    }
  }
  // Checked whole: stored, and acknowledged.
  Message ack;
  ack.header.set_op(pb::PUSH_ACK);
  bool batch = false;
  for (const pb::Part& p : h.parts()) batch = batch || p.request_id() != 0;
  if (batch) {
    for (const pb::Part& p : h.parts()) ack.header.add_parts()->set_request_id(p.request_id());
  } else {
    ack.header.set_request_id(h.request_id());
  }
  replies->emplace_back(from, std::move(ack));
  for (size_t i = 0; i < keys.size(); ++i) {
    Slot& s = slots_[keys[i]];
    s.shares[rank] = Share{from, std::move(msg.payload[i]), pulls[i]};
    if (s.held != nullptr && s.shares.size() + 1 == group_.size() && --s.held->missing == 0)
      Finish(s.held, ready, replies);
  }
}

void HostAggregator::Finish(std::shared_ptr<Held> held, std::vector<QueuedMessage>* ready,
                            std::vector<std::pair<Endpoint, Message>>* replies) {
  QueuedMessage& unit = held->unit;
  pb::Header& h = unit.msg.header;
  for (size_t i = 0; i < held->keys.size(); ++i) {
    auto it = slots_.find(held->keys[i]);
    CHECK(it != slots_.end());
    Slot& s = it->second;
    const Buffer& own = unit.msg.payload[i];
    const size_t n = own.size() / sizeof(float);
    // Rank order: this worker's (the host's lowest rank), then the others'
    // ascending (the map's order), one addition each, as the servers sum.
    auto sum = std::make_shared<std::vector<float>>(own.floats(), own.floats() + n);
    float* d = sum->data();
    for (const auto& [rank, share] : s.shares) {
      const float* g = share.grad.floats();
      for (size_t j = 0; j < n; ++j) d[j] += g[j];
      summed_bytes_ += share.grad.size();
    }
    unit.msg.payload[i] = Buffer::Of(sum);
    const uint64_t own_pull =
        h.parts_size() == 0 ? h.pull_request_id() : h.parts(static_cast<int>(i)).pull_request_id();
    for (const auto& [rank, share] : s.shares) {
      if (share.pull_id == 0) continue;
      if (own_pull != 0) {
        relays_[own_pull].emplace_back(share.from, share.pull_id);
      } else {
        pb::Header request;
        request.set_op(pb::PUSH);
        request.set_request_id(share.pull_id);
        replies->emplace_back(share.from,
                              ErrorReply(request, "worker " + std::to_string(rank) + "'s push of " +
                                                      PartName(std::get<0>(held->keys[i]), std::get<1>(held->keys[i]),
                                                               std::get<2>(held->keys[i])) +
                                                      " asks for the weights, but its host's first worker's does not: "
                                                      "the workers of a host must push alike"));
      }
    }
    slots_.erase(it);
  }
  h.clear_covers();
  for (int r : group_) h.add_covers(r);
  requests_->SetHeld(unit.request_id, false);
  ready->push_back(std::move(unit));
}

std::vector<std::pair<Endpoint, uint64_t>> HostAggregator::TakeRelays(uint64_t id, uint64_t bytes) {
  MutexLock lock(&mu_);
  auto it = relays_.find(id);
  if (it == relays_.end()) return {};
  std::vector<std::pair<Endpoint, uint64_t>> to = std::move(it->second);
  relays_.erase(it);
  relayed_bytes_ += bytes * to.size();
  return to;
}

void HostAggregator::Relay(uint64_t id, int64_t version, int64_t apply_begin_us, int64_t apply_us,
                           const std::vector<Buffer>& frames) {
  uint64_t bytes = 0;
  for (const Buffer& b : frames) bytes += b.size();
  const std::vector<std::pair<Endpoint, uint64_t>> to = TakeRelays(id, bytes);
  std::vector<std::pair<Endpoint, Message>> replies;
  for (const auto& [ep, pull_id] : to) {
    Message m;
    m.header.set_op(pb::PULL_REPLY);
    m.header.set_request_id(pull_id);
    m.header.set_clock(version);
    m.header.set_dtype(pb::FLOAT32);
    m.header.set_apply_begin_us(apply_begin_us);
    m.header.set_apply_us(apply_us);
    m.payload = frames;
    replies.emplace_back(ep, std::move(m));
  }
  Send(std::move(replies));
}

void HostAggregator::FailRelay(uint64_t id, const Status& why) {
  const std::vector<std::pair<Endpoint, uint64_t>> to = TakeRelays(id, 0);
  std::vector<std::pair<Endpoint, Message>> replies;
  for (const auto& [ep, pull_id] : to) {
    pb::Header request;
    request.set_op(pb::PULL);
    request.set_request_id(pull_id);
    replies.emplace_back(
        ep, ErrorReply(request, "the push of this host's first worker (worker " + std::to_string(node_->rank()) +
                                    "), which stood for this one's, "
                                    "failed: " +
                                    why.message()));
  }
  Send(std::move(replies));
}

uint64_t HostAggregator::summed_bytes() const {
  MutexLock lock(&mu_);
  return summed_bytes_;
}

uint64_t HostAggregator::relayed_bytes() const {
  MutexLock lock(&mu_);
  return relayed_bytes_;
}

}  // namespace nereus

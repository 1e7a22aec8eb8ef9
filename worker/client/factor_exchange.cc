#include "worker/client/factor_exchange.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "worker/client/timeline.h"

namespace nereus {

FactorExchange::~FactorExchange() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  if (applier_.joinable()) applier_.join();
}

void FactorExchange::Configure(const pb::SgdConfig& sgd, int num_workers, int rank, int num_servers,
                               std::vector<TensorInfo> tensors, bool rebuild, const std::vector<bool>& active,
                               int64_t start) {
  MutexLock lock(&mu_);
  sgd_ = sgd;
  rebuild_ = rebuild;
  num_workers_ = num_workers;
  rank_ = rank;
  num_servers_ = num_servers;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TensorInfo& t = tensors[i];
    State s;
    if (active.empty() || active[i]) {
      s.from = start;
      s.applied = start;
      // The momentum history of the updates this client rebuilds (an applier keeps its own).
      if (rebuild && t.applier == nullptr)
        s.history = std::make_shared<std::vector<float>>(static_cast<size_t>(t.shape.rows * t.shape.cols), 0.0f);
    }
    const int id = t.id;
    s.info = std::move(t);
    tensors_.emplace(id, std::move(s));
  }
  if (!tensors_.empty() && !applier_.joinable()) applier_ = std::thread([this] { ApplyLoop(); });
}

float* FactorExchange::StartFactors(int tensor, int64_t clock, const StatePtr& history_ready) {
  MutexLock lock(&mu_);
  State& s = tensors_.at(tensor);
  CHECK(s.from < 0 || s.until <= clock) << s.info.name << ": a segment of factors starts inside another";
  s.from = clock;
  s.until = std::numeric_limits<int64_t>::max();
  s.applied = clock;
  s.own_clock = clock - 1;
  s.pending.clear();
  // A new array each time: a hand-back may still be sending the last one.
  s.history = std::make_shared<std::vector<float>>(static_cast<size_t>(s.info.shape.rows * s.info.shape.cols), 0.0f);
  s.history_ready = history_ready;
  s.begin_pending = s.info.applier != nullptr;
  return s.history->data();
}

void FactorExchange::StopFactors(int tensor, int64_t clock) {
  MutexLock lock(&mu_);
  State& s = tensors_.at(tensor);
  CHECK(s.from >= 0 && s.from < clock) << s.info.name << ": factors stop at clock " << clock << " outside a segment";
  s.until = clock;
}

Status FactorExchange::HandBackState(int tensor, int64_t clock, const float** weights, Buffer* history) {
  std::shared_ptr<std::vector<float>> h;
  FactorApplier* applier;
  TensorInfo info;
  {
    MutexLock lock(&mu_);
    State& s = tensors_.at(tensor);
    if (s.until != clock || s.applied != clock || !abort_.ok()) {
      if (!abort_.ok()) return abort_;
      return FailedPreconditionError("handing " + s.info.name + " back to the servers at clock " +
                                     std::to_string(clock) + ": it holds " + std::to_string(s.applied) +
                                     " update(s) and its factors stop at clock " + std::to_string(s.until));
    }
    h = s.history;
    applier = s.info.applier;
    info = s.info;
  }
  if (applier != nullptr) {
    // The weights and history live where the applier keeps them.
    h = std::make_shared<std::vector<float>>(static_cast<size_t>(info.shape.rows * info.shape.cols));
    Status st = applier->EndFactors(tensor, clock, info.data, h->data());
    if (!st.ok()) return st.Annotate("handing " + info.name + " back to the servers at clock " + std::to_string(clock));
  } else if (h == nullptr) {
    // Nothing rebuilt here (ClientInternals::sfb_emulated_rebuild): the weights as they are, no momentum.
    h = std::make_shared<std::vector<float>>(static_cast<size_t>(info.shape.rows * info.shape.cols), 0.0f);
  }
  *weights = info.data;
  *history = Buffer::Of(h);
  return Status::OK();
}

void FactorExchange::ApplyLoop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stopping_ && abort_.ok() && ready_.empty()) cv_.Wait(&mu_);
    if (stopping_ || !abort_.ok()) return;
    const auto [tensor, c] = ready_.front();
    ready_.pop_front();
    State& s = tensors_.at(tensor);
    Clock ready = std::move(s.pending.at(c));
    s.pending.erase(c);
    // The first update of a segment starts from the servers' history.
    StatePtr history_ready = c == s.from ? s.history_ready : nullptr;
    const bool begin_factors = c == s.from && s.begin_pending;
    if (begin_factors) s.begin_pending = false;
    std::shared_ptr<std::vector<float>> history = s.history;
    mu_.Unlock();
    Status applied;
    if (history_ready != nullptr) {
      applied = MakeHandle(history_ready).Wait();
      if (!applied.ok())
        applied = applied.Annotate("fetching the servers' history of " + s.info.name + " for clock " +
                                   std::to_string(c) + " (its first as sufficient factors)");
    }
    if (applied.ok() && begin_factors) {
      applied = s.info.applier->BeginFactors(tensor, c, history->data());
      if (!applied.ok())
        applied = applied.Annotate("starting " + s.info.name + " as sufficient factors at clock " + std::to_string(c));
    }
    // Every worker applies the same factors in rank order: identical bits.
    std::vector<const Factors*> by_rank;
    for (const Factors& f : ready.by_rank) by_rank.push_back(&f);
    if (!applied.ok()) {
      // Reported below.
    } else if (s.info.applier != nullptr) {
      // The trainer applies it where it keeps the weights (a GPU worker's
      // device); the factors are valid during the call only.
      std::vector<FactorApplier::RankFactors> views;
      for (const Factors* f : by_rank) views.push_back({f->k, f->left.floats(), f->right.floats()});
      applied = s.info.applier->ApplyFactors(tensor, c, views);
      if (!applied.ok()) {
        applied =
            applied.Annotate("applying the sufficient factors of " + s.info.name + " for clock " + std::to_string(c));
      }
    } else if (rebuild_) {
      // Timed only when this client rebuilds: with the rebuild elsewhere (an
      // emulated device, an applier) apply_us() stays exactly 0, as the
      // pipeline bench and its smoke test expect; an empty timed region could
      // read a microsecond or more on a loaded machine.
      const auto begin = std::chrono::steady_clock::now();
      ApplySufficientFactors(sgd_, c, s.info.lr_mult, s.info.decay_mult, by_rank, s.info.shape, s.info.data,
                             history->data(), &s.scratch);
      apply_us_.fetch_add(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - begin).count()));
    }
    if (!applied.ok()) {
      LOG(ERROR) << "worker " << rank_ << ": " << applied;
      Abort(applied);  // Every waiter (WaitWeights) returns it.
      mu_.Lock();
      return;
    }
    mu_.Lock();
    s.applied = c + 1;
    cv_.SignalAll();
  }
}

bool FactorExchange::Has(int tensor) const {
  MutexLock lock(&mu_);
  return tensors_.count(tensor) > 0;
}

int64_t FactorExchange::applied(int tensor) const {
  MutexLock lock(&mu_);
  auto it = tensors_.find(tensor);
  return it == tensors_.end() ? -1 : it->second.applied;
}

Status FactorExchange::Store(int sender, int tensor, int64_t clock, Factors f) {
  State& s = tensors_.at(tensor);
  if (s.from < 0 || clock < s.from || clock >= s.until)
    return InvalidArgumentError(
        "factors of " + s.info.name + " for clock " + std::to_string(clock) + " from worker " + std::to_string(sender) +
        ": this worker sends it as factors " +
        (s.from < 0 ? std::string("at no clock yet")
                    : "from clock " + std::to_string(s.from) +
                          (s.until == std::numeric_limits<int64_t>::max() ? std::string(" on")
                                                                          : " to " + std::to_string(s.until - 1))) +
        " (HybComm's paths differ between workers?)");
  if (sender != rank_ && (clock < s.applied || clock > s.applied + 1))
    return InvalidArgumentError("factors of " + s.info.name + " for clock " + std::to_string(clock) + " from worker " +
                                std::to_string(sender) + ": this worker has applied " + std::to_string(s.applied) +
                                " update(s) and accepts clocks " + std::to_string(s.applied) + " and " +
                                std::to_string(s.applied + 1) + " only (BSP)");
  Clock& c = s.pending[clock];
  if (c.by_rank.empty()) c.by_rank.resize(num_workers_);
  if (c.by_rank[sender].k != 0)
    return InvalidArgumentError("factors of " + s.info.name + " for clock " + std::to_string(clock) + " from worker " +
                                std::to_string(sender) + " came twice");
  c.by_rank[sender] = std::move(f);
  // Clocks complete in order: this worker hands over clock c + 1 only once
  // clock c is applied (WaitWeights(c + 1) comes first).
  if (++c.count == num_workers_) {
    ready_.emplace_back(tensor, clock);
    cv_.SignalAll();
  }
  return Status::OK();
}

StatusOr<int> FactorExchange::BuildSends(int tensor, int64_t clock, uint64_t priority, const StatePtr& push,
                                         std::vector<QueuedMessage>* out) {
  MutexLock lock(&mu_);
  State& s = tensors_.at(tensor);
  const TensorInfo& t = s.info;
  if (clock <= s.own_clock)
    return FailedPreconditionError("factors of " + t.name + " for clock " + std::to_string(clock) +
                                   " handed over twice");
  // One copy, shared by every message and this worker's own part.
  const size_t nl = static_cast<size_t>(t.batch * t.shape.rows), nr = static_cast<size_t>(t.batch * t.shape.cols);
  auto copy = std::make_shared<std::vector<float>>(nl + nr);
  std::memcpy(copy->data(), t.left, nl * sizeof(float));
  std::memcpy(copy->data() + nl, t.right, nr * sizeof(float));
  Factors own;
  own.k = t.batch;
  own.left = Buffer(copy, copy->data(), nl * sizeof(float));
  own.right = Buffer(copy, copy->data() + nl, nr * sizeof(float));
  s.own_clock = clock;
  Status st = Store(rank_, tensor, clock, own);
  if (!st.ok()) return FailedPreconditionError(st.message());
  const int64_t now = MonotonicMicros();
  int sent = 0;
  for (int w = 0; w < num_workers_; ++w) {
    if (w == rank_) continue;
    QueuedMessage q;
    q.server = num_servers_ + w;
    q.priority = priority;
    q.bytes = (nl + nr) * sizeof(float);
    q.stream = 0;
    q.request_id = requests_->NextId();
    q.msg = FactorsMessage(tensor, clock, own);
    q.msg.header.set_request_id(q.request_id);
    q.msg.header.set_priority(static_cast<int32_t>(priority >> 32));
    Request r;
    r.kind = Request::Kind::kAck;
    r.state = push;
    r.server = q.server;
    r.credit = q.bytes;
    r.what = "factors of \"" + t.name + "\" to worker " + std::to_string(w);
    r.clock = clock;
    r.enqueue_us = now;
    requests_->Add(q.request_id, std::move(r));
    out->push_back(std::move(q));
    ++sent;
  }
  return sent;
}

Status FactorExchange::Advance(int tensor, int64_t clock, std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(&mu_);
  State& s = tensors_.at(tensor);
  if (s.applied >= clock) return abort_;
  if (s.own_clock < clock - 1)
    return FailedPreconditionError("the weights of " + s.info.name + " for clock " + std::to_string(clock) +
                                   " need this worker's factors of clock " + std::to_string(clock - 1) +
                                   ", which were never handed over (GradientsReady)");
  while (abort_.ok() && s.applied < clock) {
    if (deadline == std::chrono::steady_clock::time_point::max()) {
      cv_.Wait(&mu_);
    } else if (!cv_.WaitUntil(&mu_, deadline) && abort_.ok() && s.applied < clock) {
      // The first clock not applied yet: whose factors of it are missing.
      const int64_t c = s.applied;
      std::string missing;
      auto it = s.pending.find(c);
      // No entry: this worker's own factors of c went in (own_clock >= c), so
      // the clock is complete and the applier has taken it.
      for (int w = 0; it != s.pending.end() && w < num_workers_; ++w) {
        if (static_cast<size_t>(w) < it->second.by_rank.size() && it->second.by_rank[w].k > 0) continue;
        missing += (missing.empty() ? "" : ", ") + std::to_string(w);
      }
      if (missing.empty()) missing = "none: all are here and the update is being applied";
      return DeadlineExceededError("the sufficient factors of \"" + s.info.name + "\" for clock " + std::to_string(c) +
                                   " from worker(s) " + missing);
    }
  }
  return abort_;
}

Status FactorExchange::Refuse(const Endpoint& from, const pb::Header& h, const std::string& why) {
  LOG(ERROR) << "worker " << rank_ << ": refused FACTORS from " << from << ": " << why;
  Message e;
  e.header.set_op(pb::ERROR);
  e.header.set_error_op(pb::FACTORS);
  e.header.set_request_id(h.request_id());
  e.header.set_error(why);
  return reply_(from, std::move(e));
}

void FactorExchange::OnFactors(const Endpoint& from, const Message& msg) {
  const pb::Header& h = msg.header;
  int sender = -1;
  Status st;
  if (!worker_rank_(from, &sender) || sender < 0 || sender >= num_workers_ || sender == rank_) {
    st = Refuse(from, h, "FACTORS from " + from + ", which is not another worker of this job");
  } else {
    mu_.Lock();
    auto it = tensors_.find(h.tensor());
    if (it == tensors_.end()) {
      mu_.Unlock();
      st = Refuse(
          from, h,
          "FACTORS for tensor " + std::to_string(h.tensor()) + ", which is not a sufficient-factor tensor of this job");
    } else {
      auto f = ParseFactors(msg, it->second.info.shape, "\"" + it->second.info.name + "\"");
      Status stored = f.ok() ? Store(sender, h.tensor(), h.clock(), std::move(f).value()) : f.status();
      mu_.Unlock();
      if (!stored.ok()) {
        st = Refuse(from, h, stored.message());
      } else {
        received_bytes_.fetch_add(msg.payload_bytes());
        Message ack;
        ack.header.set_op(pb::FACTORS_ACK);
        ack.header.set_request_id(h.request_id());
        ack.header.set_tensor(h.tensor());
        ack.header.set_clock(h.clock());
        st = reply_(from, std::move(ack));
      }
    }
  }
  if (!st.ok()) LOG(ERROR) << "worker " << rank_ << ": reply to " << from << " failed: " << st;
}

void FactorExchange::Abort(const Status& why) {
  {
    MutexLock lock(&mu_);
    if (!abort_.ok()) return;
    abort_ = why;
  }
  cv_.SignalAll();
}

}  // namespace nereus

#include "worker/client/layer_pipeline.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "worker/client/timeline.h"

namespace nereus {

LayerPipeline::LayerPipeline(const ClientOptions& options, TensorRegistry* tensors, RequestTable* requests,
                             MessageBuilder* builder, ServerQueues* queues, FactorExchange* factors)
    : options_(options),
      tensors_(tensors),
      requests_(requests),
      builder_(builder),
      queues_(queues),
      factors_(factors),
      merges_(options.schedule == Schedule::kFull && options.merge, options.merge_profile_iterations) {}

Status LayerPipeline::Initialize(size_t num_initial, uint64_t partition_bytes, int num_servers, int rank,
                                 const JobInfo& job) {
  MutexLock lock(&mu_);
  num_servers_ = num_servers;
  job_ = job;
  RETURN_IF_ERROR(tensors_->Freeze(num_initial, partition_bytes, num_servers));
  rank_ = rank;
  layered_ = tensors_->size() > 0;
  std::map<int, std::vector<int>> by_layer;
  for (int t = 0; t < tensors_->size(); ++t) {
    if (tensors_->spec(t).data == nullptr) layered_ = false;
    const int layer = tensors_->spec(t).layer >= 0 ? tensors_->spec(t).layer : t;
    by_layer[layer].push_back(t);
  }
  for (auto& [layer, ts] : by_layer) {
    layer_index_[layer] = static_cast<int>(layers_.size());
    CommLayer L;
    L.tensors = ts;
    for (int t : ts) L.bytes += tensors_->elements(t) * sizeof(float);
    layer_bytes_.push_back(L.bytes);
    layers_.push_back(std::move(L));
  }
  merges_.Reset(static_cast<int>(layers_.size()));
  initialized_ = true;
  return Status::OK();
}

bool LayerPipeline::layered() const {
  MutexLock lock(&mu_);
  return layered_;
}

int LayerPipeline::num_layers() const {
  MutexLock lock(&mu_);
  return static_cast<int>(layers_.size());
}

uint64_t LayerPipeline::TensorPriority(int tensor) const {
  MutexLock lock(&mu_);
  if (layered_) {
    const int layer = tensors_->spec(tensor).layer >= 0 ? tensors_->spec(tensor).layer : tensor;
    return static_cast<uint64_t>(layer_index_.at(layer)) << 32;
  }
  return static_cast<uint64_t>(tensor) << 32;
}

void LayerPipeline::SetLink(const LinkModel& link) {
  MutexLock lock(&mu_);
  merges_.set_link(link);
}

void LayerPipeline::ConfigureSfb(SfbSetup setup) {
  MutexLock lock(&mu_);
  setup.start_sfb.resize(tensors_->size(), false);
  paths_.Reset(setup.start_clock, setup.start_sfb);
  // Merge planning weighs what goes to the servers at the start.
  for (size_t li = 0; li < layers_.size(); ++li) {
    uint64_t bytes = 0;
    for (int t : layers_[li].tensors)
      if (!setup.start_sfb[t]) bytes += tensors_->elements(t) * sizeof(float);
    layers_[li].bytes = bytes;
    layer_bytes_[li] = bytes;
  }
  for (auto& f : setup.forced)
    if (f.second.clock > setup.start_clock) forced_.push_back(f);
  if (setup.trials) {
    trials_ = std::make_unique<SfbTrials>(setup.trials_config, setup.trial_layers, setup.pricer);
    trials_from_ = setup.trials_config.start_clock + setup.trials_config.warmup;
  }
  switching_ = trials_ != nullptr || !forced_.empty();
  agree_ = std::move(setup.agree);
  injected_ = std::move(setup.injected_costs);
  timeline_ = setup.timeline;
}

Handle LayerPipeline::LendAtStart() {
  std::vector<QueuedMessage> work;
  StatePtr done;
  {
    MutexLock lock(&mu_);
    if (!switching_) return Handle();
    int partitions = 0;
    for (int t = 0; t < tensors_->size(); ++t)
      if (paths_.At(t, paths_.start())) partitions += static_cast<int>(tensors_->partitions(t).size());
    done = std::make_shared<Handle::State>(partitions);
    for (int t = 0; t < tensors_->size(); ++t) {
      if (!paths_.At(t, paths_.start())) continue;
      const int layer = tensors_->spec(t).layer >= 0 ? tensors_->spec(t).layer : t;
      builder_->BuildLends(tensors_->Refs(t), nullptr, paths_.start(), done,
                           static_cast<uint64_t>(layer_index_.at(layer)) << 32, &work);
    }
  }
  queues_->Submit(std::move(work));
  return MakeHandle(done);
}

bool LayerPipeline::SfbAt(int tensor, int64_t clock) const {
  MutexLock lock(&mu_);
  return paths_.At(tensor, clock);
}

std::vector<int> LayerPipeline::SfbTensors() const {
  MutexLock lock(&mu_);
  return paths_.SfbTensors(std::max(started_clock_, paths_.start()));
}

void LayerPipeline::CountSfb(ClientStats* stats) const {
  MutexLock lock(&mu_);
  stats->sfb_switches = static_cast<uint64_t>(paths_.switches());
  stats->sfb_trial_clocks = trials_ != nullptr ? static_cast<uint64_t>(trials_->trial_clocks()) : 0;
}

Status LayerPipeline::StartClock(int64_t clock) {
  while (true) {
    int64_t c;
    TrialStep step;
    {
      MutexLock lock(&mu_);
      if (!switching_ || clock <= started_clock_) return Status::OK();
      while (deciding_) decided_cv_.Wait(&mu_);
      if (clock <= started_clock_) return Status::OK();
      // Clocks come one after the other (a trainer that skipped one: each in turn).
      c = started_clock_ < 0 ? clock : started_clock_ + 1;
      step = BeginClock(c);
      deciding_ = true;
    }
    std::vector<double> reduced = step.proposal;
    Status st;
    if (step.agree) {
      // Every worker starts this clock with the same agreement (the trials'
      // schedule is the same on all), and none can send factors of the next
      // clock before every worker decided its paths here.
      st = agree_ == nullptr ? InternalError("HybComm's trials without an agreement")
                             : agree_("nereus.hybcomm." + std::to_string(c), &reduced);
      if (!st.ok()) st = st.Annotate("HybComm's agreement on " + step.what + " at clock " + std::to_string(c));
    }
    std::vector<QueuedMessage> work;
    {
      MutexLock lock(&mu_);
      if (st.ok()) FinishClock(c, step.agree ? reduced : std::vector<double>(), &work);
      deciding_ = false;
      decided_cv_.SignalAll();
    }
    queues_->Submit(std::move(work));
    if (!st.ok()) return st;
  }
}

TrialStep LayerPipeline::BeginClock(int64_t clock) {
  const int64_t now = MonotonicMicros();
  TrialStep step;
  if (trials_ != nullptr) {
    // The last clock's busy span: from its start to the end of its last
    // WaitWeights or GradientsReady. What the trainer does after that and
    // before this clock starts (a test phase, a snapshot, a pause) costs
    // both paths alike and is not counted.
    const int64_t end = busy_end_us_ > clock_start_us_ ? busy_end_us_ : now;
    double period = -1;
    if (started_clock_ >= 0 && clock == started_clock_ + 1) period = static_cast<double>(end - clock_start_us_) * 1e-6;
    if (!injected_.empty() && started_clock_ >= 0) {
      // Deterministic tests: what the paths of the last clock cost by decree.
      period = 0;
      for (const auto& [t, cost] : injected_) period += paths_.At(t, clock - 1) ? cost.second : cost.first;
    }
    std::vector<double> waits;
    for (const TrialLayer& l : trials_->layers()) waits.push_back(WaitOf(clock - 1, l.tensor));
    if (clock == trials_from_) trials_->set_overlaps(Overlaps());
    if (timeline_ != nullptr && started_clock_ >= 0 && clock == started_clock_ + 1) {
      const std::string mark = trials_->Mark(clock - 1);
      if (!mark.empty()) timeline_->Span(Lane::kHybComm, mark, clock - 1, clock_start_us_, end);
    }
    step = trials_->Begin(clock, period, waits);
  }
  started_clock_ = clock;
  clock_start_us_ = now;
  busy_end_us_ = 0;
  // What the trials read is kept a few dozen clocks.
  while (!wait_us_.empty() && wait_us_.begin()->first < clock - 64) wait_us_.erase(wait_us_.begin());
  while (!ready_us_.empty() && ready_us_.begin()->first < clock - 64) ready_us_.erase(ready_us_.begin());
  return step;
}

void LayerPipeline::FinishClock(int64_t clock, const std::vector<double>& reduced, std::vector<QueuedMessage>* out) {
  std::vector<std::string> log;
  std::vector<TrialSwitch> switches;
  if (trials_ != nullptr) switches = trials_->Decide(clock, reduced, &log);
  for (const std::string& line : log) LOG(INFO) << "worker " << rank_ << ": " << line;
  for (const TrialSwitch& s : switches) Switch(s.tensor, s.clock, s.sfb, "HybComm's trials", out);
  // The forced schedule's switches of clock + 1 (decided, like the trials',
  // at the start of the clock before).
  while (!forced_.empty() && forced_.front().second.clock <= clock + 1) {
    const auto [t, e] = forced_.front();
    forced_.pop_front();
    if (e.clock == clock + 1) Switch(t, e.clock, e.sfb, "--sfb_schedule", out);
  }
}

void LayerPipeline::Switch(int t, int64_t clock, bool sfb, const char* why, std::vector<QueuedMessage>* out) {
  if (paths_.At(t, clock) == sfb) return;
  paths_.Set(t, clock, sfb);
  const std::string& name = tensors_->spec(t).name;
  if (sfb) {
    // The servers lend its partitions from version `clock`: their weights
    // of `clock` come with the pushes of clock - 1 as usual, their history
    // with the LEND_REPLYs.
    const std::vector<PartitionRef> refs = tensors_->Refs(t);
    StatePtr lent = std::make_shared<Handle::State>(static_cast<int>(refs.size()));
    float* history = factors_->StartFactors(t, clock, lent);
    const int layer = tensors_->spec(t).layer >= 0 ? tensors_->spec(t).layer : t;
    builder_->BuildLends(refs, history, clock, lent, static_cast<uint64_t>(layer_index_.at(layer)) << 32, out);
  } else {
    // Worker 0 hands it back with its gradients of `clock` (BuildLayerPushes).
    factors_->StopFactors(t, clock);
  }
  LOG(INFO) << "worker " << rank_ << ": HybComm: " << name << " travels "
            << (sfb ? "as sufficient factors" : "through the servers") << " from clock " << clock << " (" << why << ")";
}

std::vector<double> LayerPipeline::Overlaps() const {
  std::vector<double> out;
  for (const TrialLayer& l : trials_->layers()) {
    const int layer = tensors_->spec(l.tensor).layer >= 0 ? tensors_->spec(l.tensor).layer : l.tensor;
    const int li = layer_index_.at(layer);
    std::vector<double> v;
    for (const auto& [clock, ready] : ready_us_) {
      if (clock <= paths_.start() || ready[li] <= 0) continue;  // The first clock warms up.
      const int64_t end = *std::max_element(ready.begin(), ready.end());
      v.push_back(static_cast<double>(end - ready[li]) * 1e-6);
    }
    if (v.empty()) {
      out.push_back(0);
      continue;
    }
    std::sort(v.begin(), v.end());
    out.push_back(v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
  }
  return out;
}

double LayerPipeline::WaitOf(int64_t clock, int tensor) const {
  auto it = wait_us_.find(clock);
  if (it == wait_us_.end()) return 0;
  const int layer = tensors_->spec(tensor).layer >= 0 ? tensors_->spec(tensor).layer : tensor;
  return static_cast<double>(it->second[layer_index_.at(layer)]) * 1e-6;
}

StatusOr<int> LayerPipeline::CommLayerOf(const char* op, int layer) const {
  if (!initialized_) return FailedPreconditionError(std::string(op) + " before Init");
  if (!layered_)
    return FailedPreconditionError(std::string(op) + " needs every tensor registered with data and diff buffers");
  RETURN_IF_ERROR(requests_->aborted());
  auto it = layer_index_.find(layer);
  return it == layer_index_.end() ? -1 : it->second;
}

int LayerPipeline::PulledPartitions(int li, int64_t clock) const {
  int partitions = 0;
  for (int t : layers_[li].tensors)
    if (paths_.WeightsFromServers(t, clock)) partitions += static_cast<int>(tensors_->partitions(t).size());
  return partitions;
}

void LayerPipeline::Prefetch(int layer) {
  std::vector<QueuedMessage> work;
  {
    MutexLock lock(&mu_);
    BuildLayerPulls({layer}, 0, &work);
  }
  queues_->Submit(std::move(work));
}

Status LayerPipeline::GradientsReady(int layer, int64_t clock) {
  RETURN_IF_ERROR(StartClock(clock));
  const int64_t now = MonotonicMicros();
  std::vector<QueuedMessage> work;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const int li, CommLayerOf("GradientsReady", layer));
    if (li < 0) return Status::OK();  // A layer without tensors.
    if (first_clock_ < 0) first_clock_ = clock;
    if (merges_.WantsPlan(clock - first_clock_) &&
        std::all_of(layers_.begin(), layers_.end(), [clock](const CommLayer& l) { return l.ready_clock < clock; }))
      merges_.Plan(layer_bytes_, rank_);  // At an iteration boundary: no layer of `clock` reported yet.
    if (merges_.profiling()) merges_.RecordReady(clock - first_clock_, li, now);
    CommLayer& L = layers_[li];
    if (L.ready_clock >= clock)
      return FailedPreconditionError("GradientsReady(" + std::to_string(layer) + ", " + std::to_string(clock) +
                                     ") called twice");
    L.ready_clock = clock;
    if (clock == started_clock_) busy_end_us_ = std::max(busy_end_us_, now);
    if (trials_ != nullptr && clock < trials_from_) {
      // The warm-up's backward times: how much of each layer's rebuild the
      // backward below it would hide (the trials' prior).
      std::vector<int64_t>& ready = ready_us_[clock];
      ready.resize(layers_.size(), 0);
      ready[li] = now;
    }
    if (options_.schedule == Schedule::kSequential) {
      // Everything goes out once the whole backward is done.
      for (const CommLayer& x : layers_)
        if (x.ready_clock < clock) return Status::OK();
      std::vector<int> all(layers_.size());
      for (size_t l = 0; l < all.size(); ++l) all[l] = static_cast<int>(l);
      // The next clock's pulls ride on these pushes, as in the other
      // schedules: a pull request sent apart would queue behind every push
      // to its server, and its server could answer only once the whole
      // push is in. Measured on 2 emulated hosts (bench/results/scaling/README.md),
      // that let the two workers settle half a transfer out of phase, each
      // iteration then waiting 1.5 transfers instead of 1.
      RETURN_IF_ERROR(BuildLayerPushes(all, clock, &work));
    } else {
      const MergeGroup& g = merges_.group_of(li);
      for (int l = g.first; l <= g.last; ++l)
        if (layers_[l].ready_clock < clock) return Status::OK();
      std::vector<int> members;
      for (int l = g.first; l <= g.last; ++l) members.push_back(l);
      RETURN_IF_ERROR(BuildLayerPushes(members, clock, &work));
    }
  }
  queues_->Submit(std::move(work));
  return Status::OK();
}

Status LayerPipeline::WaitWeights(int layer, int64_t clock) {
  RETURN_IF_ERROR(StartClock(clock));
  Handle pull, push;
  std::vector<int> rebuilt;  // Tensors whose weights of `clock` are rebuilt from factors here.
  std::vector<QueuedMessage> work;
  int li;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(li, CommLayerOf("WaitWeights", layer));
    if (li < 0) return Status::OK();  // A layer without tensors.
    CommLayer& L = layers_[li];
    if (first_clock_ < 0) first_clock_ = clock;
    if (L.pulled_clock > clock)
      return FailedPreconditionError("WaitWeights(" + std::to_string(layer) + ", " + std::to_string(clock) +
                                     ") after the weights of clock " + std::to_string(L.pulled_clock) +
                                     " were requested");
    if (L.pulled_clock < clock) {
      std::vector<int> which;
      if (options_.schedule == Schedule::kSequential) {
        // Everything is pulled before the forward starts.
        for (size_t l = 0; l < layers_.size(); ++l)
          if (layers_[l].pulled_clock < clock) which.push_back(static_cast<int>(l));
      } else {
        which.push_back(li);
      }
      BuildLayerPulls(which, clock, &work);
    }
    pull = L.pull;
    push = L.push;
    for (int t : L.tensors)
      if (!paths_.WeightsFromServers(t, clock)) rebuilt.push_back(t);
  }
  queues_->Submit(std::move(work));
  const int64_t begin = MonotonicMicros();
  const Deadline deadline = options_.wait_timeout_ms > 0
                                ? Clock::now() + std::chrono::milliseconds(options_.wait_timeout_ms)
                                : Deadline::max();
  Status st = Await(pull, deadline, layer, clock, "the weights");
  if (st.ok()) st = Await(push, deadline, layer, clock, "the acknowledgements of the gradients it pushed");
  // Tensors sent as factors in clock - 1: every worker's factors of it, one GEMM, one SGD step.
  for (size_t i = 0; st.ok() && i < rebuilt.size(); ++i) {
    st = factors_->Advance(rebuilt[i], clock, deadline);
    if (st.code() == StatusCode::kDeadlineExceeded) st = TimedOut(layer, clock, st.message());
  }
  const int64_t end = MonotonicMicros();
  MutexLock lock(&mu_);
  if (merges_.profiling()) merges_.RecordWaitEnd(clock - std::max<int64_t>(first_clock_, 0), end);
  if (clock == started_clock_) busy_end_us_ = std::max(busy_end_us_, end);
  if (trials_ != nullptr) {
    std::vector<int64_t>& waits = wait_us_[clock];
    waits.resize(layers_.size(), 0);
    waits[li] += end - begin;
  }
  return st;
}

Status LayerPipeline::TimedOut(int layer, int64_t clock, const std::string& awaited) const {
  std::string hint;
  if (job_.consistency == Consistency::kBsp || job_.consistency == Consistency::kSsp) {
    const int64_t needed = clock - 1 - (job_.consistency == Consistency::kSsp ? job_.staleness : 0);
    hint = "; a server answers once every worker's gradients of clock " + std::to_string(needed) +
           " are in, so a worker that has not pushed them (slow, stopped or stuck) holds it up";
  }
  return DeadlineExceededError("WaitWeights(layer " + std::to_string(layer) + ", clock " + std::to_string(clock) +
                               ") gave up after " + std::to_string(options_.wait_timeout_ms) +
                               " ms (wait_timeout_ms), still waiting for " + awaited + hint);
}

Status LayerPipeline::Await(const Handle& h, Deadline deadline, int layer, int64_t clock, const char* what) const {
  if (deadline == Deadline::max()) return h.Wait();
  Status st;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (h.WaitFor(std::max(left, std::chrono::milliseconds(0)), &st)) return st;
  const std::string awaited = requests_->DescribeOutstanding(HandleAccess::StateOf(h), num_servers_);
  return TimedOut(layer, clock, std::string(what) + " from " + awaited);
}

Status LayerPipeline::BuildLayerPushes(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out) {
  // Worker 0 hands back to the servers what returns to them at this clock:
  // its replica's weights and history after the updates of the clocks
  // before (WaitWeights(clock) waited for them).
  struct HandBack {
    int tensor;
    const float* weights;
    Buffer history;
  };
  std::vector<HandBack> hand_backs;
  for (int li : which)
    for (int t : layers_[li].tensors) {
      if (rank_ != 0 || clock <= paths_.start() || paths_.At(t, clock) || !paths_.At(t, clock - 1)) continue;
      HandBack h{t, nullptr, Buffer()};
      RETURN_IF_ERROR(factors_->HandBackState(t, clock, &h.weights, &h.history));
      hand_backs.push_back(std::move(h));
    }
  std::vector<PartitionRef> refs;
  std::vector<const float*> grads;
  std::vector<int> tensors;
  for (int li : which) {
    for (int t : layers_[li].tensors) {
      if (paths_.At(t, clock)) continue;  // Its factors go to the other workers (below).
      for (const PartitionRef& r : tensors_->Refs(t)) refs.push_back(r);
      grads.push_back(tensors_->spec(t).diff);
      tensors.push_back(t);
    }
  }
  const bool merge = options_.schedule == Schedule::kFull && options_.merge && which.size() > 1;
  // The push state's units (one per message, plus the guard) are known
  // only once the messages are built; nothing completes before Submit.
  std::vector<QueuedMessage> built;
  StatePtr push = std::make_shared<Handle::State>(1);
  auto guard = std::make_shared<SendGuard>(push);
  // One pull state per layer, so WaitWeights(l) waits for l alone; one for
  // them all in sequential mode, which waits for every layer before the
  // forward.
  std::map<int, StatePtr> pull_of_tensor;
  std::function<StatePtr(int)> pull_of;
  {
    StatePtr all;
    if (options_.schedule == Schedule::kSequential) {
      int total = 0;
      for (int li : which) total += PulledPartitions(li, clock + 1);
      all = std::make_shared<Handle::State>(total);
    }
    for (int li : which) {
      auto st = all ? all : std::make_shared<Handle::State>(PulledPartitions(li, clock + 1));
      for (int t : layers_[li].tensors) pull_of_tensor[t] = st;
      layers_[li].pull = MakeHandle(st);
      layers_[li].pulled_clock = clock + 1;
    }
    pull_of = [&pull_of_tensor](int tensor) { return pull_of_tensor.at(tensor); };
  }
  // Several layers go together only in sequential mode (everything at the
  // end of backward) or as a merge group: they share the most urgent
  // layer's priority.
  const uint64_t base = static_cast<uint64_t>(*std::min_element(which.begin(), which.end())) << 32;
  for (const HandBack& h : hand_backs)
    builder_->BuildHandBacks(tensors_->Refs(h.tensor), h.weights, h.history, clock, push, guard, base, &built);
  builder_->BuildPushes(refs, grads, tensors, clock, pull_of, push, guard, base, &built, merge);
  for (int li : which)
    for (int t : layers_[li].tensors) {
      if (!paths_.At(t, clock)) continue;
      auto sent = factors_->BuildSends(t, clock, base, push, &built);
      // Only a second GradientsReady of the clock fails, and that is refused earlier.
      CHECK(sent.ok()) << sent.status();
    }
  {
    MutexLock lock(&push->mu);
    push->pending = static_cast<int>(built.size()) + 1;
  }
  for (int li : which) layers_[li].push = MakeHandle(push);
  for (QueuedMessage& w : built) out->push_back(std::move(w));
  return Status::OK();
}

void LayerPipeline::BuildLayerPulls(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out) {
  // A tensor sent as factors in clock - 1 takes its weights of `clock` from
  // its own rebuild (the job's first clock: from the servers).
  int total = 0;
  for (int li : which) total += PulledPartitions(li, clock);
  // Sequential mode waits for all of them at once; otherwise per layer.
  StatePtr all = std::make_shared<Handle::State>(total);
  for (int li : which) {
    StatePtr st = all;
    if (options_.schedule != Schedule::kSequential) st = std::make_shared<Handle::State>(PulledPartitions(li, clock));
    for (int t : layers_[li].tensors)
      if (paths_.WeightsFromServers(t, clock))
        builder_->BuildPulls(tensors_->Refs(t), tensors_->spec(t).data, clock, st, static_cast<uint64_t>(li) << 32,
                             out);
    layers_[li].pull = MakeHandle(st);
    layers_[li].pulled_clock = clock;
  }
}

}  // namespace nereus

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

Status LayerPipeline::Initialize(size_t num_initial, uint64_t partition_bytes, int num_servers, int rank) {
  MutexLock lock(&mu_);
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

void LayerPipeline::SetSfbTensors(const std::vector<int>& which) {
  MutexLock lock(&mu_);
  sfb_.assign(tensors_->size(), false);
  for (int t : which) sfb_[t] = true;
  // Merge planning weighs what goes to the servers.
  for (size_t li = 0; li < layers_.size(); ++li) {
    uint64_t bytes = 0;
    for (int t : layers_[li].tensors)
      if (!sfb_[t]) bytes += tensors_->elements(t) * sizeof(float);
    layers_[li].bytes = bytes;
    layer_bytes_[li] = bytes;
  }
}

StatusOr<int> LayerPipeline::CommLayerOf(const char* op, int layer) const {
  if (!initialized_) return FailedPreconditionError(std::string(op) + " before Init");
  if (!layered_)
    return FailedPreconditionError(std::string(op) + " needs every tensor registered with data and diff buffers");
  RETURN_IF_ERROR(requests_->aborted());
  auto it = layer_index_.find(layer);
  return it == layer_index_.end() ? -1 : it->second;
}

int LayerPipeline::Partitions(int li, bool with_sfb) const {
  int partitions = 0;
  for (int t : layers_[li].tensors)
    if (with_sfb || !Sfb(t)) partitions += static_cast<int>(tensors_->partitions(t).size());
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
      BuildLayerPushes(all, clock, &work);
    } else {
      const MergeGroup& g = merges_.group_of(li);
      for (int l = g.first; l <= g.last; ++l)
        if (layers_[l].ready_clock < clock) return Status::OK();
      std::vector<int> members;
      for (int l = g.first; l <= g.last; ++l) members.push_back(l);
      BuildLayerPushes(members, clock, &work);
    }
  }
  queues_->Submit(std::move(work));
  return Status::OK();
}

Status LayerPipeline::WaitWeights(int layer, int64_t clock) {
  Handle pull, push;
  std::vector<int> sfb;
  std::vector<QueuedMessage> work;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(const int li, CommLayerOf("WaitWeights", layer));
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
      if (Sfb(t)) sfb.push_back(t);
  }
  queues_->Submit(std::move(work));
  Status st = pull.Wait();
  if (st.ok()) st = push.Wait();  // The diff buffers are free again.
  // SFB tensors: every worker's factors of clock - 1, one GEMM, one SGD step.
  for (size_t i = 0; st.ok() && i < sfb.size(); ++i) st = factors_->Advance(sfb[i], clock);
  MutexLock lock(&mu_);
  if (merges_.profiling()) merges_.RecordWaitEnd(clock - std::max<int64_t>(first_clock_, 0), MonotonicMicros());
  return st;
}

void LayerPipeline::BuildLayerPushes(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out) {
  std::vector<PartitionRef> refs;
  std::vector<const float*> grads;
  std::vector<int> tensors;
  for (int li : which) {
    for (int t : layers_[li].tensors) {
      if (Sfb(t)) continue;  // Its factors go to the other workers (below).
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
      for (int li : which) total += Partitions(li);
      all = std::make_shared<Handle::State>(total);
    }
    for (int li : which) {
      auto st = all ? all : std::make_shared<Handle::State>(Partitions(li));
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
  builder_->BuildPushes(refs, grads, tensors, clock, pull_of, push, guard, base, &built, merge);
  for (int li : which)
    for (int t : layers_[li].tensors) {
      if (!Sfb(t)) continue;
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
}

void LayerPipeline::BuildLayerPulls(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out) {
  // SFB tensors take their weights from the servers for clock 0 only.
  const bool with_sfb = clock == 0;
  int total = 0;
  for (int li : which) total += Partitions(li, with_sfb);
  // Sequential mode waits for all of them at once; otherwise per layer.
  StatePtr all = std::make_shared<Handle::State>(total);
  for (int li : which) {
    StatePtr st = all;
    if (options_.schedule != Schedule::kSequential) st = std::make_shared<Handle::State>(Partitions(li, with_sfb));
    for (int t : layers_[li].tensors)
      if (with_sfb || !Sfb(t))
        builder_->BuildPulls(tensors_->Refs(t), tensors_->spec(t).data, clock, st, static_cast<uint64_t>(li) << 32,
                             out);
    layers_[li].pull = MakeHandle(st);
    layers_[li].pulled_clock = clock;
  }
}

}  // namespace nereus

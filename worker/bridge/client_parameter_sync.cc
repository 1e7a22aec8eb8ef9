#include "worker/bridge/client_parameter_sync.h"

#include <glog/logging.h>

#include <cstdint>
#include <map>
#include <utility>

#include "worker/client/options_proto.h"

namespace nereus {

Status ClientParameterSync::Fail(Status st) {
  if (status_.ok() && !st.ok()) status_ = std::move(st);
  return status_;
}

ClientParameterSync::~ClientParameterSync() {
  if (staging_ != nullptr) staging_->Drain().IgnoreError();
}

Status ClientParameterSync::CheckStaging() {
  if (staging_ == nullptr) return status_;
  MutexLock lock(&staging_mu_);
  return Fail(staging_error_);
}

Status ClientParameterSync::WaitHandedOver(int layer, int64_t clock) {
  RETURN_IF_ERROR(CheckStaging());
  if (staging_ == nullptr || staged_clock_[layer] < clock - 1) return Status::OK();
  {
    MutexLock lock(&staging_mu_);
    while (staging_error_.ok() && handed_clock_[layer] < clock - 1) staging_cv_.Wait(&staging_mu_);
  }
  return CheckStaging();
}

Status ClientParameterSync::UploadWeights(int layer, int64_t iter) {
  if (staging_ == nullptr || uploaded_clock_[layer] == iter) return Status::OK();
  // The first upload (the initial weights) is every tensor's; after it a
  // tensor sent as factors in the clock before is rebuilt where the net
  // keeps it instead (HybComm may switch a tensor's path at a clock: then
  // its weights come pulled, and go up from the mirror, once more).
  const bool initial = uploaded_clock_[layer] < 0;
  std::vector<StagingCopy> copies;
  std::vector<int> rebuilt;
  for (int id : net_->layer_learnable_param_ids(layer)) {
    SyncedParam& p = params_[id];
    if (p.local) continue;
    if (!initial && staged_factors_ != nullptr && staged_factors_->chosen(id) &&
        client_->SfbAt(p.tensor_id, iter - 1)) {
      rebuilt.push_back(id);
      continue;
    }
    copies.push_back({p.net_data, p.data_mirror.data(), p.data_mirror.size() * sizeof(float)});
  }
  uploaded_clock_[layer] = iter;
  for (int id : rebuilt) {
    RETURN_IF_ERROR(Fail(staged_factors_->Rebuild(id, iter)));
    // Back through the servers from this clock: worker 0 hands them the
    // weights and history it just rebuilt (FactorApplier::EndFactors).
    if (client_->rank() == 0 && !client_->SfbAt(params_[id].tensor_id, iter))
      RETURN_IF_ERROR(Fail(staged_factors_->Export(id, iter)));
  }
  if (copies.empty()) return Status::OK();
  RETURN_IF_ERROR(Fail(staging_->StageWeights(layer, net_->UniqueLayerName(layer), copies)));
  if (staging_->device_memory()) {
    // The device copy is the fresh one now (the compute stream waits for it).
    for (int id : net_->layer_learnable_param_ids(layer)) {
      if (!params_[id].local) params_[id].blob->data()->MarkGpuWritten();
    }
  }
  return Status::OK();
}

std::vector<std::string> ClientParameterSync::tensor_names() const {
  std::vector<std::string> names;
  for (const SyncedParam& p : params_) names.push_back(p.name);
  return names;
}

Status ClientParameterSync::CheckPlacement() const {
  if (net_->device() != nullptr && (staging_ == nullptr || !staging_->device_memory())) {
    return FailedPreconditionError("net \"" + net_->name() + "\" computes on " + net_->device()->description() +
                                   ": its parameters need a device staging (set_staging) to reach the client");
  }
  if (net_->device() == nullptr && staging_ != nullptr && staging_->device_memory()) {
    return FailedPreconditionError("net \"" + net_->name() +
                                   "\" computes on the CPU, but its staging copies device memory");
  }
  return Status::OK();
}

void ClientParameterSync::DescribeParams(const std::vector<Blob*>& params, const std::vector<float>& lr_mult,
                                         const std::vector<float>& decay_mult) {
  params_.clear();
  params_.resize(params.size());  // SyncedParam is move-only (its host buffers).
  for (size_t p = 0; p < params.size(); ++p) {
    params_[p].blob = params[p];
    params_[p].lr_mult = lr_mult[p];
    params_[p].decay_mult = decay_mult[p];
  }
  // Each parameter belongs to its owner layer, named after it and its index
  // among that layer's blobs (Caffe's "<layer>/<i>"): the client pushes a
  // layer's gradients as soon as its backward ends and fetches its weights
  // for the next iteration in the same round trip, straight into the blob. A
  // layer's local state (BatchNorm's statistics, Layer::IsLocalState) is not
  // registered: it stays this worker's own, never pushed nor pulled.
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    const auto& blobs = net_->layers()[layer]->blobs();
    for (int id : net_->layer_learnable_param_ids(layer)) {
      CHECK_GE(id, 0);
      CHECK_LT(static_cast<size_t>(id), params.size());
      SyncedParam& p = params_[id];
      p.layer = layer;
      for (size_t b = 0; b < blobs.size(); ++b) {
        if (blobs[b].get() != params[id]) continue;
        p.blob_index = static_cast<int>(b);
        p.name = net_->UniqueLayerName(layer) + "/" + std::to_string(b);
        p.local = net_->layers()[layer]->IsLocalState(static_cast<int>(b));
      }
      CHECK_GE(p.blob_index, 0) << "learnable param " << id << " is not a blob of its owner layer "
                                << net_->UniqueLayerName(layer);
    }
  }
  // A parameter shared with another layer sums two layers' gradients: not one
  // pair of factors.
  for (size_t i = 0; i < net_->params().size(); ++i) {
    const int o = net_->param_owners()[i];
    if (o < 0) continue;
    for (SyncedParam& p : params_)
      if (p.blob == net_->params()[o].get() || p.blob == net_->params()[i].get()) p.shared = true;
  }
  for (size_t p = 0; p < params_.size(); ++p)
    CHECK(!params_[p].name.empty()) << "learnable param " << p << " has no owner layer";
}

void ClientParameterSync::PrepareStaging() {
  uploaded_clock_ = std::vector<std::atomic<int64_t>>(net_->num_layers());
  staged_clock_ = std::vector<std::atomic<int64_t>>(net_->num_layers());
  for (int l = 0; l < net_->num_layers(); ++l) {
    uploaded_clock_[l] = -1;
    staged_clock_[l] = -1;
  }
  // The copies' spans on the timeline, per layer and clock. A layer's copy
  // of clock c is reported before the bridge stages that layer's copy of
  // c + 1 (its gradients: the hand-over of c comes first; its weights:
  // their upload is on the copy stream before the gradients of c), so the
  // layer's clock read here is the copy's.
  staging_->set_span_sink([this](int layer, bool to_host, int64_t begin_us, int64_t end_us) {
    client_->TraceSpan((to_host ? "d2h " : "h2d ") + net_->UniqueLayerName(layer),
                       to_host ? staged_clock_[layer].load() : uploaded_clock_[layer].load(), begin_us, end_us,
                       to_host ? TraceLane::kDeviceToHost : TraceLane::kHostToDevice);
  });
  MutexLock lock(&staging_mu_);
  handed_clock_.assign(net_->num_layers(), -1);
}

void ClientParameterSync::AttachFactors(int id, const Layer::GradientFactors& f, const pb::SgdConfig& sgd,
                                        TensorSpec* spec) {
  SyncedParam& p = params_[id];
  spec->factor_rows = f.rows;
  if (staging_ == nullptr) {
    // The client reads them in the blobs, at the hand-over.
    p.factors_left_at = f.left.cpu();
    p.factors_right_at = f.right.cpu();
    spec->factor_left = p.factors_left_at;
    spec->factor_right = p.factors_right_at;
  } else {
    // The staging copies them into mirrors, and the updates are rebuilt
    // where the net keeps its weights.
    if (staged_factors_ == nullptr) {
      staged_factors_ = std::make_unique<StagedFactors>(staging_->device_memory() ? net_->device() : nullptr, sgd,
                                                        client_->num_workers());
    }
    staged_factors_->Add(id, spec->name, f, p.blob, p.lr_mult, p.decay_mult);
    spec->factor_left = staged_factors_->left(id);
    spec->factor_right = staged_factors_->right(id);
    spec->factor_applier = staged_factors_.get();
  }
  p.factors = f;
}

Status ClientParameterSync::RegisterParam(int id, const pb::SgdConfig& sgd, std::vector<const float*>* initial) {
  SyncedParam& p = params_[id];
  TensorSpec spec;
  spec.name = p.name;
  for (int d : p.blob->shape()) spec.shape.push_back(d);
  spec.lr_mult = p.lr_mult;
  spec.decay_mult = p.decay_mult;
  spec.layer = p.layer;
  if (staging_ == nullptr) {
    spec.data = p.blob->mutable_cpu_data();
    spec.diff = p.blob->cpu_diff();
  } else {
    // The client reads and writes the mirrors (page-locked for a device);
    // the staging copies between them and the net's buffers.
    std::shared_ptr<gpu::DeviceMemory> pin;
    if (net_->device() != nullptr) pin = net_->device()->memory();
    p.data_mirror = gpu::HostBuffer(p.blob->count(), pin);
    p.diff_mirror = gpu::HostBuffer(p.blob->count(), pin);
    spec.data = p.data_mirror.data();
    spec.diff = p.diff_mirror.data();
    const bool device = staging_->device_memory();
    p.net_data = device ? p.blob->mutable_gpu_data() : p.blob->mutable_cpu_data();
    p.net_diff = device ? p.blob->mutable_gpu_diff() : p.blob->cpu_diff();
  }
  Layer::GradientFactors f;
  if (factors_allowed_ && !p.shared && p.blob->num_axes() == 2 &&
      net_->layers()[p.layer]->WeightGradientFactors(p.blob_index, net_->bottom_vecs()[p.layer],
                                                     net_->top_vecs()[p.layer], &f)) {
    AttachFactors(id, f, sgd, &spec);
  }
  auto tensor = client_->RegisterTensor(spec);
  if (!tensor.ok()) return tensor.status().Annotate("registering " + spec.name);
  CHECK_EQ(static_cast<size_t>(*tensor), initial->size()) << "tensor ids are not consecutive";
  p.tensor_id = *tensor;
  if (staging_ != nullptr && staging_->device_memory()) {
    // A device net's initial weights reach the client through the data
    // mirror (one blocking copy, here only), not through the blob's
    // cpu_data() (a host copy of the weights besides the mirror).
    const size_t bytes = p.data_mirror.size() * sizeof(float);
    Status st =
        bytes == 0 ? Status::OK() : net_->device()->memory()->CopyToHost(p.data_mirror.data(), p.net_data, bytes);
    if (!st.ok()) return st.Annotate("copying the initial weights of " + spec.name + " to the host");
    initial->push_back(p.data_mirror.data());
  } else {
    initial->push_back(p.blob->cpu_data());
  }
  return Status::OK();
}

Status ClientParameterSync::PullInitialWeights() {
  // Every worker starts from worker 0's weights, or in a resumed job from the
  // servers' checkpoint at the job's start clock.
  const int64_t start = client_->job().start_clock;
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    Status st = client_->WaitWeights(layer, start);
    if (!st.ok()) return st.Annotate("pulling the initial weights of layer " + net_->UniqueLayerName(layer));
  }
  pull_clock_ = start;
  return Status::OK();
}

Status ClientParameterSync::Init(const std::vector<Blob*>& params, const std::vector<float>& lr_mult,
                                 const std::vector<float>& decay_mult, const pb::SgdConfig& sgd) {
  CHECK(net_ != nullptr) << "ClientParameterSync::set_net must be called before Init";
  CHECK(!initialized_) << "ClientParameterSync::Init called twice";
  CHECK_EQ(params.size(), lr_mult.size());
  CHECK_EQ(params.size(), decay_mult.size());
  RETURN_IF_ERROR(status_);
  RETURN_IF_ERROR(Fail(CheckPlacement()));
  DescribeParams(params, lr_mult, decay_mult);
  if (staging_ != nullptr) PrepareStaging();
  std::vector<const float*> initial;  // Per registered tensor, in id order.
  std::vector<int> tensor_ids;        // Per learnable parameter (-1: local state).
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!params_[p].local) RETURN_IF_ERROR(Fail(RegisterParam(static_cast<int>(p), sgd, &initial)));
    tensor_ids.push_back(params_[p].tensor_id);
  }
  // What this worker hands the servers: one tensor per learnable blob, a
  // blob shared between layers (param { name: }) once, local state never.
  int64_t scalars = 0;
  int shared = 0;
  for (const SyncedParam& p : params_) {
    if (p.tensor_id < 0) continue;
    scalars += p.blob->count();
    shared += p.shared ? 1 : 0;
  }
  LOG(INFO) << "worker " << client_->rank() << ": " << initial.size() << " tensors, " << scalars
            << " parameters registered with the servers (" << shared << " shared between layers)";
  const bool bsp = client_->job().consistency == Consistency::kBsp;
  if (staged_factors_ != nullptr && time_factor_rates_ && bsp) RETURN_IF_ERROR(Fail(staged_factors_->MeasureRates()));
  RETURN_IF_ERROR(Fail(client_->Init(SgdConfigFromProto(sgd), initial)));
  if (staged_factors_ != nullptr) {
    // Every tensor that may travel as factors (HybComm may switch any of
    // them at a clock), unless the client never moves them.
    std::vector<int> may;
    for (const SyncedParam& p : params_)
      if (p.factors.rows > 0 && p.tensor_id >= 0) may.push_back(p.tensor_id);
    RETURN_IF_ERROR(Fail(staged_factors_->Choose(may, tensor_ids)));
  }
  // A weight sent as factors is rebuilt from them: its gradient is read by
  // no one, so the net neither computes nor (on a GPU) allocates it. The
  // path may change at a clock: WaitWeights sets it for each clock.
  const int64_t start = client_->job().start_clock;
  for (size_t p = 0; p < params_.size(); ++p) {
    if (params_[p].factors.rows > 0 && params_[p].tensor_id >= 0)
      net_->SetParamGradientUnused(static_cast<int>(p), client_->SfbAt(params_[p].tensor_id, start));
  }
  RETURN_IF_ERROR(Fail(PullInitialWeights()));
  initialized_ = true;
  return Status::OK();
}

Status ClientParameterSync::WaitWeights(int layer, int64_t iter) {
  CHECK(initialized_) << "WaitWeights before Init";
  RETURN_IF_ERROR(CheckStaging());
  if (iter != pull_clock_) {
    return Fail(FailedPreconditionError(
        "the weights of iteration " + std::to_string(iter) + " were never requested (the last pull was for clock " +
        std::to_string(pull_clock_) + "; a resumed job starts at the job's start clock)"));
  }
  RETURN_IF_ERROR(WaitHandedOver(layer, iter));
  Status st = client_->WaitWeights(layer, iter);
  if (!st.ok()) {
    return Fail(st.Annotate("pulling the weights of layer " + net_->UniqueLayerName(layer) + " for iteration " +
                            std::to_string(iter)));
  }
  // The layer's backward of this clock computes a weight's gradient only if
  // it goes through the servers (the client knows this clock's paths now).
  for (int id : net_->layer_learnable_param_ids(layer)) {
    const SyncedParam& p = params_[id];
    if (p.factors.rows > 0 && p.tensor_id >= 0) net_->SetParamGradientUnused(id, client_->SfbAt(p.tensor_id, iter));
  }
  return UploadWeights(layer, iter);
}

Status ClientParameterSync::CurrentFactors(int id, Layer::GradientFactors* f) const {
  const SyncedParam& p = params_[id];
  if (!net_->layers()[p.layer]->WeightGradientFactors(p.blob_index, net_->bottom_vecs()[p.layer],
                                                      net_->top_vecs()[p.layer], f)) {
    *f = Layer::GradientFactors();
  }
  // The client reads the factors where they were registered: they must not
  // have moved (with staging, StagedFactors::FactorCopies checks).
  if (staging_ == nullptr && (f->rows != p.factors.rows || f->left.blob == nullptr ||
                              f->left.cpu() != p.factors_left_at || f->right.cpu() != p.factors_right_at)) {
    return FailedPreconditionError("the sufficient factors of " + p.name +
                                   " moved or changed shape after Init (was the net reshaped?)");
  }
  return Status::OK();
}

Status ClientParameterSync::GradientsReady(int layer, int64_t iter) {
  CHECK(initialized_) << "GradientsReady before Init";
  RETURN_IF_ERROR(CheckStaging());
  std::map<int, Layer::GradientFactors> now;  // The factors of this clock, by parameter.
  for (int id : net_->layer_learnable_param_ids(layer)) {
    SyncedParam& p = params_[id];
    CHECK_LT(p.pushed_iter, iter) << p.name << " pushed twice for iteration " << iter;
    p.pushed_iter = iter;
    if (p.factors.rows == 0) continue;
    RETURN_IF_ERROR(Fail(CurrentFactors(id, &now[id])));
  }
  if (staging_ != nullptr) {
    // Every layer goes through the staging, those without gradients too, so
    // the client gets the layers in backward order. A tensor sent as factors
    // leaves as its factors instead of its gradient.
    std::vector<StagingCopy> copies;
    for (int id : net_->layer_learnable_param_ids(layer)) {
      SyncedParam& p = params_[id];
      if (p.local) continue;
      if (staged_factors_ != nullptr && staged_factors_->chosen(id) && client_->SfbAt(p.tensor_id, iter)) {
        auto factor_copies = staged_factors_->FactorCopies(id, now[id]);
        if (!factor_copies.ok()) return Fail(factor_copies.status());
        copies.insert(copies.end(), factor_copies->begin(), factor_copies->end());
        continue;
      }
      copies.push_back({p.diff_mirror.data(), p.net_diff, p.diff_mirror.size() * sizeof(float)});
    }
    const std::string name = net_->UniqueLayerName(layer);
    staged_clock_[layer] = iter;
    // Runs on the staging's thread once the copies are done (or failed).
    auto hand_over = [this, layer, iter, name](const Status& copied) {
      Status st = copied;
      {
        MutexLock lock(&staging_mu_);
        if (st.ok()) st = staging_error_;  // Nothing more is handed over after a failure.
      }
      if (st.ok()) {
        st = client_->GradientsReady(layer, iter);
        if (!st.ok()) st = st.Annotate("pushing the gradients of layer " + name);
      }
      MutexLock lock(&staging_mu_);
      if (!st.ok() && staging_error_.ok()) staging_error_ = st;
      if (st.ok()) handed_clock_[layer] = iter;
      staging_cv_.SignalAll();
    };
    Status staged = staging_->StageGradients(layer, name, copies, std::move(hand_over));
    if (!staged.ok()) {
      // No hand-over will come: whoever waits for one (WaitHandedOver) stops.
      MutexLock lock(&staging_mu_);
      if (staging_error_.ok()) staging_error_ = staged;
      staging_cv_.SignalAll();
    }
    return Fail(staged);
  }
  Status st = client_->GradientsReady(layer, iter);
  if (!st.ok()) return Fail(st.Annotate("pushing the gradients of layer " + net_->UniqueLayerName(layer)));
  return Status::OK();
}

Status ClientParameterSync::FinishIteration(int64_t iter) {
  CHECK(initialized_) << "FinishIteration before Init";
  RETURN_IF_ERROR(CheckStaging());
  for (const SyncedParam& p : params_) {
    if (!p.local && p.pushed_iter != iter) {
      return Fail(InternalError("no gradient of " + p.name + " was handed over in iteration " + std::to_string(iter)));
    }
  }
  // Nothing to wait for: each layer's weights for iter + 1 were requested with
  // its gradients, and its next forward waits for them.
  pull_clock_ = iter + 1;
  return Status::OK();
}

Status ClientParameterSync::Drain() {
  if (!initialized_) return status_;
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    if (staging_ != nullptr && !WaitHandedOver(layer, pull_clock_).ok()) break;
    Status st = client_->WaitWeights(layer, pull_clock_);
    if (!st.ok()) Fail(st.Annotate("pulling the weights of layer " + net_->UniqueLayerName(layer))).IgnoreError();
    if (status_.ok()) UploadWeights(layer, pull_clock_).IgnoreError();
  }
  if (staging_ != nullptr) Fail(staging_->Drain()).IgnoreError();
  return CheckStaging();
}

}  // namespace nereus

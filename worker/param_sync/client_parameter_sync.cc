#include "worker/param_sync/client_parameter_sync.h"

#include <utility>

#include "worker/client/options_proto.h"

namespace nereus {

Status ClientParameterSync::Fail(Status st) {
  if (status_.ok() && !st.ok()) status_ = std::move(st);
  return status_;
}

Status ClientParameterSync::Init(const std::vector<Blob*>& params, const std::vector<float>& lr_mult,
                                 const std::vector<float>& decay_mult, const pb::SgdConfig& sgd) {
  CHECK(net_ != nullptr) << "ClientParameterSync::set_net must be called before Init";
  CHECK(!initialized_) << "ClientParameterSync::Init called twice";
  CHECK_EQ(params.size(), lr_mult.size());
  CHECK_EQ(params.size(), decay_mult.size());
  RETURN_IF_ERROR(status_);
  params_ = params;
  names_.assign(params.size(), "");
  tensor_ids_.assign(params.size(), -1);
  pushed_iter_.assign(params.size(), -1);

  // Name each parameter after its owner layer and its index among that
  // layer's blobs (Caffe's "<layer>/<i>").
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    const auto& blobs = net_->layers()[layer]->blobs();
    for (int id : net_->layer_learnable_param_ids(layer)) {
      CHECK_GE(id, 0);
      CHECK_LT(static_cast<size_t>(id), params.size());
      for (size_t b = 0; b < blobs.size(); ++b) {
        if (blobs[b].get() == params[id]) names_[id] = net_->UniqueLayerName(layer) + "/" + std::to_string(b);
      }
      CHECK(!names_[id].empty()) << "learnable param " << id << " is not a blob of its owner layer "
                                 << net_->UniqueLayerName(layer);
    }
  }
  // Each parameter belongs to its owner layer: the client pushes a layer's
  // gradients as soon as its backward ends and fetches its weights for the
  // next iteration in the same round trip, straight into the blob. A layer's
  // local state (BatchNorm's statistics, Layer::IsLocalState) is not
  // registered: it stays this worker's own, never pushed nor pulled.
  std::vector<int> owner(params.size(), -1);
  local_.assign(params.size(), false);
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    const auto& blobs = net_->layers()[layer]->blobs();
    for (int id : net_->layer_learnable_param_ids(layer)) {
      owner[id] = layer;
      for (size_t b = 0; b < blobs.size(); ++b) {
        if (blobs[b].get() == params[id] && net_->layers()[layer]->IsLocalState(static_cast<int>(b))) {
          local_[id] = true;
        }
      }
    }
  }
  std::vector<const float*> initial;  // per registered tensor, in id order
  // A parameter shared with another layer sums two layers' gradients: not one
  // pair of factors.
  std::vector<bool> shared(params.size(), false);
  for (size_t i = 0; i < net_->params().size(); ++i) {
    const int o = net_->param_owners()[i];
    if (o < 0) continue;
    for (size_t p = 0; p < params.size(); ++p)
      if (params[p] == net_->params()[o].get() || params[p] == net_->params()[i].get()) shared[p] = true;
  }
  factors_.assign(params.size(), Layer::GradientFactors());
  for (size_t p = 0; p < params.size(); ++p) {
    CHECK(!names_[p].empty()) << "learnable param " << p << " has no owner layer";
    if (local_[p]) continue;
    TensorSpec spec;
    spec.name = names_[p];
    for (int d : params[p]->shape()) spec.shape.push_back(d);
    spec.lr_mult = lr_mult[p];
    spec.decay_mult = decay_mult[p];
    spec.layer = owner[p];
    spec.data = params[p]->mutable_cpu_data();
    spec.diff = params[p]->cpu_diff();
    const int layer = owner[p];
    const int blob = std::stoi(names_[p].substr(names_[p].rfind('/') + 1));
    Layer::GradientFactors f;
    if (factors_allowed_ && !shared[p] && params[p]->num_axes() == 2 &&
        net_->layers()[layer]->WeightGradientFactors(blob, net_->bottom_vecs()[layer], net_->top_vecs()[layer], &f)) {
      spec.factor_rows = f.rows;
      spec.factor_left = f.left;
      spec.factor_right = f.right;
      factors_[p] = f;
    }
    auto id = client_->RegisterTensor(spec);
    if (!id.ok()) return Fail(id.status().Annotate("registering " + spec.name));
    CHECK_EQ(static_cast<size_t>(*id), initial.size()) << "tensor ids are not consecutive";
    tensor_ids_[p] = *id;
    initial.push_back(params[p]->cpu_data());
  }
  RETURN_IF_ERROR(Fail(client_->Init(SgdConfigFromProto(sgd), initial)));
  // Every worker starts from worker 0's weights, or in a resumed job from the
  // servers' checkpoint at the job's start clock.
  const int64_t start = client_->job().start_clock;
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    Status st = client_->WaitWeights(layer, start);
    if (!st.ok()) return Fail(st.Annotate("pulling the initial weights of layer " + net_->UniqueLayerName(layer)));
  }
  pull_clock_ = start;
  initialized_ = true;
  return Status::OK();
}

Status ClientParameterSync::WaitWeights(int layer, int64_t iter) {
  CHECK(initialized_) << "WaitWeights before Init";
  RETURN_IF_ERROR(status_);
  if (iter != pull_clock_) {
    return Fail(FailedPreconditionError(
        "the weights of iteration " + std::to_string(iter) + " were never requested (the last pull was for clock " +
        std::to_string(pull_clock_) + "; a resumed job starts at the job's start clock)"));
  }
  Status st = client_->WaitWeights(layer, iter);
  if (!st.ok()) {
    return Fail(st.Annotate("pulling the weights of layer " + net_->UniqueLayerName(layer) + " for iteration " +
                            std::to_string(iter)));
  }
  return Status::OK();
}

Status ClientParameterSync::GradientsReady(int layer, int64_t iter) {
  CHECK(initialized_) << "GradientsReady before Init";
  RETURN_IF_ERROR(status_);
  for (int id : net_->layer_learnable_param_ids(layer)) {
    CHECK_LT(pushed_iter_[id], iter) << names_[id] << " pushed twice for iteration " << iter;
    pushed_iter_[id] = iter;
    if (factors_[id].rows == 0) continue;
    // The client reads the factors where they were registered: they must not have moved.
    Layer::GradientFactors now;
    const int blob = std::stoi(names_[id].substr(names_[id].rfind('/') + 1));
    if (!net_->layers()[layer]->WeightGradientFactors(blob, net_->bottom_vecs()[layer], net_->top_vecs()[layer],
                                                      &now) ||
        now.rows != factors_[id].rows || now.left != factors_[id].left || now.right != factors_[id].right) {
      return Fail(FailedPreconditionError("the sufficient factors of " + names_[id] +
                                          " moved or changed shape after Init (was the net reshaped?)"));
    }
  }
  Status st = client_->GradientsReady(layer, iter);
  if (!st.ok()) return Fail(st.Annotate("pushing the gradients of layer " + net_->UniqueLayerName(layer)));
  return Status::OK();
}

Status ClientParameterSync::FinishIteration(int64_t iter) {
  CHECK(initialized_) << "FinishIteration before Init";
  RETURN_IF_ERROR(status_);
  for (size_t p = 0; p < params_.size(); ++p) {
    if (!local_[p] && pushed_iter_[p] != iter) {
      return Fail(
          InternalError("no gradient of " + names_[p] + " was handed over in iteration " + std::to_string(iter)));
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
    Status st = client_->WaitWeights(layer, pull_clock_);
    if (!st.ok()) Fail(st.Annotate("pulling the weights of layer " + net_->UniqueLayerName(layer))).IgnoreError();
  }
  return status_;
}

}  // namespace nereus

#include "worker/client_sync.h"

#include <utility>

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
  pulls_.assign(net_->num_layers(), {});

  // Name each parameter after its owner layer and its index among that
  // layer's blobs (Caffe's "<layer>/<i>").
  for (int layer = 0; layer < net_->num_layers(); ++layer) {
    const auto& blobs = net_->layers()[layer]->blobs();
    for (int id : net_->layer_learnable_param_ids(layer)) {
      CHECK_GE(id, 0);
      CHECK_LT(static_cast<size_t>(id), params.size());
      for (size_t b = 0; b < blobs.size(); ++b) {
        if (blobs[b].get() == params[id]) names_[id] = net_->layer_names()[layer] + "/" + std::to_string(b);
      }
      CHECK(!names_[id].empty()) << "learnable param " << id << " is not a blob of its owner layer "
                                 << net_->layer_names()[layer];
    }
  }
  std::vector<const float*> initial(params.size());
  for (size_t p = 0; p < params.size(); ++p) {
    CHECK(!names_[p].empty()) << "learnable param " << p << " has no owner layer";
    TensorSpec spec;
    spec.name = names_[p];
    for (int d : params[p]->shape()) spec.shape.push_back(d);
    spec.lr_mult = lr_mult[p];
    spec.decay_mult = decay_mult[p];
    auto id = client_->RegisterTensor(spec);
    if (!id.ok()) return Fail(id.status().Annotate("registering " + spec.name));
    tensor_ids_[p] = *id;
    initial[p] = params[p]->cpu_data();
  }
  RETURN_IF_ERROR(Fail(client_->Init(sgd, initial)));

  // Every worker starts from worker 0's weights.
  std::vector<Handle> handles;
  for (size_t p = 0; p < params.size(); ++p) {
    handles.push_back(client_->Pull(tensor_ids_[p], params[p]->mutable_cpu_data(), 0));
  }
  for (size_t p = 0; p < handles.size(); ++p) {
    Status st = handles[p].Wait();
    if (!st.ok()) return Fail(st.Annotate("pulling the initial weights of " + names_[p]));
  }
  pull_clock_ = 0;
  initialized_ = true;
  return Status::OK();
}

Status ClientParameterSync::WaitWeights(int layer, int64_t iter) {
  CHECK(initialized_) << "WaitWeights before Init";
  CHECK_GE(layer, 0);
  CHECK_LT(static_cast<size_t>(layer), pulls_.size());
  RETURN_IF_ERROR(status_);
  if (iter != pull_clock_) {
    return Fail(FailedPreconditionError("the weights of iteration " + std::to_string(iter) +
                                        " were never requested (the last pull was for clock " +
                                        std::to_string(pull_clock_) +
                                        "; a distributed job cannot resume at a later iteration)"));
  }
  for (Handle& h : pulls_[layer]) {
    Status st = h.Wait();
    if (!st.ok()) {
      return Fail(st.Annotate("pulling the weights of layer " + net_->layer_names()[layer] + " for iteration " +
                              std::to_string(iter)));
    }
  }
  pulls_[layer].clear();
  return Status::OK();
}

Status ClientParameterSync::GradientsReady(int layer, int64_t iter) {
  CHECK(initialized_) << "GradientsReady before Init";
  RETURN_IF_ERROR(status_);
  for (int id : net_->layer_learnable_param_ids(layer)) {
    CHECK_LT(pushed_iter_[id], iter) << names_[id] << " pushed twice for iteration " << iter;
    pushed_iter_[id] = iter;
    pushes_.push_back(client_->Push(tensor_ids_[id], params_[id]->cpu_diff(), iter));
  }
  return Status::OK();
}

Status ClientParameterSync::FinishIteration(int64_t iter) {
  CHECK(initialized_) << "FinishIteration before Init";
  RETURN_IF_ERROR(status_);
  for (size_t p = 0; p < params_.size(); ++p) {
    if (pushed_iter_[p] != iter) {
      return Fail(InternalError("no gradient of " + names_[p] + " was handed over in iteration " +
                                std::to_string(iter)));
    }
  }
  for (Handle& h : pushes_) {
    Status st = h.Wait();
    if (!st.ok()) return Fail(st.Annotate("pushing the gradients of iteration " + std::to_string(iter)));
  }
  pushes_.clear();
  // The pulls of this iteration were all waited by the forward pass; wait for
  // any left over before their buffers are reused.
  for (int layer = 0; layer < static_cast<int>(pulls_.size()); ++layer) {
    RETURN_IF_ERROR(WaitWeights(layer, pull_clock_));
  }
  pull_clock_ = iter + 1;
  for (int layer = 0; layer < static_cast<int>(pulls_.size()); ++layer) {
    for (int id : net_->layer_learnable_param_ids(layer)) {
      pulls_[layer].push_back(client_->Pull(tensor_ids_[id], params_[id]->mutable_cpu_data(), pull_clock_));
    }
  }
  return Status::OK();
}

Status ClientParameterSync::Drain() {
  if (!initialized_) return status_;
  for (Handle& h : pushes_) {
    Status st = h.Wait();
    if (!st.ok()) Fail(st.Annotate("pushing gradients")).IgnoreError();
  }
  pushes_.clear();
  for (int layer = 0; layer < static_cast<int>(pulls_.size()); ++layer) {
    for (Handle& h : pulls_[layer]) {
      Status st = h.Wait();
      if (!st.ok()) Fail(st.Annotate("pulling the weights of layer " + net_->layer_names()[layer])).IgnoreError();
    }
    pulls_[layer].clear();
  }
  return status_;
}

}  // namespace nereus

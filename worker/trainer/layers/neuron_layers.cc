#include "worker/trainer/layers/neuron_layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "worker/trainer/math/math_functions.h"

namespace nereus {

void NeuronLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

// ---- Dropout ----

Status DropoutLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::DropoutParameter& p = layer_param_.dropout_param();
  threshold_ = p.dropout_ratio();
  if (!(threshold_ > 0.0f && threshold_ < 1.0f)) {
    return LayerError("dropout_ratio must be in (0, 1), got " + std::to_string(threshold_));
  }
  scale_ = 1.0f / (1.0f - threshold_);
  scale_train_ = p.scale_train();
  uint_threshold_ = static_cast<uint32_t>(static_cast<double>(std::numeric_limits<uint32_t>::max()) * threshold_);
  if (phase_ == caffe::TRAIN) mask_rng_.seed((*rng())());
  return Status::OK();
}

void DropoutLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  NeuronLayer::Reshape(bottom, top);
  if (mask_ == nullptr || mask_count_ != bottom[0]->count()) {
    mask_count_ = bottom[0]->count();
    mask_ = std::make_shared<SyncedMemory>(sizeof(unsigned int) * static_cast<size_t>(mask_count_));
  }
}

std::vector<unsigned int> DropoutLayer::mask() const {
  if (mask_ == nullptr) return {};
  const auto* m = static_cast<const unsigned int*>(mask_->cpu_data());
  return std::vector<unsigned int>(m, m + mask_count_);
}

void DropoutLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  const int count = bottom[0]->count();
  if (phase_ == caffe::TRAIN) {
    const float scale = scale_train_ ? scale_ : 1.0f;
    auto* mask = static_cast<unsigned int*>(mask_->mutable_cpu_data());
    for (int i = 0; i < count; ++i) {
      mask[i] = ops::DropoutKeep(mask_rng_(), uint_threshold_);
      out[i] = ops::DropoutApply(in[i], mask[i], scale);
    }
  } else {
    caffe_copy(count, in, out);
    if (!scale_train_) caffe_scal(count, 1.0f / scale_, out);
  }
}

void DropoutLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const int count = bottom[0]->count();
  if (phase_ == caffe::TRAIN) {
    const float scale = scale_train_ ? scale_ : 1.0f;
    const auto* mask = static_cast<const unsigned int*>(mask_->cpu_data());
    for (int i = 0; i < count; ++i) bottom_diff[i] = ops::DropoutApply(top_diff[i], mask[i], scale);
  } else {
    caffe_copy(count, top_diff, bottom_diff);
    if (!scale_train_) caffe_scal(count, 1.0f / scale_, bottom_diff);
  }
}

}  // namespace nereus

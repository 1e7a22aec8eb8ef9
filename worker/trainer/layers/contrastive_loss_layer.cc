#include "worker/trainer/layers/contrastive_loss_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {
namespace {

// Whether every axis of `blob` from `from` on has size 1 (Caffe's
// height() == 1 and width() == 1 of a blob of up to 4 axes).
bool SingletonFrom(const Blob& blob, int from) {
  for (int i = from; i < blob.num_axes(); ++i) {
    if (blob.shape(i) != 1) return false;
  }
  return true;
}

int Channels(const Blob& blob) { return blob.num_axes() >= 2 ? blob.shape(1) : 1; }

}  // namespace

std::string ContrastiveLossLayer::ShapeError(const std::vector<Blob*>& bottom) const {
  const Blob& a = *bottom[0];
  const Blob& b = *bottom[1];
  const Blob& y = *bottom[2];
  if (a.num_axes() == 0 || y.num_axes() == 0 || y.shape(0) != a.shape(0)) {
    return "the similarity (bottom 2) must have the features' first dimension, got " + a.shape_string() + " and " +
           y.shape_string();
  }
  if (Channels(a) != Channels(b) || !SingletonFrom(a, 2) || !SingletonFrom(b, 2)) {
    return "the two features must be N x C (any further axes 1) with the same C, got " + a.shape_string() + " and " +
           b.shape_string();
  }
  if (!SingletonFrom(y, 1)) return "the similarity must hold one value per pair, got " + y.shape_string();
  return "";
}

Status ContrastiveLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  RETURN_IF_ERROR(LossLayer::LayerSetUpStatus(bottom, top));
  const std::string error = ShapeError(bottom);
  if (!error.empty()) return LayerError(error);
  margin_ = layer_param_.contrastive_loss_param().margin();
  legacy_ = layer_param_.contrastive_loss_param().legacy_version();
  return Status::OK();
}

void ContrastiveLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LossLayer::Reshape(bottom, top);
  const std::string error = ShapeError(bottom);
  LAYER_CHECK(error.empty()) << error;
  num_ = bottom[0]->shape(0);
  channels_ = Channels(*bottom[0]);
  diff_.Reshape({num_, channels_});
  dist_sq_.Reshape({num_});
  pair_loss_.Reshape({num_});
}

void ContrastiveLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  caffe_sub(diff_.count(), bottom[0]->cpu_data(), bottom[1]->cpu_data(), diff_.mutable_cpu_data());
  const float* diff = diff_.cpu_data();
  const float* y = bottom[2]->cpu_data();
  float* dist_sq = dist_sq_.mutable_cpu_data();
  double loss = 0.0;
  for (int i = 0; i < num_; ++i) {
    dist_sq[i] = ops::ContrastiveDistSq(diff + i * channels_, channels_);
    loss += ops::ContrastivePairLoss(dist_sq[i], static_cast<int>(y[i]) != 0, margin_, legacy_);
  }
  top[0]->mutable_cpu_data()[0] = static_cast<float>(loss) / static_cast<float>(num_) / 2.0f;
}

void ContrastiveLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[2]) << "cannot backpropagate to the similarity (bottom 2)";
  const float* diff = diff_.cpu_data();
  const float* dist_sq = dist_sq_.cpu_data();
  const float* y = bottom[2]->cpu_data();
  for (int b = 0; b < 2; ++b) {
    if (!propagate_down[b]) continue;
    const float alpha = (b == 0 ? 1.0f : -1.0f) * top[0]->cpu_diff()[0] / static_cast<float>(num_);
    float* out = bottom[b]->mutable_cpu_diff();
    for (int i = 0; i < num_; ++i) {
      const float factor = ops::ContrastiveGradFactor(dist_sq[i], static_cast<int>(y[i]) != 0, margin_, legacy_, alpha);
      for (int k = 0; k < channels_; ++k) out[i * channels_ + k] = factor * diff[i * channels_ + k];
    }
  }
}

}  // namespace nereus

#include "worker/trainer/layers/loss_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/softmax_layers.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

// ---- LossLayer ----

Status LossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (layer_param_.loss_weight_size() == 0) layer_param_.add_loss_weight(1.0f);
  if (bottom[0]->num_axes() == 0 || bottom[1]->num_axes() == 0 || bottom[0]->shape(0) != bottom[1]->shape(0)) {
    return LayerError("the two bottoms must have the same first dimension (batch size), got " +
                      bottom[0]->shape_string() + " and " + bottom[1]->shape_string());
  }
  return Status::OK();
}

void LossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->shape(0) == bottom[1]->shape(0))
      << "the two bottoms must have the same first dimension, got " << bottom[0]->shape_string() << " and "
      << bottom[1]->shape_string();
  top[0]->Reshape(std::vector<int>{});
}

// ---- EuclideanLoss ----

Status EuclideanLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  RETURN_IF_ERROR(LossLayer::LayerSetUpStatus(bottom, top));
  if (bottom[0]->count(1) != bottom[1]->count(1)) {
    return LayerError("the inputs must have the same dimension, got " + bottom[0]->shape_string() + " and " +
                      bottom[1]->shape_string());
  }
  return Status::OK();
}

void EuclideanLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LossLayer::Reshape(bottom, top);
  LAYER_CHECK(bottom[0]->count(1) == bottom[1]->count(1))
      << "the inputs must have the same dimension, got " << bottom[0]->shape_string() << " and "
      << bottom[1]->shape_string();
  diff_.ReshapeLike(*bottom[0]);
}

void EuclideanLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  caffe_sub(count, bottom[0]->cpu_data(), bottom[1]->cpu_data(), diff_.mutable_cpu_data());
  const float dot = caffe_cpu_dot(count, diff_.cpu_data(), diff_.cpu_data());
  top[0]->mutable_cpu_data()[0] = ops::EuclideanLossValue(dot, bottom[0]->shape(0));
}

void EuclideanLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float alpha = ops::EuclideanLossGradScale(i == 0 ? 1.0f : -1.0f, top[0]->cpu_diff()[0], bottom[i]->shape(0));
    caffe_cpu_scale(bottom[i]->count(), alpha, diff_.cpu_data(), bottom[i]->mutable_cpu_diff());
  }
}

// ---- SigmoidCrossEntropyLoss ----

Status SigmoidCrossEntropyLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  RETURN_IF_ERROR(LossLayer::LayerSetUpStatus(bottom, top));
  if (bottom[0]->count() != bottom[1]->count()) {
    return LayerError("SIGMOID_CROSS_ENTROPY_LOSS layer inputs must have the same count, got " +
                      bottom[0]->shape_string() + " and " + bottom[1]->shape_string());
  }
  const caffe::LossParameter& lp = layer_param_.loss_param();
  has_ignore_label_ = lp.has_ignore_label();
  ignore_label_ = lp.ignore_label();
  if (lp.has_normalization()) {
    normalization_ = lp.normalization();
  } else if (lp.has_normalize()) {
    normalization_ = lp.normalize() ? caffe::LossParameter::VALID : caffe::LossParameter::BATCH_SIZE;
  } else {
    normalization_ = caffe::LossParameter::BATCH_SIZE;
  }
  return Status::OK();
}

void SigmoidCrossEntropyLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LossLayer::Reshape(bottom, top);
  LAYER_CHECK(bottom[0]->count() == bottom[1]->count())
      << "inputs must have the same count, got " << bottom[0]->shape_string() << " and " << bottom[1]->shape_string();
  outer_num_ = bottom[0]->shape(0);
  inner_num_ = bottom[0]->count(1);
}

// SoftmaxWithLoss's normalizer (the same modes; never below 1, so all
// targets ignored does not divide by zero).
float SigmoidCrossEntropyLossLayer::Normalizer(int valid_count) const {
  return ops::SoftmaxLossNormalizer(static_cast<int>(normalization_), outer_num_, inner_num_, valid_count);
}

void SigmoidCrossEntropyLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  const int count = bottom[0]->count();
  int valid_count = 0;
  float loss = 0.0f;
  for (int i = 0; i < count; ++i) {
    if (ops::SigmoidCrossEntropyIgnored(t[i], has_ignore_label_, ignore_label_)) continue;
    loss -= ops::SigmoidCrossEntropyLogLikelihood(x[i], t[i]);
    ++valid_count;
  }
  normalizer_ = Normalizer(valid_count);
  top[0]->mutable_cpu_data()[0] = loss / normalizer_;
}

void SigmoidCrossEntropyLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cannot backpropagate to the targets (bottom 1)";
  if (!propagate_down[0]) return;
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int count = bottom[0]->count();
  const float scale = top[0]->cpu_diff()[0] / normalizer_;
  for (int i = 0; i < count; ++i) {
    dx[i] = ops::SigmoidCrossEntropyGradient(
        x[i], t[i], ops::SigmoidCrossEntropyIgnored(t[i], has_ignore_label_, ignore_label_), scale);
  }
}

}  // namespace nereus

#include "worker/trainer/layers/loss_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math_functions.h"

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
  diff_.resize(bottom[0]->count());
}

void EuclideanLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  caffe_sub(count, bottom[0]->cpu_data(), bottom[1]->cpu_data(), diff_.data());
  const float dot = caffe_cpu_dot(count, diff_.data(), diff_.data());
  top[0]->mutable_cpu_data()[0] = dot / bottom[0]->shape(0) / 2.0f;
}

void EuclideanLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    const float sign = i == 0 ? 1.0f : -1.0f;
    const float alpha = sign * top[0]->cpu_diff()[0] / bottom[i]->shape(0);
    caffe_cpu_scale(bottom[i]->count(), alpha, diff_.data(), bottom[i]->mutable_cpu_diff());
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

float SigmoidCrossEntropyLossLayer::Normalizer(int valid_count) const {
  float normalizer = 1.0f;
  switch (normalization_) {
    case caffe::LossParameter::FULL:
      normalizer = static_cast<float>(outer_num_ * inner_num_);
      break;
    case caffe::LossParameter::VALID:
      normalizer = valid_count == -1 ? static_cast<float>(outer_num_ * inner_num_) : static_cast<float>(valid_count);
      break;
    case caffe::LossParameter::BATCH_SIZE:
      normalizer = static_cast<float>(outer_num_);
      break;
    case caffe::LossParameter::NONE:
      normalizer = 1.0f;
      break;
  }
  // Never divide by zero (all targets ignored).
  return std::max(1.0f, normalizer);
}

void SigmoidCrossEntropyLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  const float* t = bottom[1]->cpu_data();
  const int count = bottom[0]->count();
  int valid_count = 0;
  float loss = 0.0f;
  for (int i = 0; i < count; ++i) {
    if (has_ignore_label_ && static_cast<int>(t[i]) == ignore_label_) continue;
    // -[t log(s) + (1 - t) log(1 - s)] with s = sigmoid(x), written so that
    // exp never overflows: x (t - [x >= 0]) - log(1 + exp(x - 2 x [x >= 0])).
    const float positive = x[i] >= 0.0f ? 1.0f : 0.0f;
    loss -= x[i] * (t[i] - positive) - std::log(1.0f + std::exp(x[i] - 2.0f * x[i] * positive));
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
    if (has_ignore_label_ && static_cast<int>(t[i]) == ignore_label_) {
      dx[i] = 0.0f;
      continue;
    }
    const float sigmoid = 0.5f * std::tanh(0.5f * x[i]) + 0.5f;
    dx[i] = (sigmoid - t[i]) * scale;
  }
}

}  // namespace nereus

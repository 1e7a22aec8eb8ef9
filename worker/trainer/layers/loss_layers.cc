#include "worker/trainer/layers/loss_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"
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

// ---- SoftmaxWithLoss ----

Status SoftmaxWithLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  // Loss layers weigh their loss top 1 unless told otherwise (Caffe's
  // LossLayer); a probability top gets weight 0.
  if (layer_param_.loss_weight_size() == 0) {
    layer_param_.add_loss_weight(1.0f);
    for (size_t i = 1; i < top.size(); ++i) layer_param_.add_loss_weight(0.0f);
  }
  Status axis_ok = CheckAxis(layer_param_.softmax_param().axis(), *bottom[0], "softmax_param.axis");
  if (!axis_ok.ok()) return LayerError(axis_ok.message());
  caffe::LayerParameter softmax_param;
  softmax_param.set_name(layer_param_.name() + "/softmax");
  softmax_param.set_type("Softmax");
  *softmax_param.mutable_softmax_param() = layer_param_.softmax_param();
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param);
  softmax_->set_device(device());
  softmax_bottom_ = {bottom[0]};
  softmax_top_ = {&prob_};
  RETURN_IF_ERROR(softmax_->SetUp(softmax_bottom_, softmax_top_));

  const caffe::LossParameter& lp = layer_param_.loss_param();
  has_ignore_label_ = lp.has_ignore_label();
  ignore_label_ = lp.ignore_label();
  if (!lp.has_normalization() && lp.has_normalize()) {
    normalization_ = lp.normalize() ? caffe::LossParameter::VALID : caffe::LossParameter::BATCH_SIZE;
  } else {
    normalization_ = lp.normalization();
  }
  const int axis = bottom[0]->CanonicalAxisIndex(layer_param_.softmax_param().axis());
  if (bottom[0]->count(0, axis) * bottom[0]->count(axis + 1) != bottom[1]->count()) {
    return LayerError(
        "number of labels must match number of predictions; e.g., if softmax "
        "axis == 1 and prediction shape is (N, C, H, W), label count (number of "
        "labels) must be N*H*W, with integer values in {0, 1, ..., C-1}; got "
        "prediction shape " +
        bottom[0]->shape_string() + " and label shape " + bottom[1]->shape_string());
  }
  return Status::OK();
}

Layer::LabelRange SoftmaxWithLossLayer::AcceptedLabels(int bottom_index) const {
  return bottom_index == 1 ? LabelsBelow(channels_, has_ignore_label_, ignore_label_) : LabelRange();
}

void SoftmaxWithLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->shape(0) == bottom[1]->shape(0))
      << "the data and label should have the same first dimension: " << bottom[0]->shape_string() << " vs "
      << bottom[1]->shape_string();
  softmax_bottom_[0] = bottom[0];
  softmax_->Reshape(softmax_bottom_, softmax_top_);
  const int axis = bottom[0]->CanonicalAxisIndex(layer_param_.softmax_param().axis());
  outer_num_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_num_ = bottom[0]->count(axis + 1);
  LAYER_CHECK(outer_num_ * inner_num_ == bottom[1]->count())
      << "number of labels must match number of predictions; prediction shape " << bottom[0]->shape_string()
      << ", label shape " << bottom[1]->shape_string();
  top[0]->Reshape(std::vector<int>{});
  if (top.size() >= 2) top[1]->ReshapeLike(*bottom[0]);
}

float SoftmaxWithLossLayer::Normalizer(int valid_count) const {
  return ops::SoftmaxLossNormalizer(static_cast<int>(normalization_), outer_num_, inner_num_, valid_count);
}

void SoftmaxWithLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Forward(softmax_bottom_, softmax_top_);
  const float* prob = prob_.cpu_data();
  const int dim = prob_.count() / outer_num_;
  const PositionLosses sum = SumPositionLosses(
      bottom[1]->cpu_data(), outer_num_, inner_num_, has_ignore_label_, ignore_label_, channels_,
      [&](int i, int j, int label_value) { return ops::SoftmaxLossAt(prob[i * dim + label_value * inner_num_ + j]); });
  if (sum.bad_position >= 0) {
    set_forward_error(StatusCode::kInvalidArgument, LabelOutOfRange(sum.bad_label, sum.bad_position, channels_));
    return;
  }
  valid_count_ = sum.count;
  top[0]->mutable_cpu_data()[0] = static_cast<float>(sum.loss) / Normalizer(sum.count);
  if (top.size() == 2) caffe_copy(prob_.count(), prob, top[1]->mutable_cpu_data());
}

void SoftmaxWithLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    LOG(FATAL) << "layer " << layer_param_.name() << " (" << type() << "): cannot backpropagate to the label input";
  }
  if (!propagate_down[0]) return;
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const float* prob = prob_.cpu_data();
  caffe_copy(prob_.count(), prob, bottom_diff);
  const float* label = bottom[1]->cpu_data();
  const int dim = prob_.count() / outer_num_;
  int count = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label_value = static_cast<int>(label[i * inner_num_ + j]);
      if (has_ignore_label_ && label_value == ignore_label_) {
        for (int c = 0; c < channels_; ++c) bottom_diff[i * dim + c * inner_num_ + j] = 0.0f;
      } else {
        bottom_diff[i * dim + label_value * inner_num_ + j] -= 1.0f;
        ++count;
      }
    }
  }
  const float loss_weight = top[0]->cpu_diff()[0] / Normalizer(count);
  caffe_scal(prob_.count(), loss_weight, bottom_diff);
}

}  // namespace nereus

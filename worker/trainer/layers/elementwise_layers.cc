#include "worker/trainer/layers/elementwise_layers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/trainer/filler.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math_functions.h"

namespace nereus {
namespace {

// The input of a layer's forward, valid in backward: the bottom itself, or
// the copy the forward kept when running in place.
const float* SavedInput(const Blob& bottom, const Blob& top, const Blob& copy) {
  return &bottom == &top ? copy.cpu_data() : bottom.cpu_data();
}

void SaveInputIfInPlace(const Blob& bottom, const Blob& top, Blob* copy) {
  if (&bottom != &top) return;
  copy->ReshapeLike(bottom);
  caffe_copy(bottom.count(), bottom.cpu_data(), copy->mutable_cpu_data());
}

}  // namespace

// ---- AbsVal ----

Status AbsValLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0] == top[0]) return LayerError("AbsVal does not allow in-place computation");
  return Status::OK();
}

void AbsValLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardEach(*bottom[0], top[0], ops::Abs);
}

void AbsValLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) BackwardEach(*top[0], bottom[0]->cpu_data(), bottom[0], ops::AbsValBackward);
}

// ---- BNLL ----

void BNLLLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveInputIfInPlace(*bottom[0], *top[0], &bottom_copy_);
  ForwardEach(*bottom[0], top[0], ops::BNLLForward);
}

void BNLLLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  BackwardEach(*top[0], SavedInput(*bottom[0], *top[0], bottom_copy_), bottom[0], ops::BNLLBackward);
}

// ---- ELU ----

void ELULayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float alpha = layer_param_.elu_param().alpha();
  ForwardEach(*bottom[0], top[0], [alpha](float x) { return ops::ELUForward(x, alpha); });
}

void ELULayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* in = bottom[0]->cpu_data();
  const float* out = top[0]->cpu_data();
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const float alpha = layer_param_.elu_param().alpha();
  for (int i = 0; i < bottom[0]->count(); ++i) bottom_diff[i] = ops::ELUBackward(top_diff[i], in[i], out[i], alpha);
}

// ---- Exp ----

Status ExpLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ExpParameter& p = layer_param_.exp_param();
  const float base = p.base();
  if (base != -1.0f && !(base > 0.0f)) {
    return LayerError("exp_param.base must be strictly positive (or -1 for e), got " + std::to_string(base));
  }
  const float log_base = base == -1.0f ? 1.0f : std::log(base);
  inner_scale_ = log_base * p.scale();
  outer_scale_ = p.shift() == 0.0f ? 1.0f : std::exp(log_base * p.shift());
  return Status::OK();
}

void ExpLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardEach(*bottom[0], top[0], [this](float x) { return ops::ExpForward(x, inner_scale_, outer_scale_); });
}

void ExpLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  BackwardEach(*top[0], top[0]->cpu_data(), bottom[0],
               [this](float dy, float y) { return ops::ExpBackward(dy, y, inner_scale_); });
}

// ---- Log ----

Status LogLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::LogParameter& p = layer_param_.log_param();
  const float base = p.base();
  if (base != -1.0f && !(base > 0.0f)) {
    return LayerError("log_param.base must be strictly positive (or -1 for e), got " + std::to_string(base));
  }
  const float log_base = base == -1.0f ? 1.0f : std::log(base);
  if (!std::isfinite(log_base) || log_base == 0.0f) {
    return LayerError("log_param.base " + std::to_string(base) + " has no usable logarithm");
  }
  base_scale_ = 1.0f / log_base;
  input_scale_ = p.scale();
  input_shift_ = p.shift();
  return Status::OK();
}

void LogLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveInputIfInPlace(*bottom[0], *top[0], &bottom_copy_);
  ForwardEach(*bottom[0], top[0],
              [this](float x) { return ops::LogForward(x, input_scale_, input_shift_, base_scale_); });
}

void LogLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  BackwardEach(*top[0], SavedInput(*bottom[0], *top[0], bottom_copy_), bottom[0],
               [this](float dy, float x) { return ops::LogBackward(dy, x, input_scale_, input_shift_, base_scale_); });
}

// ---- Power ----

Status PowerLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::PowerParameter& p = layer_param_.power_param();
  power_ = p.power();
  scale_ = p.scale();
  shift_ = p.shift();
  return Status::OK();
}

float PowerLayer::ConstantOutput() const { return power_ == 0.0f ? 1.0f : std::pow(shift_, power_); }

void PowerLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveInputIfInPlace(*bottom[0], *top[0], &bottom_copy_);
  if (scale_ * power_ == 0.0f) {
    // The output does not depend on the input.
    caffe_set(bottom[0]->count(), ConstantOutput(), top[0]->mutable_cpu_data());
    return;
  }
  ForwardEach(*bottom[0], top[0], [this](float x) { return ops::PowerForward(x, power_, scale_, shift_); });
}

void PowerLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  BackwardEach(*top[0], SavedInput(*bottom[0], *top[0], bottom_copy_), bottom[0],
               [this](float dy, float x) { return ops::PowerBackward(dy, x, power_, scale_, shift_); });
}

// ---- Threshold ----

void ThresholdLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float threshold = layer_param_.threshold_param().threshold();
  ForwardEach(*bottom[0], top[0], [threshold](float x) { return ops::ThresholdForward(x, threshold); });
}

void ThresholdLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[0]) << "Threshold has no gradient; set propagate_down: false";
}

// ---- PReLU ----

Status PReLULayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0]->num_axes() < 2) {
    return LayerError("the bottom must have at least 2 axes (channels are axis 1), got " + bottom[0]->shape_string());
  }
  const caffe::PReLUParameter& p = layer_param_.prelu_param();
  channel_shared_ = p.channel_shared();
  const int channels = bottom[0]->shape(1);
  const std::vector<int> shape = channel_shared_ ? std::vector<int>{} : std::vector<int>{channels};
  if (!blobs_.empty()) {
    RETURN_IF_ERROR(CheckExistingShape(*blobs_[0], shape, "slope blob"));
  } else {
    RETURN_IF_ERROR(AddFilledBlob(shape, FillerOrConstant(p.has_filler(), p.filler(), 0.25f), "prelu_param.filler"));
  }
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

void PReLULayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->num_axes() >= 2) << "the bottom must have at least 2 axes, got " << bottom[0]->shape_string();
  LAYER_CHECK(channel_shared_ || bottom[0]->shape(1) == blobs_[0]->count())
      << "the bottom has " << bottom[0]->shape(1) << " channels, the slopes " << blobs_[0]->count();
  NeuronLayer::Reshape(bottom, top);
}

void PReLULayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveInputIfInPlace(*bottom[0], *top[0], &bottom_copy_);
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  const float* slope = blobs_[0]->cpu_data();
  const int count = bottom[0]->count();
  const int channels = bottom[0]->shape(1);
  const int dim = bottom[0]->count(2);
  for (int i = 0; i < count; ++i) {
    out[i] = ops::ReLUForward(in[i], slope[ops::PReLUChannel(i, channels, dim, channel_shared_)]);
  }
}

void PReLULayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* in = SavedInput(*bottom[0], *top[0], bottom_copy_);
  const float* slope = blobs_[0]->cpu_data();
  const float* top_diff = top[0]->cpu_diff();
  const int count = bottom[0]->count();
  const int channels = bottom[0]->shape(1);
  const int dim = bottom[0]->count(2);
  if (param_propagate_down(0)) {
    // Each slope's terms in the order of the elements (one at a time, as the
    // GPU's one thread per slope adds them).
    float* slope_diff = blobs_[0]->mutable_cpu_diff();
    const int num = bottom[0]->shape(0);
    for (int c = 0; c < blobs_[0]->count(); ++c) {
      slope_diff[c] = ops::PReLUSlopeGradient(top_diff, in, c, num, channels, dim, channel_shared_, slope_diff[c]);
    }
  }
  if (propagate_down[0]) {
    float* bottom_diff = bottom[0]->mutable_cpu_diff();
    for (int i = 0; i < count; ++i) {
      bottom_diff[i] =
          ops::ReLUBackward(top_diff[i], in[i], slope[ops::PReLUChannel(i, channels, dim, channel_shared_)]);
    }
  }
}

}  // namespace nereus

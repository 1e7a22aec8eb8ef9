#include "worker/trainer/layers/neuron_layers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "worker/trainer/filler.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

void NeuronLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

namespace ops {
namespace {

// ln(base) for exp_param/log_param (`field`): base -1 means e.
StatusOr<float> LogOfBase(const std::string& field, float base) {
  if (base != -1.0f && !(base > 0.0f)) {
    return InvalidArgumentError(field + ".base must be strictly positive (or -1 for e), got " + std::to_string(base));
  }
  return base == -1.0f ? 1.0f : std::log(base);
}

}  // namespace

Status ExpOp::SetUp(const caffe::LayerParameter& param) {
  const caffe::ExpParameter& p = param.exp_param();
  ASSIGN_OR_RETURN(const float log_base, LogOfBase("exp_param", p.base()));
  inner_scale = log_base * p.scale();
  outer_scale = p.shift() == 0.0f ? 1.0f : std::exp(log_base * p.shift());
  return Status::OK();
}

Status LogOp::SetUp(const caffe::LayerParameter& param) {
  const caffe::LogParameter& p = param.log_param();
  ASSIGN_OR_RETURN(const float log_base, LogOfBase("log_param", p.base()));
  if (!std::isfinite(log_base) || log_base == 0.0f) {
    return InvalidArgumentError("log_param.base " + std::to_string(p.base()) + " has no usable logarithm");
  }
  base_scale = 1.0f / log_base;
  input_scale = p.scale();
  input_shift = p.shift();
  return Status::OK();
}

Status PowerOp::SetUp(const caffe::LayerParameter& param) {
  const caffe::PowerParameter& p = param.power_param();
  power = p.power();
  scale = p.scale();
  shift = p.shift();
  return Status::OK();
}

bool PowerOp::Constant(float* value) const {
  if (scale * power != 0.0f) return false;
  *value = power == 0.0f ? 1.0f : std::pow(shift, power);
  return true;
}

Status ClipOp::SetUp(const caffe::LayerParameter& param) {
  const caffe::ClipParameter& p = param.clip_param();
  if (!param.has_clip_param()) return InvalidArgumentError("clip_param with min and max must be given");
  min = p.min();
  max = p.max();
  if (!(min <= max)) {
    return InvalidArgumentError("clip_param.min (" + std::to_string(min) + ") must not exceed max (" +
                                std::to_string(max) + ")");
  }
  return Status::OK();
}

}  // namespace ops

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
  SaveInputIfInPlace(CpuMath(), *bottom[0], *top[0], &bottom_copy_);
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
  const float* in = SavedInput(*bottom[0], *top[0], bottom_copy_).cpu_data();
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

#include "worker/trainer/layers/scale_layer.h"

#include <algorithm>
#include <string>

#include "worker/trainer/filler.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status ScaleLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ScaleParameter& p = layer_param_.scale_param();
  const Blob& in = *bottom[0];
  if (p.axis() < -in.num_axes() || p.axis() >= std::max(in.num_axes(), 1)) {
    return LayerError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " + in.shape_string());
  }
  axis_ = in.num_axes() == 0 ? 0 : in.CanonicalAxisIndex(p.axis());
  bias_term_ = p.bias_term();
  std::vector<int> shape;
  if (bottom.size() == 1) {
    if (p.num_axes() < -1) return LayerError("num_axes must be non-negative, or -1 for all");
    const int end = p.num_axes() == -1 ? in.num_axes() : axis_ + p.num_axes();
    if (end > in.num_axes()) {
      return LayerError("scale blob's shape extends past bottom[0]'s shape " + in.shape_string() + " (axis " +
                        std::to_string(axis_) + ", num_axes " + std::to_string(p.num_axes()) + ")");
    }
    shape.assign(in.shape().begin() + axis_, in.shape().begin() + end);
  } else {
    if (bottom[1]->num_axes() == 0) axis_ = 0;
    Status fits = AxisBroadcast::Check(in, *bottom[1], axis_, "scale");
    if (!fits.ok()) return LayerError(fits.message());
    shape = bottom[1]->shape();
  }
  const size_t expected_blobs = (bottom.size() == 1 ? 1 : 0) + (bias_term_ ? 1 : 0);
  if (!blobs_.empty()) {
    if (blobs_.size() != expected_blobs) {
      return LayerError("has " + std::to_string(blobs_.size()) + " blobs, expected " + std::to_string(expected_blobs));
    }
    for (const auto& blob : blobs_) RETURN_IF_ERROR(CheckExistingShape(*blob, shape, "blob"));
  } else {
    if (bottom.size() == 1) {
      RETURN_IF_ERROR(AddFilledBlob(shape, FillerOrConstant(p.has_filler(), p.filler(), 1.0f), "scale_param.filler"));
    }
    if (bias_term_) {
      RETURN_IF_ERROR(AddFilledBlob(shape, FillerOrConstant(p.has_bias_filler(), p.bias_filler(), 0.0f),
                                    "scale_param.bias_filler"));
    }
  }
  bias_index_ = bias_term_ ? static_cast<int>(blobs_.size()) - 1 : -1;
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

void ScaleLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& scale = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  axis_ = scale.num_axes() == 0 ? 0 : bottom[0]->CanonicalAxisIndex(layer_param_.scale_param().axis());
  Status fits = AxisBroadcast::Check(*bottom[0], scale, axis_, "scale");
  LAYER_CHECK(fits.ok()) << fits.message();
  axes_.Reshape(*bottom[0], scale, axis_);
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

void ScaleLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0] == top[0]) {
    bottom_copy_.ReshapeLike(*bottom[0]);
    caffe_copy(bottom[0]->count(), bottom[0]->cpu_data(), bottom_copy_.mutable_cpu_data());
  }
  const float* scale = bottom.size() > 1 ? bottom[1]->cpu_data() : blobs_[0]->cpu_data();
  const float* bias = bias_term_ ? blobs_[bias_index_]->cpu_data() : nullptr;
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  for (int n = 0; n < axes_.outer_dim; ++n) {
    for (int d = 0; d < axes_.dim; ++d) {
      const int base = (n * axes_.dim + d) * axes_.inner_dim;
      const float factor = scale[d];
      if (bias != nullptr) {
        for (int j = 0; j < axes_.inner_dim; ++j) out[base + j] = ops::ScaleForwardBias(in[base + j], factor, bias[d]);
      } else {
        for (int j = 0; j < axes_.inner_dim; ++j) out[base + j] = ops::ScaleForward(in[base + j], factor);
      }
    }
  }
}

void ScaleLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  const bool scale_is_param = bottom.size() == 1;
  // Parameter gradients first: in place, dy and the bottom diff are one buffer.
  if (bias_term_ && param_propagate_down(bias_index_)) {
    axes_.AddRowSums(dy, blobs_[bias_index_]->mutable_cpu_diff());
  }
  if ((scale_is_param && param_propagate_down(0)) || (!scale_is_param && propagate_down[1])) {
    const float* x = bottom[0] == top[0] ? bottom_copy_.cpu_data() : bottom[0]->cpu_data();
    float* scale_diff = scale_is_param ? blobs_[0]->mutable_cpu_diff() : bottom[1]->mutable_cpu_diff();
    // A learned scale accumulates (Backward adds to parameter diffs); a
    // bottom's gradient is written.
    if (!scale_is_param) caffe_set(axes_.dim, 0.0f, scale_diff);
    for (int n = 0; n < axes_.outer_dim; ++n) {
      for (int d = 0; d < axes_.dim; ++d) {
        const int base = (n * axes_.dim + d) * axes_.inner_dim;
        float sum = 0.0f;
        for (int j = 0; j < axes_.inner_dim; ++j) sum += dy[base + j] * x[base + j];
        scale_diff[d] += sum;
      }
    }
  }
  if (propagate_down[0]) {
    const float* scale = scale_is_param ? blobs_[0]->cpu_data() : bottom[1]->cpu_data();
    float* dx = bottom[0]->mutable_cpu_diff();
    for (int n = 0; n < axes_.outer_dim; ++n) {
      for (int d = 0; d < axes_.dim; ++d) {
        const int base = (n * axes_.dim + d) * axes_.inner_dim;
        for (int j = 0; j < axes_.inner_dim; ++j) dx[base + j] = ops::ScaleForward(dy[base + j], scale[d]);
      }
    }
  }
}

}  // namespace nereus

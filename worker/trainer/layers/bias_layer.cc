#include "worker/trainer/layers/bias_layer.h"

#include <string>

#include "worker/trainer/filler.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

int BiasLayer::BiasAxis(const Blob& bottom, const Blob& bias) const {
  return bias.num_axes() == 0 ? 0 : bottom.CanonicalAxisIndex(layer_param_.bias_param().axis());
}

Status BiasLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::BiasParameter& p = layer_param_.bias_param();
  const Blob& in = *bottom[0];
  const bool scalar_bias = bottom.size() > 1 ? bottom[1]->num_axes() == 0 : p.num_axes() == 0;
  if (!scalar_bias && (p.axis() < -in.num_axes() || p.axis() >= in.num_axes())) {
    return LayerError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " + in.shape_string());
  }
  if (bottom.size() > 1) {
    if (!blobs_.empty()) return LayerError("has a learned bias blob but takes its bias from bottom[1]");
    const Status fits = AxisBroadcast::Check(in, *bottom[1], BiasAxis(in, *bottom[1]), "bias");
    return fits.ok() ? fits : LayerError(fits.message());
  }
  if (p.num_axes() < -1) return LayerError("num_axes must be non-negative, or -1 to extend to the end of bottom[0]");
  const int axis = scalar_bias ? 0 : in.CanonicalAxisIndex(p.axis());
  const int end = p.num_axes() == -1 ? in.num_axes() : axis + p.num_axes();
  if (end > in.num_axes()) {
    return LayerError("bias blob's shape extends past bottom[0]'s shape " + in.shape_string() + " (axis " +
                      std::to_string(axis) + ", num_axes " + std::to_string(p.num_axes()) + ")");
  }
  const std::vector<int> shape(in.shape().begin() + axis, in.shape().begin() + end);
  if (!blobs_.empty()) {
    if (blobs_.size() != 1) return LayerError("has " + std::to_string(blobs_.size()) + " blobs, expected 1");
    RETURN_IF_ERROR(CheckExistingShape(*blobs_[0], shape, "bias blob"));
  } else {
    RETURN_IF_ERROR(AddFilledBlob(shape, FillerOrConstant(p.has_filler(), p.filler(), 0.0f), "bias_param.filler"));
  }
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

void BiasLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& bias = bottom.size() > 1 ? *bottom[1] : *blobs_[0];
  const int axis = BiasAxis(*bottom[0], bias);
  const Status fits = AxisBroadcast::Check(*bottom[0], bias, axis, "bias");
  LAYER_CHECK(fits.ok()) << fits.message();
  axes_.Reshape(*bottom[0], bias, axis);
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

void BiasLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* bias = bottom.size() > 1 ? bottom[1]->cpu_data() : blobs_[0]->cpu_data();
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  const int count = bottom[0]->count();
  for (int i = 0; i < count; ++i) out[i] = ops::BiasForward(in[i], bias[ops::BiasIndex(i, axes_.dim, axes_.inner_dim)]);
}

void BiasLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->cpu_diff();
  // In place the bottom's gradient is the top's already.
  if (propagate_down[0] && bottom[0] != top[0]) caffe_copy(top[0]->count(), dy, bottom[0]->mutable_cpu_diff());
  const bool bias_is_param = bottom.size() == 1;
  if (bias_is_param ? !param_propagate_down(0) : !propagate_down[1]) return;
  // A learned bias accumulates (Backward adds to parameter diffs); a
  // bottom's gradient is written.
  float* bias_diff = bias_is_param ? blobs_[0]->mutable_cpu_diff() : bottom[1]->mutable_cpu_diff();
  if (!bias_is_param) caffe_set(axes_.dim, 0.0f, bias_diff);
  axes_.AddRowSums(dy, bias_diff);
}

}  // namespace nereus

#include "worker/trainer/layers/reduction_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

static_assert(ops::kReductionAsum == caffe::ReductionParameter::ASUM, "caffe.proto's ReductionOp");
static_assert(ops::kReductionSumsq == caffe::ReductionParameter::SUMSQ, "caffe.proto's ReductionOp");

Status ReductionLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ReductionParameter& p = layer_param_.reduction_param();
  const int num_axes = bottom[0]->num_axes();
  // A scalar bottom (no axes) has only axis 0, as Caffe's CanonicalAxisIndex allows.
  if (!(p.axis() == 0 || (p.axis() >= -num_axes && p.axis() < num_axes))) {
    return LayerError("reduction_param.axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                      bottom[0]->shape_string());
  }
  op_ = p.operation();
  return Status::OK();
}

void ReductionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int num_axes = bottom[0]->num_axes();
  const int param_axis = layer_param_.reduction_param().axis();
  LAYER_CHECK(param_axis == 0 || (param_axis >= -num_axes && param_axis < num_axes))
      << "axis " << param_axis << " is out of range for bottom shape " << bottom[0]->shape_string();
  const int axis = num_axes == 0 ? 0 : bottom[0]->CanonicalAxisIndex(param_axis);
  top[0]->Reshape(std::vector<int>(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis));
  num_ = bottom[0]->count(0, axis);
  dim_ = bottom[0]->count(axis);
  coeff_ = layer_param_.reduction_param().coeff();
  if (op_ == caffe::ReductionParameter::MEAN) coeff_ /= static_cast<float>(dim_);
}

void ReductionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  for (int i = 0; i < num_; ++i) out[i] = ops::ReduceItem(in + static_cast<long>(i) * dim_, dim_, op_, coeff_);
}

void ReductionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* x = bottom[0]->cpu_data();
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const int count = bottom[0]->count();
  for (int j = 0; j < count; ++j) bottom_diff[j] = ops::ReductionBackward(top_diff[j / dim_], x[j], op_, coeff_);
}

}  // namespace nereus

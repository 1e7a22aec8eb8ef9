#include "worker/trainer/layers/concat_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

std::string ConcatLayer::ShapeProblem(const std::vector<Blob*>& bottom, int* axis) const {
  const caffe::ConcatParameter& p = layer_param_.concat_param();
  const int num_axes = bottom[0]->num_axes();
  if (p.has_concat_dim()) {
    *axis = static_cast<int>(p.concat_dim());
    if (*axis >= num_axes) {
      return "concat_dim " + std::to_string(*axis) + " is out of range for bottom shape " + bottom[0]->shape_string();
    }
  } else {
    if (p.axis() < -num_axes || p.axis() >= num_axes) {
      return "axis " + std::to_string(p.axis()) + " is out of range for bottom shape " + bottom[0]->shape_string();
    }
    *axis = bottom[0]->CanonicalAxisIndex(p.axis());
  }
  for (size_t i = 1; i < bottom.size(); ++i) {
    bool same = bottom[i]->num_axes() == num_axes;
    for (int a = 0; same && a < num_axes; ++a) {
      if (a != *axis && bottom[i]->shape(a) != bottom[0]->shape(a)) same = false;
    }
    if (!same) {
      return "all inputs must have the same shape except at concat axis " + std::to_string(*axis) + ": bottom 0 is " +
             bottom[0]->shape_string() + ", bottom " + std::to_string(i) + " is " + bottom[i]->shape_string();
    }
  }
  return "";
}

Status ConcatLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ConcatParameter& p = layer_param_.concat_param();
  if (p.has_axis() && p.has_concat_dim()) {
    return LayerError("either axis or concat_dim should be specified; not both");
  }
  int axis = 0;
  const std::string problem = ShapeProblem(bottom, &axis);
  if (!problem.empty()) return LayerError(problem);
  return Status::OK();
}

void ConcatLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string problem = ShapeProblem(bottom, &concat_axis_);
  LAYER_CHECK(problem.empty()) << problem;
  std::vector<int> top_shape = bottom[0]->shape();
  for (size_t i = 1; i < bottom.size(); ++i) top_shape[concat_axis_] += bottom[i]->shape(concat_axis_);
  top[0]->Reshape(top_shape);
  num_concats_ = bottom[0]->count(0, concat_axis_);
  concat_input_size_ = bottom[0]->count(concat_axis_ + 1);
}

void ConcatLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  float* top_data = top[0]->mutable_cpu_data();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    const float* bottom_data = b->cpu_data();
    const int chunk = bottom_concat_axis * concat_input_size_;
    for (int n = 0; n < num_concats_; ++n) {
      caffe_copy(chunk, bottom_data + n * chunk, top_data + (n * top_concat_axis + offset) * concat_input_size_);
    }
  });
}

void ConcatLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  const float* top_diff = top[0]->cpu_diff();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    if (!propagate_down[i]) return;
    float* bottom_diff = b->mutable_cpu_diff();
    const int chunk = bottom_concat_axis * concat_input_size_;
    for (int n = 0; n < num_concats_; ++n) {
      caffe_copy(chunk, top_diff + (n * top_concat_axis + offset) * concat_input_size_, bottom_diff + n * chunk);
    }
  });
}

}  // namespace nereus

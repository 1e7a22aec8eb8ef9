#include "worker/trainer/layers/inner_product_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status InnerProductLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::InnerProductParameter& p = layer_param_.inner_product_param();
  if (!p.has_num_output() || p.num_output() == 0) {
    return LayerError("inner_product_param.num_output must be given and > 0");
  }
  const int num_axes = bottom[0]->num_axes();
  if (p.axis() < -num_axes || p.axis() >= num_axes) {
    return LayerError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                      bottom[0]->shape_string());
  }
  N_ = static_cast<int>(p.num_output());
  bias_term_ = p.bias_term();
  transpose_ = p.transpose();
  axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
  K_ = bottom[0]->count(axis_);
  const std::vector<int> weight_shape = transpose_ ? std::vector<int>{K_, N_} : std::vector<int>{N_, K_};
  return SetUpWeightAndBias(weight_shape, p.weight_filler(), bias_term_, N_, p.bias_filler());
}

void InnerProductLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int axis = bottom[0]->CanonicalAxisIndex(layer_param_.inner_product_param().axis());
  const int new_K = bottom[0]->count(axis);
  LAYER_CHECK(new_K == K_) << "input size incompatible with inner product parameters: bottom "
                           << bottom[0]->shape_string() << " has " << new_K << " inputs per row from axis " << axis
                           << ", the weights expect " << K_;
  M_ = bottom[0]->count(0, axis);
  std::vector<int> top_shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis);
  top_shape.push_back(N_);
  top[0]->Reshape(top_shape);
  // Refilled only when M_ changes (on a GPU a host write would be a copy to
  // the device at every forward).
  if (bias_term_ && bias_multiplier_.count() != M_) {
    bias_multiplier_.Reshape({M_});
    caffe_set(M_, 1.0f, bias_multiplier_.mutable_cpu_data());
  }
}

bool InnerProductLayer::WeightGradientFactors(int param, const std::vector<Blob*>& bottom,
                                              const std::vector<Blob*>& top, GradientFactors* out) const {
  if (param != 0 || !param_propagate_down(0) || M_ <= 0) return false;
  const GradientFactors::Side top_diff{top[0], true}, bottom_data{bottom[0], false};
  out->rows = M_;
  // Backward_cpu: weight_diff (N_ x K_) += top_diff^T (N_ x M_) * bottom (M_ x K_);
  // with transpose, weight_diff (K_ x N_) += bottom^T * top_diff.
  out->left = transpose_ ? bottom_data : top_diff;
  out->right = transpose_ ? top_diff : bottom_data;
  return true;
}

void InnerProductLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(CpuMath(), bottom, top);
}

void InnerProductLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  BackwardWith(CpuMath(), top, propagate_down, bottom);
}

}  // namespace nereus

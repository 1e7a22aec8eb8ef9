#include "worker/trainer/layers/softmax_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

// ---- Softmax ----

Status SoftmaxLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Status axis_ok = CheckAxis(layer_param_.softmax_param().axis(), *bottom[0], "axis");
  if (!axis_ok.ok()) return LayerError(axis_ok.message());
  return Status::OK();
}

void SoftmaxLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int axis = bottom[0]->CanonicalAxisIndex(layer_param_.softmax_param().axis());
  outer_num_ = bottom[0]->count(0, axis);
  channels_ = bottom[0]->shape(axis);
  inner_num_ = bottom[0]->count(axis + 1);
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
}

void SoftmaxLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  const int dim = channels_ * inner_num_;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) ops::SoftmaxAt(in + i * dim + j, out + i * dim + j, channels_, inner_num_);
  }
}

void SoftmaxLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  // dx_c = y_c * (dy_c - sum_k dy_k y_k)
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int dim = channels_ * inner_num_;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int base = i * dim + j;
      ops::SoftmaxBackwardAt(y + base, dy + base, dx + base, channels_, inner_num_);
    }
  }
}

}  // namespace nereus

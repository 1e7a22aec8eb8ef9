#include "worker/trainer/layers/lstm_unit_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

Status LSTMUnitLayer::CheckShapes(const std::vector<Blob*>& bottom) {
  const char* names[] = {"c_prev (bottom 0)", "x (bottom 1)", "cont (bottom 2)"};
  const int expected_axes[] = {3, 3, 2};
  for (int b = 0; b < 3; ++b) {
    const Blob& blob = *bottom[b];
    if (blob.num_axes() != expected_axes[b] || blob.shape(0) != 1 || blob.shape(1) != bottom[0]->shape(1)) {
      return InvalidArgumentError(std::string(names[b]) + " must be [1, N" + (expected_axes[b] == 3 ? ", ...]" : "]") +
                                  " with N = c_prev's axis 1; got " + blob.shape_string() + " (c_prev " +
                                  bottom[0]->shape_string() + ")");
    }
  }
  if (bottom[1]->shape(2) != 4 * bottom[0]->shape(2)) {
    return InvalidArgumentError("x (bottom 1) must have 4 * D = " + std::to_string(4 * bottom[0]->shape(2)) +
                                " gate inputs a stream, got " + bottom[1]->shape_string());
  }
  return Status::OK();
}

Status LSTMUnitLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0]->num_axes() != 3) {
    return LayerError("c_prev (bottom 0) must be [1, N, D], got " + bottom[0]->shape_string());
  }
  const Status s = CheckShapes(bottom);
  return s.ok() ? s : LayerError(s.message());
}

void LSTMUnitLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->num_axes() == 3) << "c_prev (bottom 0) must be [1, N, D], got " << bottom[0]->shape_string();
  const Status s = CheckShapes(bottom);
  LAYER_CHECK(s.ok()) << s.message();
  num_ = bottom[0]->shape(1);
  hidden_dim_ = bottom[0]->shape(2);
  top[0]->ReshapeLike(*bottom[0]);
  top[1]->ReshapeLike(*bottom[0]);
}

void LSTMUnitLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* c_prev = bottom[0]->cpu_data();
  const float* x = bottom[1]->cpu_data();
  const float* cont = bottom[2]->cpu_data();
  float* c = top[0]->mutable_cpu_data();
  float* h = top[1]->mutable_cpu_data();
  for (int n = 0; n < num_; ++n) {
    for (int d = 0; d < hidden_dim_; ++d) {
      const int i = n * hidden_dim_ + d;
      ops::LSTMUnitForward(c_prev[i], x + 4 * n * hidden_dim_, d, hidden_dim_, cont[n], &c[i], &h[i]);
    }
  }
}

void LSTMUnitLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[2]) << "cont (bottom 2) has no gradient";
  if (!propagate_down[0] && !propagate_down[1]) return;
  const float* c_prev = bottom[0]->cpu_data();
  const float* x = bottom[1]->cpu_data();
  const float* cont = bottom[2]->cpu_data();
  const float* c = top[0]->cpu_data();
  const float* c_diff = top[0]->cpu_diff();
  const float* h_diff = top[1]->cpu_diff();
  // Both gradients are computed together; Caffe writes both as well.
  float* c_prev_diff = bottom[0]->mutable_cpu_diff();
  float* x_diff = bottom[1]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) {
    for (int d = 0; d < hidden_dim_; ++d) {
      const int i = n * hidden_dim_ + d;
      const int x_offset = 4 * n * hidden_dim_;
      ops::LSTMUnitBackward(c_prev[i], x + x_offset, d, hidden_dim_, cont[n], c[i], c_diff[i], h_diff[i],
                            &c_prev_diff[i], x_diff + x_offset);
    }
  }
}

}  // namespace nereus

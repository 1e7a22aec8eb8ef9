#include "worker/trainer/layers/conv_layer.h"

namespace nereus {

void ConvolutionLayer::ComputeOutputShape(const layers::ConvGeometry& kernel, int in_h, int in_w) {
  layers::ConvGeometry g = kernel;
  g.height = in_h;
  g.width = in_w;
  out_h_ = g.output_h();
  out_w_ = g.output_w();
}

void ConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->cpu_data();
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* bottom_data = bottom[i]->cpu_data();
    float* top_data = top[i]->mutable_cpu_data();
    for (int n = 0; n < bottom[i]->shape(0); ++n) {
      ForwardGemm(bottom_data + n * bottom_dim, weight, top_data + n * top_dim);
      if (bias_term_) ForwardBias(top_data + n * top_dim, blobs_[1]->cpu_data());
    }
  }
}

void ConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->cpu_data();
  float* weight_diff = blobs_[0]->mutable_cpu_diff();
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->cpu_diff();
    if (bias_term_ && param_propagate_down(1)) {
      float* bias_diff = blobs_[1]->mutable_cpu_diff();
      for (int n = 0; n < top[i]->shape(0); ++n) BackwardBias(bias_diff, top_diff + n * top_dim);
    }
    const bool weight_grad = param_propagate_down(0);
    if (!weight_grad && !propagate_down[i]) continue;
    const float* bottom_data = bottom[i]->cpu_data();
    float* bottom_diff = propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr;
    for (int n = 0; n < top[i]->shape(0); ++n) {
      // dW += top_diff * im2col(x)^T; dx = col2im(W^T * top_diff).
      if (weight_grad) WeightGemm(bottom_data + n * bottom_dim, top_diff + n * top_dim, weight_diff);
      if (bottom_diff != nullptr) BackwardGemm(top_diff + n * top_dim, weight, bottom_diff + n * bottom_dim);
    }
  }
}

}  // namespace nereus

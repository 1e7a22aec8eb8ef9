#include "worker/trainer/layers/deconv_layer.h"

namespace nereus {

void DeconvolutionLayer::ComputeOutputShape(const layers::ConvGeometry& k, int in_h, int in_w) {
  out_h_ = k.stride_h * (in_h - 1) + k.dilation_h * (k.kernel_h - 1) + 1 - 2 * k.pad_h;
  out_w_ = k.stride_w * (in_w - 1) + k.dilation_w * (k.kernel_w - 1) + 1 - 2 * k.pad_w;
}

// The convolution this layer transposes runs from the top to the bottom:
// its forward is BackwardGemm, its input gradient ForwardGemm.
void DeconvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->cpu_data();
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* bottom_data = bottom[i]->cpu_data();
    float* top_data = top[i]->mutable_cpu_data();
    for (int n = 0; n < bottom[i]->shape(0); ++n) {
      BackwardGemm(bottom_data + n * bottom_dim, weight, top_data + n * top_dim);
      if (bias_term_) ForwardBias(top_data + n * top_dim, blobs_[1]->cpu_data());
    }
  }
}

void DeconvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
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
      // dW += x * im2col(top_diff)^T; dx = W * im2col(top_diff), reusing the
      // columns WeightGemm made.
      if (weight_grad) WeightGemm(top_diff + n * top_dim, bottom_data + n * bottom_dim, weight_diff);
      if (bottom_diff != nullptr) {
        ForwardGemm(top_diff + n * top_dim, weight, bottom_diff + n * bottom_dim, /*skip_im2col=*/weight_grad);
      }
    }
  }
}

}  // namespace nereus

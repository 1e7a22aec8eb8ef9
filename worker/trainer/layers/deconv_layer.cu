// DeconvolutionLayer's GPU code: deconv_layer.cc's loops with the GPU twins
// of the BaseConvolutionLayer helpers.
#include "worker/trainer/layers/deconv_layer.h"

namespace nereus {

// The convolution this layer transposes runs from the top to the bottom:
// its forward is BackwardGemm, its input gradient ForwardGemm.
void DeconvolutionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    float* top_data = top[i]->mutable_gpu_data();
    const int num = bottom[i]->shape(0);
    BackwardGemmGpu(bottom[i]->gpu_data(), weight, top_data, num);
    if (bias_term_) ForwardBiasGpu(top_data, blobs_[1]->gpu_data(), num);
  }
}

void DeconvolutionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->gpu_diff();
    const int num = top[i]->shape(0);
    if (bias_term_ && param_propagate_down(1)) BackwardBiasGpu(blobs_[1]->mutable_gpu_diff(), top_diff, num);
    // dW += x * im2col(top_diff)^T; dx = W * im2col(top_diff).
    if (param_propagate_down(0)) WeightGemmGpu(top_diff, bottom[i]->gpu_data(), blobs_[0]->mutable_gpu_diff(), num);
    if (propagate_down[i]) ForwardGemmGpu(top_diff, weight, bottom[i]->mutable_gpu_diff(), num);
  }
}

}  // namespace nereus

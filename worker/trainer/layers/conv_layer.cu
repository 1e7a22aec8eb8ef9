// ConvolutionLayer's GPU code: conv_layer.cc's loops with the GPU twins of
// the BaseConvolutionLayer helpers (im2col kernels + cuBLAS GEMM).
#include "worker/trainer/layers/conv_layer.h"

namespace nereus {

void ConvolutionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    float* top_data = top[i]->mutable_gpu_data();
    const int num = bottom[i]->shape(0);
    ForwardGemmGpu(bottom[i]->gpu_data(), weight, top_data, num);
    if (bias_term_) ForwardBiasGpu(top_data, blobs_[1]->gpu_data(), num);
  }
}

void ConvolutionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->gpu_diff();
    const int num = top[i]->shape(0);
    if (bias_term_ && param_propagate_down(1)) BackwardBiasGpu(blobs_[1]->mutable_gpu_diff(), top_diff, num);
    // dW += top_diff * im2col(x)^T; dx = col2im(W^T * top_diff).
    if (param_propagate_down(0)) WeightGemmGpu(bottom[i]->gpu_data(), top_diff, blobs_[0]->mutable_gpu_diff(), num);
    if (propagate_down[i]) BackwardGemmGpu(top_diff, weight, bottom[i]->mutable_gpu_diff(), num);
  }
}

}  // namespace nereus

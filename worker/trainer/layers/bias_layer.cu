// Bias's GPU code: the sum by the function bias_layer.h shares with the CPU,
// the bias's gradient (sums over each entry's elements) by two cuBLAS
// matrix-vector products, as Scale's.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/bias_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

__global__ void BiasForwardKernel(int n, const float* in, const float* bias, int bias_dim, int inner, float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    out[i] = ops::BiasForward(in[i], bias[ops::BiasIndex(static_cast<int>(i), bias_dim, inner)]);
  }
}

}  // namespace

void BiasLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* bias = bottom.size() > 1 ? bottom[1]->gpu_data() : blobs_[0]->gpu_data();
  gpu::Launch(device(), "BiasForward", bottom[0]->count(), BiasForwardKernel, bottom[0]->gpu_data(), bias, axes_.dim,
              axes_.inner_dim, top[0]->mutable_gpu_data());
}

void BiasLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  const float* dy = top[0]->gpu_diff();
  if (propagate_down[0] && bottom[0] != top[0]) {
    caffe_gpu_copy(device(), top[0]->count(), dy, bottom[0]->mutable_gpu_diff());
  }
  const bool bias_is_param = bottom.size() == 1;
  if (bias_is_param ? !param_propagate_down(0) : !propagate_down[1]) return;
  float* bias_diff = bias_is_param ? blobs_[0]->mutable_gpu_diff() : bottom[1]->mutable_gpu_diff();
  axes_.RowSumsGpu(device(), dy, bias_is_param ? 1.0f : 0.0f, bias_diff);
}

}  // namespace nereus

// Reduction's GPU code: one thread per item adding its entries in the CPU's
// order (the same bits), one per entry backward, each running the function
// reduction_layer.h shares with the CPU loops.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/reduction_layer.h"

namespace nereus {
namespace {

__global__ void ReductionForwardKernel(int n, const float* in, int dim, int op, float coeff, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ReduceItem(in + i * dim, dim, op, coeff);
}

__global__ void ReductionBackwardKernel(int n, const float* top_diff, const float* x, int dim, int op, float coeff,
                                        float* bottom_diff) {
  NEREUS_KERNEL_LOOP(j, n) bottom_diff[j] = ops::ReductionBackward(top_diff[j / dim], x[j], op, coeff);
}

}  // namespace

void ReductionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "ReductionForward", num_, ReductionForwardKernel, bottom[0]->gpu_data(), dim_, op_, coeff_,
              top[0]->mutable_gpu_data());
}

void ReductionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "ReductionBackward", bottom[0]->count(), ReductionBackwardKernel, top[0]->gpu_diff(),
              bottom[0]->gpu_data(), dim_, op_, coeff_, bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

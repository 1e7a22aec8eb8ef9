// Softmax's GPU code: one thread per position, each running the CPU's loop
// (softmax_layer.h's SoftmaxAt, SoftmaxBackwardAt).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/softmax_layer.h"

namespace nereus {
namespace {

// n = outer * inner positions.
__global__ void SoftmaxKernel(int n, const float* in, float* out, int channels, int inner) {
  NEREUS_KERNEL_LOOP(p, n) {
    const int position = static_cast<int>(p);
    const int64_t base = static_cast<int64_t>(position / inner) * channels * inner + position % inner;
    ops::SoftmaxAt(in + base, out + base, channels, inner);
  }
}

__global__ void SoftmaxBackwardKernel(int n, const float* y, const float* dy, float* dx, int channels, int inner) {
  NEREUS_KERNEL_LOOP(p, n) {
    const int position = static_cast<int>(p);
    const int64_t base = static_cast<int64_t>(position / inner) * channels * inner + position % inner;
    ops::SoftmaxBackwardAt(y + base, dy + base, dx + base, channels, inner);
  }
}

}  // namespace

// ---- Softmax ----

void SoftmaxLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "Softmax", outer_num_ * inner_num_, SoftmaxKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), channels_, inner_num_);
}

void SoftmaxLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "SoftmaxBackward", outer_num_ * inner_num_, SoftmaxBackwardKernel, top[0]->gpu_data(),
              top[0]->gpu_diff(), bottom[0]->mutable_gpu_diff(), channels_, inner_num_);
}

}  // namespace nereus

// LSTMUnit's GPU code: one thread per (stream, unit), each running the
// function lstm_unit_layer.h shares with the CPU loops (CUDA's tanhf within
// 2 ulp of glibc's).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/lstm_unit_layer.h"

namespace nereus {
namespace {

__global__ void LSTMUnitForwardKernel(int n, const float* c_prev, const float* x, const float* cont, int dim, float* c,
                                      float* h) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t stream = i / dim;
    ops::LSTMUnitForward(c_prev[i], x + 4 * stream * dim, static_cast<int>(i % dim), dim, cont[stream], &c[i], &h[i]);
  }
}

__global__ void LSTMUnitBackwardKernel(int n, const float* c_prev, const float* x, const float* cont, const float* c,
                                       const float* c_diff, const float* h_diff, int dim, float* c_prev_diff,
                                       float* x_diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t stream = i / dim;
    ops::LSTMUnitBackward(c_prev[i], x + 4 * stream * dim, static_cast<int>(i % dim), dim, cont[stream], c[i],
                          c_diff[i], h_diff[i], &c_prev_diff[i], x_diff + 4 * stream * dim);
  }
}

}  // namespace

void LSTMUnitLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "LSTMUnitForward", num_ * hidden_dim_, LSTMUnitForwardKernel, bottom[0]->gpu_data(),
              bottom[1]->gpu_data(), bottom[2]->gpu_data(), hidden_dim_, top[0]->mutable_gpu_data(),
              top[1]->mutable_gpu_data());
}

void LSTMUnitLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[2]) << "cont (bottom 2) has no gradient";
  if (!propagate_down[0] && !propagate_down[1]) return;
  gpu::Launch(device(), "LSTMUnitBackward", num_ * hidden_dim_, LSTMUnitBackwardKernel, bottom[0]->gpu_data(),
              bottom[1]->gpu_data(), bottom[2]->gpu_data(), top[0]->gpu_data(), top[0]->gpu_diff(), top[1]->gpu_diff(),
              hidden_dim_, bottom[0]->mutable_gpu_diff(), bottom[1]->mutable_gpu_diff());
}

}  // namespace nereus

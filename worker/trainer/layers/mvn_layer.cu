// MVN's GPU code: one thread per group for its statistics and its gradient
// sums (adding in the CPU's order: the same bits), one per element for the
// rest, each running the functions mvn_layer.h shares with the CPU loops.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/mvn_layer.h"

namespace nereus {
namespace {

__global__ void MVNStatsKernel(int n, const float* in, int dim, bool normalize, float eps, float* mean,
                               float* divisor) {
  NEREUS_KERNEL_LOOP(g, n) ops::MVNGroupStats(in + g * dim, dim, normalize, eps, &mean[g], &divisor[g]);
}

__global__ void MVNForwardKernel(int n, const float* in, int dim, const float* mean, const float* divisor,
                                 bool normalize, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::MVNForward(in[i], mean[i / dim], divisor[i / dim], normalize);
}

// sums[g] = sum(dy), sums[groups + g] = sum(y dy).
__global__ void MVNGradientSumsKernel(int n, const float* y, const float* dy, int dim, float* sums) {
  NEREUS_KERNEL_LOOP(g, n) ops::MVNGroupGradientSums(y + g * dim, dy + g * dim, dim, &sums[g], &sums[n + g]);
}

__global__ void MVNBackwardKernel(int n, const float* y, const float* dy, int dim, int groups, const float* sums,
                                  const float* divisor, bool normalize, float* dx) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t g = i / dim;
    dx[i] = ops::MVNBackward(dy[i], y[i], sums[g], sums[groups + g], dim, divisor[g], normalize);
  }
}

}  // namespace

void MVNLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->gpu_data();
  gpu::Launch(device(), "MVNStats", groups_, MVNStatsKernel, in, dim_, normalize_variance_, eps_,
              mean_.mutable_gpu_data(), divisor_.mutable_gpu_data());
  gpu::Launch(device(), "MVNForward", bottom[0]->count(), MVNForwardKernel, in, dim_, mean_.gpu_data(),
              divisor_.gpu_data(), normalize_variance_, top[0]->mutable_gpu_data());
}

void MVNLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* y = top[0]->gpu_data();
  const float* dy = top[0]->gpu_diff();
  gpu::Launch(device(), "MVNGradientSums", groups_, MVNGradientSumsKernel, y, dy, dim_, sums_.mutable_gpu_data());
  gpu::Launch(device(), "MVNBackward", bottom[0]->count(), MVNBackwardKernel, y, dy, dim_, groups_, sums_.gpu_data(),
              divisor_.gpu_data(), normalize_variance_, bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

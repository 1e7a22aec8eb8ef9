// ContrastiveLoss's GPU code: see contrastive_loss_layer.h.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/contrastive_loss_layer.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// n pairs: the differences, each pair's squared distance and term.
__global__ void ContrastivePairKernel(int n, const float* a, const float* b, const float* y, int channels, float margin,
                                      bool legacy, float* diff, float* dist_sq, float* pair_loss) {
  NEREUS_KERNEL_LOOP(i, n) {
    for (int k = 0; k < channels; ++k) {
      const int64_t at = i * channels + k;
      diff[at] = a[at] - b[at];
    }
    dist_sq[i] = ops::ContrastiveDistSq(diff + i * channels, channels);
    pair_loss[i] = ops::ContrastivePairLoss(dist_sq[i], static_cast<int>(y[i]) != 0, margin, legacy);
  }
}

// One block: top = sum(pair_loss) / n / 2.
__global__ void ContrastiveReduceKernel(int n, const float* pair_loss, float* top) {
  __shared__ double shared[gpu::kReduceThreads];
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += gpu::kReduceThreads) sum += static_cast<double>(pair_loss[i]);
  sum = gpu::BlockSum<gpu::kReduceThreads>(sum, shared);
  if (threadIdx.x == 0) top[0] = static_cast<float>(sum) / static_cast<float>(n) / 2.0f;
}

// n = N * channels elements of one feature's gradient.
__global__ void ContrastiveBackwardKernel(int n, const float* diff, const float* dist_sq, const float* y, int channels,
                                          float margin, bool legacy, float sign, const float* top_diff, int num,
                                          float* out) {
  const float alpha = sign * top_diff[0] / static_cast<float>(num);
  NEREUS_KERNEL_LOOP(k, n) {
    const int64_t i = k / channels;
    out[k] = ops::ContrastiveGradFactor(dist_sq[i], static_cast<int>(y[i]) != 0, margin, legacy, alpha) * diff[k];
  }
}

}  // namespace

void ContrastiveLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "ContrastiveLossPairs", num_, ContrastivePairKernel, bottom[0]->gpu_data(),
              bottom[1]->gpu_data(), bottom[2]->gpu_data(), channels_, margin_, legacy_, diff_.mutable_gpu_data(),
              dist_sq_.mutable_gpu_data(), pair_loss_.mutable_gpu_data());
  gpu::LaunchOneBlock<gpu::kReduceThreads>(device(), "ContrastiveLossReduce", ContrastiveReduceKernel, num_,
                                           static_cast<const float*>(pair_loss_.gpu_data()),
                                           top[0]->mutable_gpu_data());
}

void ContrastiveLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[2]) << "cannot backpropagate to the similarity (bottom 2)";
  for (int b = 0; b < 2; ++b) {
    if (!propagate_down[b]) continue;
    gpu::Launch(device(), "ContrastiveLossBackward", bottom[b]->count(), ContrastiveBackwardKernel, diff_.gpu_data(),
                dist_sq_.gpu_data(), bottom[2]->gpu_data(), channels_, margin_, legacy_, b == 0 ? 1.0f : -1.0f,
                top[0]->gpu_diff(), num_, bottom[b]->mutable_gpu_diff());
  }
}

}  // namespace nereus

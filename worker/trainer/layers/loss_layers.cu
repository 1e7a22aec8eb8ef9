// The losses' GPU code. EuclideanLoss and SigmoidCrossEntropyLoss: the loss
// summed by one block on the device (in double, as SoftmaxWithLoss's; the
// CPU sums in float, so the two agree within the summation error), the
// gradients one thread per element, each running loss_layers.h's element
// functions; the top gradient and the normalizer are read on the device.
// SoftmaxWithLoss: one thread per position for the loss terms and a
// one-block reduction on the device for the loss itself, one thread per
// score for the gradient. No copy to the host, except SoftmaxWithLoss's one
// to check the labels.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/loss_layers.h"
#include "worker/trainer/layers/loss_reduce_kernel.cuh"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// One block: diff = a - b, top = sum(diff^2) / num / 2.
__global__ void EuclideanLossKernel(int n, const float* a, const float* b, float* diff, int num, float* top) {
  __shared__ double shared[gpu::kReduceThreads];
  double sum = 0.0;
  for (int i = threadIdx.x; i < n; i += gpu::kReduceThreads) {
    const float d = ops::Sub()(a[i], b[i]);
    diff[i] = d;
    sum += static_cast<double>(d * d);
  }
  sum = gpu::BlockSum<gpu::kReduceThreads>(sum, shared);
  if (threadIdx.x == 0) top[0] = ops::EuclideanLossValue(static_cast<float>(sum), num);
}

__global__ void EuclideanLossBackwardKernel(int n, const float* diff, const float* top_diff, float sign, int num,
                                            float* bottom_diff) {
  const float alpha = ops::EuclideanLossGradScale(sign, top_diff[0], num);
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = alpha * diff[i];
}

// One block: top = -sum(log-likelihood of the counted entries) / normalizer;
// normalizer[0] keeps the divisor for backward.
__global__ void SigmoidCrossEntropyLossKernel(int n, const float* x, const float* t, bool has_ignore_label,
                                              int ignore_label, int mode, int outer, int inner, float* top,
                                              float* normalizer) {
  __shared__ double loss_shared[gpu::kReduceThreads];
  __shared__ int count_shared[gpu::kReduceThreads];
  double sum = 0.0;
  int valid = 0;
  for (int i = threadIdx.x; i < n; i += gpu::kReduceThreads) {
    if (ops::SigmoidCrossEntropyIgnored(t[i], has_ignore_label, ignore_label)) continue;
    sum += static_cast<double>(ops::SigmoidCrossEntropyLogLikelihood(x[i], t[i]));
    ++valid;
  }
  sum = gpu::BlockSum<gpu::kReduceThreads>(sum, loss_shared);
  valid = gpu::BlockSum<gpu::kReduceThreads>(valid, count_shared);
  if (threadIdx.x == 0) {
    const float divisor = ops::SoftmaxLossNormalizer(mode, outer, inner, valid);
    normalizer[0] = divisor;
    top[0] = -static_cast<float>(sum) / divisor;
  }
}

__global__ void SigmoidCrossEntropyBackwardKernel(int n, const float* x, const float* t, bool has_ignore_label,
                                                  int ignore_label, const float* top_diff, const float* normalizer,
                                                  float* dx) {
  const float scale = top_diff[0] / normalizer[0];
  NEREUS_KERNEL_LOOP(i, n) {
    dx[i] = ops::SigmoidCrossEntropyGradient(
        x[i], t[i], ops::SigmoidCrossEntropyIgnored(t[i], has_ignore_label, ignore_label), scale);
  }
}

// Each position's loss and state (1 counted, 0 ignored, -1 bad label).
__global__ void LossTermsKernel(int n, const float* prob, const float* label, int channels, int inner,
                                bool has_ignore_label, int ignore_label, float* loss, int* state) {
  NEREUS_KERNEL_LOOP(p, n) {
    const int position = static_cast<int>(p);
    const int label_value = static_cast<int>(label[position]);
    loss[position] = 0.0f;
    if (has_ignore_label && label_value == ignore_label) {
      state[position] = 0;
    } else if (label_value < 0 || label_value >= channels) {
      state[position] = -1;
    } else {
      const int64_t at = static_cast<int64_t>(position / inner) * channels * inner +
                         static_cast<int64_t>(label_value) * inner + position % inner;
      loss[position] = ops::SoftmaxLossAt(prob[at]);
      state[position] = 1;
    }
  }
}

// n = outer * channels * inner scores.
__global__ void LossBackwardKernel(int n, const float* prob, const float* label, int channels, int inner,
                                   bool has_ignore_label, int ignore_label, const float* top_diff, const int* stats,
                                   int mode, int outer, float* bottom_diff) {
  const float scale = top_diff[0] / ops::SoftmaxLossNormalizer(mode, outer, inner, stats[0]);
  const int dim = channels * inner;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int position = (index / dim) * inner + index % inner;
    const int c = (index % dim) / inner;
    const int label_value = static_cast<int>(label[position]);
    const bool ignored = has_ignore_label && label_value == ignore_label;
    bottom_diff[index] = ops::SoftmaxLossGradAt(prob[index], c == label_value, ignored, scale);
  }
}

}  // namespace

// ---- EuclideanLoss ----

void EuclideanLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::LaunchOneBlock<gpu::kReduceThreads>(device(), "EuclideanLoss", EuclideanLossKernel, bottom[0]->count(),
                                           bottom[0]->gpu_data(), bottom[1]->gpu_data(), diff_.mutable_gpu_data(),
                                           bottom[0]->shape(0), top[0]->mutable_gpu_data());
}

void EuclideanLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  for (int i = 0; i < 2; ++i) {
    if (!propagate_down[i]) continue;
    gpu::Launch(device(), "EuclideanLossBackward", bottom[i]->count(), EuclideanLossBackwardKernel, diff_.gpu_data(),
                top[0]->gpu_diff(), i == 0 ? 1.0f : -1.0f, bottom[i]->shape(0), bottom[i]->mutable_gpu_diff());
  }
}

// ---- SigmoidCrossEntropyLoss ----

void SigmoidCrossEntropyLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu_normalizer_.Reshape(std::vector<int>{1});
  gpu::LaunchOneBlock<gpu::kReduceThreads>(
      device(), "SigmoidCrossEntropyLoss", SigmoidCrossEntropyLossKernel, bottom[0]->count(), bottom[0]->gpu_data(),
      bottom[1]->gpu_data(), has_ignore_label_, ignore_label_, static_cast<int>(normalization_), outer_num_, inner_num_,
      top[0]->mutable_gpu_data(), gpu_normalizer_.mutable_gpu_data());
}

void SigmoidCrossEntropyLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cannot backpropagate to the targets (bottom 1)";
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "SigmoidCrossEntropyLossBackward", bottom[0]->count(), SigmoidCrossEntropyBackwardKernel,
              bottom[0]->gpu_data(), bottom[1]->gpu_data(), has_ignore_label_, ignore_label_, top[0]->gpu_diff(),
              static_cast<const float*>(gpu_normalizer_.gpu_data()), bottom[0]->mutable_gpu_diff());
}

// ---- SoftmaxWithLoss ----

void SoftmaxWithLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Forward(softmax_bottom_, softmax_top_);
  const int positions = outer_num_ * inner_num_;
  position_loss_.Reshape({positions});
  if (position_state_ == nullptr || position_state_->size() != sizeof(int) * static_cast<size_t>(positions)) {
    position_state_ = std::make_shared<SyncedMemory>(sizeof(int) * static_cast<size_t>(positions));
  }
  if (stats_ == nullptr) stats_ = std::make_shared<SyncedMemory>(2 * sizeof(int));
  const float* prob = prob_.gpu_data();
  auto* state = static_cast<int*>(position_state_->mutable_gpu_data());
  auto* stats = static_cast<int*>(stats_->mutable_gpu_data());
  gpu::Launch(device(), "SoftmaxLossTerms", positions, LossTermsKernel, prob, bottom[1]->gpu_data(), channels_,
              inner_num_, has_ignore_label_, ignore_label_, position_loss_.mutable_gpu_data(), state);
  gpu::LaunchOneBlock<gpu::kReduceThreads>(device(), "SoftmaxLossReduce", gpu::LossReduceKernel<gpu::kReduceThreads>,
                                           positions, static_cast<const float*>(position_loss_.gpu_data()),
                                           static_cast<const int*>(state), static_cast<int>(normalization_), outer_num_,
                                           inner_num_, top[0]->mutable_gpu_data(), stats);
  if (top.size() == 2) caffe_gpu_copy(device(), prob_.count(), prob, top[1]->mutable_gpu_data());
  if (!device()->ok()) return;
  // The labels are checked on the host (a wait for the device, which the
  // loss's read-back makes anyway).
  const int* host_stats = static_cast<const int*>(stats_->cpu_data());
  valid_count_ = host_stats[0];
  if (host_stats[1] >= 0) {
    const int position = host_stats[1];
    const int label_value = static_cast<int>(bottom[1]->cpu_data()[position]);
    device()->RecordError(InvalidArgumentError(LabelOutOfRange(label_value, position, channels_)));
  }
}

void SoftmaxWithLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    LOG(FATAL) << "layer " << layer_param_.name() << " (" << type() << "): cannot backpropagate to the label input";
  }
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "SoftmaxLossBackward", prob_.count(), LossBackwardKernel, prob_.gpu_data(),
              bottom[1]->gpu_data(), channels_, inner_num_, has_ignore_label_, ignore_label_, top[0]->gpu_diff(),
              static_cast<const int*>(stats_->gpu_data()), static_cast<int>(normalization_), outer_num_,
              bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

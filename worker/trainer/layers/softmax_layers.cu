// Softmax's and SoftmaxWithLoss's GPU code: one thread per position for the
// softmax (softmax_layers.h's SoftmaxAt, the CPU's loop), one per position
// for the loss terms and a one-block reduction on the device for the loss
// itself (no copy to the host, except one to check the labels).
#include <climits>

#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/softmax_layers.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

constexpr int kReduceThreads = 256;

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

// One block: the loss (summed in double, as the CPU does), the valid count
// and the first bad position; top = loss / normalizer; stats = {valid, bad}.
__global__ void LossReduceKernel(int n, const float* loss, const int* state, int mode, int outer, int inner, float* top,
                                 int* stats) {
  __shared__ double loss_shared[kReduceThreads];
  __shared__ int int_shared[kReduceThreads];
  double sum = 0.0;
  int valid = 0;
  int bad = INT_MAX;
  for (int p = threadIdx.x; p < n; p += kReduceThreads) {
    sum += static_cast<double>(loss[p]);
    if (state[p] == 1) ++valid;
    if (state[p] < 0 && p < bad) bad = p;
  }
  sum = gpu::BlockSum<kReduceThreads>(sum, loss_shared);
  valid = gpu::BlockSum<kReduceThreads>(valid, int_shared);
  bad = gpu::BlockMin<kReduceThreads>(bad, int_shared);
  if (threadIdx.x == 0) {
    top[0] = static_cast<float>(sum) / ops::SoftmaxLossNormalizer(mode, outer, inner, valid);
    stats[0] = valid;
    stats[1] = bad == INT_MAX ? -1 : bad;
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
  gpu::LaunchOneBlock<kReduceThreads>(device(), "SoftmaxLossReduce", LossReduceKernel, positions,
                                      static_cast<const float*>(position_loss_.gpu_data()),
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

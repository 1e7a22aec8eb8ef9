// HingeLoss's, MultinomialLogisticLoss's and InfogainLoss's GPU code: one
// thread per position (example) for its loss and the state of its label,
// one block summing the positions (in double) into the loss and finding the
// first bad label, one thread per score for the gradient; each running
// label_loss_layers.h's element functions, as the CPU does. Only the label
// statistics come back to the host.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/label_loss_layers.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/loss_reduce_kernel.cuh"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

__global__ void HingeTermsKernel(int n, const float* x, const float* label, int dim, bool l2, float* loss, int* state) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int label_value = static_cast<int>(label[i]);
    const bool ok = ops::LabelInRange(label_value, dim);
    state[i] = ok ? 1 : -1;
    loss[i] = ok ? ops::HingeExampleLoss(x + i * dim, dim, label_value, l2) : 0.0f;
  }
}

__global__ void HingeBackwardKernel(int n, const float* x, const float* label, int dim, bool l2, const float* top_diff,
                                    int num, float* dx) {
  const float scale = top_diff[0] / static_cast<float>(num);
  NEREUS_KERNEL_LOOP(k, n) {
    const bool is_label = static_cast<int>(k % dim) == static_cast<int>(label[k / dim]);
    dx[k] = ops::HingeGradient(ops::HingeMargin(x[k], is_label), is_label, l2, scale);
  }
}

__global__ void MultinomialTermsKernel(int n, const float* prob, const float* label, int dim, float* loss, int* state) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int label_value = static_cast<int>(label[i]);
    const bool ok = ops::LabelInRange(label_value, dim);
    state[i] = ok ? 1 : -1;
    loss[i] = ok ? ops::MultinomialLogisticLossAt(prob[i * dim + label_value]) : 0.0f;
  }
}

__global__ void MultinomialBackwardKernel(int n, const float* prob, const float* label, int dim, const float* top_diff,
                                          int num, float* diff) {
  const float scale = -top_diff[0] / static_cast<float>(num);
  NEREUS_KERNEL_LOOP(k, n) {
    const bool is_label = static_cast<int>(k % dim) == static_cast<int>(label[k / dim]);
    diff[k] = is_label ? ops::MultinomialLogisticGradAt(prob[k], scale) : 0.0f;
  }
}

// n = outer * inner positions.
__global__ void InfogainTermsKernel(int n, const float* prob, const float* label, const float* h, int num_labels,
                                    int inner, bool has_ignore_label, int ignore_label, float* loss, int* state) {
  NEREUS_KERNEL_LOOP(p, n) {
    const int label_value = static_cast<int>(label[p]);
    loss[p] = 0.0f;
    if (has_ignore_label && label_value == ignore_label) {
      state[p] = 0;
    } else if (!ops::LabelInRange(label_value, num_labels)) {
      state[p] = -1;
    } else {
      const int64_t at = (p / inner) * num_labels * inner + p % inner;
      loss[p] = ops::InfogainPositionLoss(h + label_value * num_labels, prob + at, inner, num_labels);
      state[p] = 1;
    }
  }
}

__global__ void InfogainRowSumKernel(int n, const float* h, float* row_sums) {
  NEREUS_KERNEL_LOOP(r, n) row_sums[r] = ops::InfogainRowSum(h + r * n, n);
}

// n = outer * num_labels * inner scores.
__global__ void InfogainBackwardKernel(int n, const float* prob, const float* label, const float* h,
                                       const float* row_sums, int num_labels, int inner, bool has_ignore_label,
                                       int ignore_label, const float* top_diff, const int* stats, int mode, int outer,
                                       float* diff) {
  const float scale = top_diff[0] / ops::SoftmaxLossNormalizer(mode, outer, inner, stats[0]);
  const int dim = num_labels * inner;
  NEREUS_KERNEL_LOOP(k, n) {
    const int index = static_cast<int>(k);
    const int position = (index / dim) * inner + index % inner;
    const int l = (index % dim) / inner;
    const int label_value = static_cast<int>(label[position]);
    const bool ignored = has_ignore_label && label_value == ignore_label;
    diff[index] = ignored ? 0.0f
                          : ops::InfogainGradAt(prob[index], row_sums[label_value], h[label_value * num_labels + l],
                                                false, scale);
  }
}

}  // namespace

void LabelLossLayer::ReserveGpuBuffers(int positions) {
  position_loss_.Reshape({positions});
  const size_t bytes = sizeof(int) * static_cast<size_t>(positions);
  if (position_state_ == nullptr || position_state_->size() != bytes) {
    position_state_ = std::make_shared<SyncedMemory>(bytes);
  }
  if (stats_ == nullptr) stats_ = std::make_shared<SyncedMemory>(2 * sizeof(int));
}

int LabelLossLayer::ReadGpuLabelStats(const Blob& labels, int classes) {
  if (!device()->ok()) return 0;
  const int* host_stats = static_cast<const int*>(stats_->cpu_data());
  if (host_stats[1] >= 0) {
    const int position = host_stats[1];
    const int label_value = static_cast<int>(labels.cpu_data()[position]);
    device()->RecordError(InvalidArgumentError(LabelOutOfRange(label_value, position, classes)));
  }
  return host_stats[0];
}

// ---- HingeLoss ----

void HingeLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReserveGpuBuffers(num_);
  auto* state = static_cast<int*>(position_state_->mutable_gpu_data());
  gpu::Launch(device(), "HingeLossTerms", num_, HingeTermsKernel, bottom[0]->gpu_data(), bottom[1]->gpu_data(), dim_,
              l2_, position_loss_.mutable_gpu_data(), state);
  gpu::LaunchOneBlock<gpu::kReduceThreads>(device(), "HingeLossReduce", gpu::LossReduceKernel<gpu::kReduceThreads>,
                                           num_, static_cast<const float*>(position_loss_.gpu_data()),
                                           static_cast<const int*>(state),
                                           static_cast<int>(caffe::LossParameter::BATCH_SIZE), num_, 1,
                                           top[0]->mutable_gpu_data(), static_cast<int*>(stats_->mutable_gpu_data()));
  ReadGpuLabelStats(*bottom[1], dim_);
}

void HingeLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  CheckNoLabelGradient(propagate_down);
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "HingeLossBackward", bottom[0]->count(), HingeBackwardKernel, bottom[0]->gpu_data(),
              bottom[1]->gpu_data(), dim_, l2_, top[0]->gpu_diff(), num_, bottom[0]->mutable_gpu_diff());
}

// ---- MultinomialLogisticLoss ----

void MultinomialLogisticLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ReserveGpuBuffers(num_);
  auto* state = static_cast<int*>(position_state_->mutable_gpu_data());
  gpu::Launch(device(), "MultinomialLogisticLossTerms", num_, MultinomialTermsKernel, bottom[0]->gpu_data(),
              bottom[1]->gpu_data(), dim_, position_loss_.mutable_gpu_data(), state);
  gpu::LaunchOneBlock<gpu::kReduceThreads>(
      device(), "MultinomialLogisticLossReduce", gpu::LossReduceKernel<gpu::kReduceThreads>, num_,
      static_cast<const float*>(position_loss_.gpu_data()), static_cast<const int*>(state),
      static_cast<int>(caffe::LossParameter::BATCH_SIZE), num_, 1, top[0]->mutable_gpu_data(),
      static_cast<int*>(stats_->mutable_gpu_data()));
  ReadGpuLabelStats(*bottom[1], dim_);
}

void MultinomialLogisticLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  CheckNoLabelGradient(propagate_down);
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "MultinomialLogisticLossBackward", bottom[0]->count(), MultinomialBackwardKernel,
              bottom[0]->gpu_data(), bottom[1]->gpu_data(), dim_, top[0]->gpu_diff(), num_,
              bottom[0]->mutable_gpu_diff());
}

// ---- InfogainLoss ----

void InfogainLossLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Forward(softmax_bottom_, softmax_top_);
  const int positions = outer_num_ * inner_num_;
  ReserveGpuBuffers(positions);
  auto* state = static_cast<int*>(position_state_->mutable_gpu_data());
  const float* prob = prob_.gpu_data();
  gpu::Launch(device(), "InfogainLossTerms", positions, InfogainTermsKernel, prob, bottom[1]->gpu_data(),
              H(bottom).gpu_data(), num_labels_, inner_num_, has_ignore_label_, ignore_label_,
              position_loss_.mutable_gpu_data(), state);
  gpu::LaunchOneBlock<gpu::kReduceThreads>(device(), "InfogainLossReduce", gpu::LossReduceKernel<gpu::kReduceThreads>,
                                           positions, static_cast<const float*>(position_loss_.gpu_data()),
                                           static_cast<const int*>(state), static_cast<int>(normalization_), outer_num_,
                                           inner_num_, top[0]->mutable_gpu_data(),
                                           static_cast<int*>(stats_->mutable_gpu_data()));
  if (top.size() == 2) caffe_gpu_copy(device(), prob_.count(), prob, top[1]->mutable_gpu_data());
  valid_count_ = ReadGpuLabelStats(*bottom[1], num_labels_);
}

void InfogainLossLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  CheckNoLabelGradient(propagate_down);
  if (!propagate_down[0]) return;
  const float* h = H(bottom).gpu_data();
  gpu::Launch(device(), "InfogainLossRowSums", num_labels_, InfogainRowSumKernel, h, sum_rows_H_.mutable_gpu_data());
  gpu::Launch(device(), "InfogainLossBackward", prob_.count(), InfogainBackwardKernel, prob_.gpu_data(),
              bottom[1]->gpu_data(), h, static_cast<const float*>(sum_rows_H_.gpu_data()), num_labels_, inner_num_,
              has_ignore_label_, ignore_label_, top[0]->gpu_diff(), static_cast<const int*>(stats_->gpu_data()),
              static_cast<int>(normalization_), outer_num_, bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

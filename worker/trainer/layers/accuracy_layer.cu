// AccuracyLayer's GPU code: one thread per position (accuracy_layer.h's
// AccuracyHit, the CPU's test), then a one-block reduction on the device.
#include <climits>

#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/accuracy_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// n = outer * inner positions. counts: [num_labels] seen, [num_labels] hits.
__global__ void AccuracyKernel(int n, const float* scores, const float* label, int num_labels, int inner, int top_k,
                               bool has_ignore_label, int ignore_label, int* state, int* counts) {
  NEREUS_KERNEL_LOOP(p, n) {
    const int position = static_cast<int>(p);
    const int label_value = static_cast<int>(label[position]);
    if (has_ignore_label && label_value == ignore_label) {
      state[position] = -1;
    } else if (label_value < 0 || label_value >= num_labels) {
      state[position] = -2;
    } else {
      const int64_t base = static_cast<int64_t>(position / inner) * num_labels * inner + position % inner;
      const bool hit = ops::AccuracyHit(scores + base, inner, num_labels, label_value, top_k);
      state[position] = hit ? 1 : 0;
      atomicAdd(counts + label_value, 1);
      if (hit) atomicAdd(counts + num_labels + label_value, 1);
    }
  }
}

// One block: top = hits / counted labels (0 when none); stats = {first bad position or -1}.
__global__ void AccuracyReduceKernel(int n, const int* state, float* top, int* stats) {
  __shared__ int shared[gpu::kReduceThreads];
  int correct = 0;
  int count = 0;
  int bad = INT_MAX;
  for (int p = threadIdx.x; p < n; p += gpu::kReduceThreads) {
    if (state[p] == 1) ++correct;
    if (state[p] >= 0) ++count;
    if (state[p] == -2 && p < bad) bad = p;
  }
  correct = gpu::BlockSum<gpu::kReduceThreads>(correct, shared);
  count = gpu::BlockSum<gpu::kReduceThreads>(count, shared);
  bad = gpu::BlockMin<gpu::kReduceThreads>(bad, shared);
  if (threadIdx.x == 0) {
    top[0] = count == 0 ? 0.0f : static_cast<float>(correct) / count;
    stats[0] = bad == INT_MAX ? -1 : bad;
  }
}

__global__ void PerClassKernel(int n, const int* counts, float* per_class) {
  NEREUS_KERNEL_LOOP(c, n) {
    const int seen = counts[c];
    per_class[c] = seen == 0 ? 0.0f : static_cast<float>(counts[n + c]) / seen;
  }
}

}  // namespace

void AccuracyLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int positions = outer_num_ * inner_num_;
  if (position_state_ == nullptr || position_state_->size() != sizeof(int) * static_cast<size_t>(positions)) {
    position_state_ = std::make_shared<SyncedMemory>(sizeof(int) * static_cast<size_t>(positions));
  }
  if (class_counts_ == nullptr || class_counts_->size() != 2 * sizeof(int) * static_cast<size_t>(num_labels_)) {
    class_counts_ = std::make_shared<SyncedMemory>(2 * sizeof(int) * static_cast<size_t>(num_labels_));
  }
  if (stats_ == nullptr) stats_ = std::make_shared<SyncedMemory>(sizeof(int));
  auto* state = static_cast<int*>(position_state_->mutable_gpu_data());
  auto* counts = static_cast<int*>(class_counts_->mutable_gpu_data());
  auto* stats = static_cast<int*>(stats_->mutable_gpu_data());
  if (device()->ok()) {
    const cudaError_t e =
        cudaMemsetAsync(counts, 0, 2 * sizeof(int) * static_cast<size_t>(num_labels_), device()->compute_stream());
    if (e != cudaSuccess) device()->RecordError(gpu::CudaStatus(e, "cudaMemsetAsync"));
  }
  gpu::Launch(device(), "Accuracy", positions, AccuracyKernel, bottom[0]->gpu_data(), bottom[1]->gpu_data(),
              num_labels_, inner_num_, top_k_, has_ignore_label_, ignore_label_, state, counts);
  gpu::LaunchOneBlock<gpu::kReduceThreads>(device(), "AccuracyReduce", AccuracyReduceKernel, positions,
                                           static_cast<const int*>(state), top[0]->mutable_gpu_data(), stats);
  if (top.size() > 1) {
    gpu::Launch(device(), "AccuracyPerClass", num_labels_, PerClassKernel, static_cast<const int*>(counts),
                top[1]->mutable_gpu_data());
  }
  if (!device()->ok()) return;
  const int bad = static_cast<const int*>(stats_->cpu_data())[0];
  if (bad >= 0) {
    const int label_value = static_cast<int>(bottom[1]->cpu_data()[bad]);
    device()->RecordError(InvalidArgumentError(LabelOutOfRange(label_value, bad, num_labels_)));
  }
}

void AccuracyLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  Backward_cpu(top, propagate_down, bottom);  // Only checks that no gradient is asked for.
}

}  // namespace nereus

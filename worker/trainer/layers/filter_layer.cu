// Filter's GPU code: see filter_layer.h.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/filter_layer.h"
#include "worker/trainer/layers/layer_check.h"

namespace nereus {
namespace {

// n = M * dim top elements.
__global__ void FilterForwardKernel(int n, const float* in, const int* rows, int dim, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = in[static_cast<int64_t>(rows[i / dim]) * dim + i % dim];
}

// n = N * dim bottom elements; top_row[r] = the top row of bottom row r or -1.
__global__ void FilterBackwardKernel(int n, const float* top_diff, const int* top_row, int dim, float* diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int r = top_row[i / dim];
    diff[i] = r < 0 ? 0.0f : top_diff[static_cast<int64_t>(r) * dim + i % dim];
  }
}

}  // namespace

void FilterLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (indices_to_forward_.empty()) return;
  const int* rows = static_cast<const int*>(gpu_forward_->gpu_data());
  for (size_t t = 0; t < top.size(); ++t) {
    const int dim = bottom[t]->count(1);
    gpu::Launch(device(), "FilterForward", static_cast<int>(indices_to_forward_.size()) * dim, FilterForwardKernel,
                bottom[t]->gpu_data(), rows, dim, top[t]->mutable_gpu_data());
  }
}

void FilterLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down.back()) << "cannot backpropagate to the selector (the last bottom)";
  for (size_t t = 0; t < top.size(); ++t) {
    if (!propagate_down[t] || bottom[t]->count() == 0) continue;
    gpu::Launch(device(), "FilterBackward", bottom[t]->count(), FilterBackwardKernel,
                static_cast<const float*>(indices_to_forward_.empty() ? nullptr : top[t]->gpu_diff()),
                static_cast<const int*>(gpu_backward_->gpu_data()), bottom[t]->count(1), bottom[t]->mutable_gpu_diff());
  }
}

}  // namespace nereus

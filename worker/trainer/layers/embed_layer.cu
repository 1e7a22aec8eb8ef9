// Embed's GPU code: see embed_layer.h.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/embed_layer.h"
#include "worker/trainer/layers/layer_check.h"

namespace nereus {
namespace {

// n = M * N top elements.
__global__ void EmbedForwardKernel(int n, const float* idx, const float* weight, const float* bias, int num_output,
                                   float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t p = i / num_output;
    const int j = static_cast<int>(i % num_output);
    const float w = weight[static_cast<int64_t>(idx[p]) * num_output + j];
    out[i] = bias != nullptr ? w + bias[j] : w;
  }
}

// n = (rows looked up) * N weight elements; groups = rows, starts, members.
__global__ void EmbedWeightBackwardKernel(int n, const float* top_diff, const int* rows, const int* starts,
                                          const int* members, int num_output, float* weight_diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int d = static_cast<int>(i / num_output);
    const int j = static_cast<int>(i % num_output);
    float* w = weight_diff + static_cast<int64_t>(rows[d]) * num_output + j;
    *w = ops::EmbedWeightGradAt(*w, top_diff, members, starts[d], starts[d + 1], num_output, j);
  }
}

__global__ void EmbedBiasBackwardKernel(int n, const float* top_diff, int m, float* bias_diff) {
  NEREUS_KERNEL_LOOP(j, n) bias_diff[j] += ops::EmbedBiasGradAt(top_diff, m, n, static_cast<int>(j));
}

}  // namespace

void EmbedLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string error = CheckIndices(*bottom[0]);
  if (!error.empty()) {
    device()->RecordError(InvalidArgumentError(error));
    return;
  }
  // Group the positions by the row they look up, for backward.
  std::map<int, std::vector<int>> groups;
  const float* idx = bottom[0]->cpu_data();
  for (int p = 0; p < M_; ++p) groups[static_cast<int>(idx[p])].push_back(p);
  rows_.clear();
  starts_.assign(1, 0);
  members_.clear();
  for (const auto& [row, positions] : groups) {
    rows_.push_back(row);
    members_.insert(members_.end(), positions.begin(), positions.end());
    starts_.push_back(static_cast<int>(members_.size()));
  }
  const size_t ints = rows_.size() + starts_.size() + members_.size();
  if (gpu_groups_ == nullptr || gpu_groups_->size() != sizeof(int) * ints) {
    gpu_groups_ = std::make_shared<SyncedMemory>(sizeof(int) * ints);
  }
  int* host = static_cast<int*>(gpu_groups_->mutable_cpu_data());
  std::copy(rows_.begin(), rows_.end(), host);
  std::copy(starts_.begin(), starts_.end(), host + rows_.size());
  std::copy(members_.begin(), members_.end(), host + rows_.size() + starts_.size());
  gpu::Launch(device(), "EmbedForward", top[0]->count(), EmbedForwardKernel, bottom[0]->gpu_data(),
              blobs_[0]->gpu_data(), bias_term_ ? blobs_[1]->gpu_data() : static_cast<const float*>(nullptr), N_,
              top[0]->mutable_gpu_data());
}

void EmbedLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[0]) << "cannot backpropagate to the input (indices)";
  if (M_ == 0) return;
  const float* top_diff = top[0]->gpu_diff();
  if (param_propagate_down(0)) {
    const int* groups = static_cast<const int*>(gpu_groups_->gpu_data());
    const int* rows = groups;
    const int* starts = rows + rows_.size();
    const int* members = starts + starts_.size();
    gpu::Launch(device(), "EmbedWeightBackward", static_cast<int>(rows_.size()) * N_, EmbedWeightBackwardKernel,
                top_diff, rows, starts, members, N_, blobs_[0]->mutable_gpu_diff());
  }
  if (bias_term_ && param_propagate_down(1)) {
    gpu::Launch(device(), "EmbedBiasBackward", N_, EmbedBiasBackwardKernel, top_diff, M_,
                blobs_[1]->mutable_gpu_diff());
  }
}

}  // namespace nereus

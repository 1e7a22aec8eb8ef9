// BatchReindex's GPU code: see batch_reindex_layer.h.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/batch_reindex_layer.h"
#include "worker/trainer/layers/layer_check.h"

namespace nereus {
namespace {

__global__ void BatchReindexForwardKernel(int n, const float* in, const float* indices, int inner, float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t m = i / inner;
    out[i] = in[static_cast<int64_t>(indices[m]) * inner + i % inner];
  }
}

// n = the data's count.
__global__ void BatchReindexBackwardKernel(int n, const float* top_diff, const float* indices, int m_count, int inner,
                                           float* diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    diff[i] = ops::BatchReindexGradAt(top_diff, indices, m_count, inner, static_cast<int>(i / inner),
                                      static_cast<int>(i % inner));
  }
}

}  // namespace

void BatchReindexLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string error = CheckIndices(*bottom[0], *bottom[1]);
  if (!error.empty()) {
    device()->RecordError(InvalidArgumentError(error));
    return;
  }
  gpu::Launch(device(), "BatchReindexForward", top[0]->count(), BatchReindexForwardKernel, bottom[0]->gpu_data(),
              bottom[1]->gpu_data(), bottom[0]->count(1), top[0]->mutable_gpu_data());
}

void BatchReindexLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cannot backpropagate to the indices (bottom 1)";
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "BatchReindexBackward", bottom[0]->count(), BatchReindexBackwardKernel, top[0]->gpu_diff(),
              bottom[1]->gpu_data(), bottom[1]->count(), bottom[0]->count(1), bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

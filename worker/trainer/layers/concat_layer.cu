// Concat's GPU code: one element a thread copied to its place in the top
// (ops::ConcatIndex), by ConcatCopyGpu, which Slice (shape_layers.cu) uses
// the other way.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/concat_layer.h"

namespace nereus {
namespace {

// n = the part's count.
__global__ void ConcatCopyKernel(int n, bool to_whole, const float* from, float* to, int inner, int whole_axis,
                                 int part_axis, int offset) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int part_index = static_cast<int>(i);
    const int whole_index = ops::ConcatIndex(part_index, inner, whole_axis, part_axis, offset);
    if (to_whole) {
      to[whole_index] = from[part_index];
    } else {
      to[part_index] = from[whole_index];
    }
  }
}

}  // namespace

void ConcatCopyGpu(gpu::Device* device, bool to_whole, int part_count, const float* from, float* to, int inner,
                   int whole_axis, int part_axis, int offset) {
  gpu::Launch(device, to_whole ? "ConcatToWhole" : "ConcatFromWhole", part_count, ConcatCopyKernel, to_whole, from, to,
              inner, whole_axis, part_axis, offset);
}

void ConcatLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  float* top_data = top[0]->mutable_gpu_data();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    ConcatCopyGpu(device(), true, b->count(), b->gpu_data(), top_data, concat_input_size_, top_concat_axis,
                  bottom_concat_axis, offset);
  });
}

void ConcatLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  const float* top_diff = top[0]->gpu_diff();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    if (!propagate_down[i]) return;
    ConcatCopyGpu(device(), false, b->count(), top_diff, b->mutable_gpu_diff(), concat_input_size_, top_concat_axis,
                  bottom_concat_axis, offset);
  });
}

}  // namespace nereus

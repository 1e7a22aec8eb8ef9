// Im2col's GPU code: im2col.h's kernels (the convolution's, one thread per
// column position forward, one per image element backward) over every
// image at once; they move values, or add them in the CPU's order: the
// CPU's bits.
#include "worker/trainer/layers/im2col_layer.h"

namespace nereus {

void Im2colLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  layers::Im2ColGpu(device(), bottom[0]->gpu_data(), geometry_, top[0]->mutable_gpu_data(), num_);
}

void Im2colLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  layers::Col2ImGpu(device(), top[0]->gpu_diff(), geometry_, bottom[0]->mutable_gpu_diff(), num_);
}

}  // namespace nereus

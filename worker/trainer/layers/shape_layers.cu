// The shape layers' GPU code. Flatten, Reshape and Input need none of their
// own (they share memory or do nothing, shape_layers.h); Silence clears its
// bottoms' gradients on the device. Slice and ArgMax have no GPU code yet:
// they run their CPU code on a GPU net.
#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/layers/shape_layers.h"

namespace nereus {

void SilenceLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (propagate_down[i]) caffe_gpu_set(device(), bottom[i]->count(), 0.0f, bottom[i]->mutable_gpu_diff());
  }
}

}  // namespace nereus

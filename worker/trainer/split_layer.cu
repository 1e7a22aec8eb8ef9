// SplitLayer's GPU code: the tops share the bottom's data (as on the CPU);
// the bottom's gradient is the sum of the tops', in the same order.
#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/split_layer.h"

namespace nereus {

void SplitLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (Blob* t : top) t->ShareData(*bottom[0]);
}

void SplitLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  float* bottom_diff = bottom[0]->mutable_gpu_diff();
  if (top.size() == 1) {
    caffe_gpu_copy(device(), count, top[0]->gpu_diff(), bottom_diff);
    return;
  }
  caffe_gpu_add(device(), count, top[0]->gpu_diff(), top[1]->gpu_diff(), bottom_diff);
  for (size_t i = 2; i < top.size(); ++i) caffe_gpu_axpy(device(), count, 1.0f, top[i]->gpu_diff(), bottom_diff);
}

}  // namespace nereus

// Parameter's GPU code: see parameter_layer.h.
#include "worker/trainer/layers/parameter_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {

void ParameterLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->ShareData(*blobs_[0]);
}

void ParameterLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!param_propagate_down(0)) return;
  caffe_gpu_axpy(device(), blobs_[0]->count(), 1.0f, top[0]->gpu_diff(), blobs_[0]->mutable_gpu_diff());
}

}  // namespace nereus

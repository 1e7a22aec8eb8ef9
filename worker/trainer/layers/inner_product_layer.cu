// InnerProductLayer's GPU code: inner_product_layer.h's passes with
// cuBLAS's GEMMs.
#include "worker/trainer/layers/inner_product_layer.h"
#include "worker/trainer/math/blob_math.h"

namespace nereus {

void InnerProductLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(GpuMath(device()), bottom, top);
}

void InnerProductLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  BackwardWith(GpuMath(device()), top, propagate_down, bottom);
}

}  // namespace nereus

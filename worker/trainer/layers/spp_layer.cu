// SPP's GPU code: the CPU's passes (spp_layer.h) with the device's math; its
// levels are Pooling layers on the same device (their own kernels).
#include "worker/trainer/layers/spp_layer.h"

namespace nereus {

void SPPLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(GpuMath(device()), bottom, top);
}

void SPPLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) BackwardWith(GpuMath(device()), top, bottom);
}

}  // namespace nereus

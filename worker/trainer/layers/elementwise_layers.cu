// PReLU's GPU code (the other layers of elementwise_layers.h are
// ElementLayers: neuron_layers.cu): one thread per element, each running the
// element function the CPU loop runs; the slope gradient, one thread per
// slope, adding its terms in the CPU's order.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/elementwise_layers.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

__global__ void PReLUForwardKernel(int n, const float* in, float* out, const float* slope, int channels, int dim,
                                   bool channel_shared) {
  NEREUS_KERNEL_LOOP(i, n) {
    out[i] = ops::ReLUForward(in[i], slope[ops::PReLUChannel(static_cast<int>(i), channels, dim, channel_shared)]);
  }
}
__global__ void PReLUBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff,
                                    const float* slope, int channels, int dim, bool channel_shared) {
  NEREUS_KERNEL_LOOP(i, n) {
    bottom_diff[i] = ops::ReLUBackward(top_diff[i], in[i],
                                       slope[ops::PReLUChannel(static_cast<int>(i), channels, dim, channel_shared)]);
  }
}
// n = the number of slopes.
__global__ void PReLUSlopeGradientKernel(int n, const float* top_diff, const float* in, float* slope_diff, int num,
                                         int channels, int dim, bool channel_shared) {
  NEREUS_KERNEL_LOOP(c, n) {
    const int ch = static_cast<int>(c);
    slope_diff[ch] = ops::PReLUSlopeGradient(top_diff, in, ch, num, channels, dim, channel_shared, slope_diff[ch]);
  }
}

}  // namespace

// ---- PReLU ----

void PReLULayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveInputIfInPlace(GpuMath(device()), *bottom[0], *top[0], &bottom_copy_);
  gpu::Launch(device(), "PReLUForward", bottom[0]->count(), PReLUForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), blobs_[0]->gpu_data(), bottom[0]->shape(1), bottom[0]->count(2),
              channel_shared_);
}

void PReLULayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* in = SavedInput(*bottom[0], *top[0], bottom_copy_).gpu_data();
  const float* top_diff = top[0]->gpu_diff();
  const int channels = bottom[0]->shape(1);
  const int dim = bottom[0]->count(2);
  if (param_propagate_down(0)) {
    gpu::Launch(device(), "PReLUSlopeGradient", blobs_[0]->count(), PReLUSlopeGradientKernel, top_diff, in,
                blobs_[0]->mutable_gpu_diff(), bottom[0]->shape(0), channels, dim, channel_shared_);
  }
  if (propagate_down[0]) {
    gpu::Launch(device(), "PReLUBackward", bottom[0]->count(), PReLUBackwardKernel, top_diff, in,
                bottom[0]->mutable_gpu_diff(), blobs_[0]->gpu_data(), channels, dim, channel_shared_);
  }
}

}  // namespace nereus

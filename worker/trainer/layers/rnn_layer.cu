// RNN's GPU code: the CPU's passes (rnn_layer.h) with the device's math
// (cuBLAS) and, for the element-wise parts, one thread per element running
// the functions the CPU loops run (CUDA's tanhf within 2 ulp of glibc's).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/layers/rnn_layer.h"

namespace nereus {
namespace {

__global__ void TanhKernel(int n, const float* in, float* out) { NEREUS_KERNEL_LOOP(i, n) out[i] = ops::Tanh(in[i]); }

__global__ void TanhBackwardKernel(int n, const float* dy, const float* y, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::TanHBackward(dy[i], y[i]);
}

// cont's Scale from RecurrentGpuCells (recurrent_layer.cu), tanh here.
struct RnnGpuCells : RecurrentGpuCells {
  explicit RnnGpuCells(gpu::Device* d) : RecurrentGpuCells{d, "RNNContinue", "RNNHiddenGradient"} {}
  void Tanh(int n, const float* in, float* out) const { gpu::Launch(device, "RNNTanh", n, TanhKernel, in, out); }
  void TanhBackward(int n, const float* dy, const float* y, float* out) const {
    gpu::Launch(device, "RNNTanhBackward", n, TanhBackwardKernel, dy, y, out);
  }
};

}  // namespace

void RNNLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(GpuMath(device()), RnnGpuCells(device()), bottom, top);
}

void RNNLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cont (bottom 1) has no gradient";
  BackwardWith(GpuMath(device()), RnnGpuCells(device()), top, propagate_down, bottom);
}

}  // namespace nereus

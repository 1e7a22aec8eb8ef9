// cont's Scale on the GPU for LSTM and RNN: one thread per element running
// the functions recurrent_layer.h shares with the CPU loops.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/recurrent_layer.h"

namespace nereus {
namespace {

__global__ void ContinueKernel(int n, const float* h_prev, const float* cont, int hidden, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::RecurrentContinue(h_prev, cont, static_cast<int>(i), hidden);
}

__global__ void HiddenGradientKernel(int n, const float* base, const float* continued_diff, const float* cont,
                                     int hidden, float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    out[i] = ops::RecurrentHiddenGradient(base[i], continued_diff, cont, static_cast<int>(i), hidden);
  }
}

}  // namespace

void RecurrentGpuCells::Continue(int n, const float* h_prev, const float* cont, int hidden, float* out) const {
  gpu::Launch(device, continue_name, n, ContinueKernel, h_prev, cont, hidden, out);
}

void RecurrentGpuCells::HiddenGradient(int n, const float* base, const float* continued_diff, const float* cont,
                                       int hidden, float* out) const {
  gpu::Launch(device, hidden_gradient_name, n, HiddenGradientKernel, base, continued_diff, cont, hidden, out);
}

}  // namespace nereus

// LSTM's GPU code: the CPU's passes (lstm_layer.h) with the device's math
// (cuBLAS) and, for the element-wise parts, one thread per element running
// the functions recurrent_layer.h and lstm_unit_layer.h share with the CPU loops.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/lstm_layer.h"

namespace nereus {
namespace {

__global__ void UnitForwardKernel(int n, const float* c_prev, const float* gates, const float* cont, int hidden,
                                  float* c, float* h) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t stream = i / hidden;
    ops::LSTMUnitForward(c_prev[i], gates + 4 * stream * hidden, static_cast<int>(i % hidden), hidden, cont[stream],
                         &c[i], &h[i]);
  }
}

__global__ void UnitBackwardKernel(int n, const float* c_prev, const float* gates, const float* cont, int hidden,
                                   const float* c, const float* c_diff, const float* h_diff, float* c_prev_diff,
                                   float* gates_diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int64_t stream = i / hidden;
    ops::LSTMUnitBackward(c_prev[i], gates + 4 * stream * hidden, static_cast<int>(i % hidden), hidden, cont[stream],
                          c[i], c_diff[i], h_diff[i], &c_prev_diff[i], gates_diff + 4 * stream * hidden);
  }
}

// cont's Scale from RecurrentGpuCells (recurrent_layer.cu), LSTMUnit's here.
struct LstmGpuCells : RecurrentGpuCells {
  explicit LstmGpuCells(gpu::Device* d) : RecurrentGpuCells{d, "LSTMContinue", "LSTMHiddenGradient"} {}
  void UnitForward(int n, const float* c_prev, const float* gates, const float* cont, int hidden, float* c,
                   float* h) const {
    gpu::Launch(device, "LSTMStepForward", n, UnitForwardKernel, c_prev, gates, cont, hidden, c, h);
  }
  void UnitBackward(int n, const float* c_prev, const float* gates, const float* cont, int hidden, const float* c,
                    const float* c_diff, const float* h_diff, float* c_prev_diff, float* gates_diff) const {
    gpu::Launch(device, "LSTMStepBackward", n, UnitBackwardKernel, c_prev, gates, cont, hidden, c, c_diff, h_diff,
                c_prev_diff, gates_diff);
  }
};

}  // namespace

void LSTMLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(GpuMath(device()), LstmGpuCells(device()), bottom, top);
}

void LSTMLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cont (bottom 1) has no gradient";
  BackwardWith(GpuMath(device()), LstmGpuCells(device()), top, propagate_down, bottom);
}

}  // namespace nereus

// LSTMUnit, as Caffe's: one step of an LSTM's cell for N streams of D units.
// Bottoms: c_prev [1, N, D], the gate inputs x [1, N, 4D] (input, forget,
// output and candidate blocks of D, in that order) and cont [1, N], the
// sequence-continuation flags; tops: c and h, [1, N, D]:
//   i = sigmoid(x_i)  f = cont * sigmoid(x_f)  o = sigmoid(x_o)  g = tanh(x_g)
//   c = f * c_prev + i * g     h = o * tanh(c)
// (cont 0 starts a new sequence: the previous cell is forgotten). Backward
// gives c_prev's and x's gradients from both tops'; cont has none: the layer
// cannot be forced to backpropagate to it, and a net that needs its gradient
// is refused when built (Caffe dies in Backward). The layer holds no state:
// the recurrence is the net's (an LSTM layer's unrolled steps).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LSTM_UNIT_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LSTM_UNIT_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// Per-unit arithmetic of LSTMUnit, shared by the CPU loops
// (lstm_unit_layer.cc) and the GPU kernels (lstm_unit_layer.cu). `x` points
// at the stream's 4D gate inputs, `d` is the unit.
struct LSTMGates {
  float i, f, o, g;
};
NEREUS_HOST_DEVICE inline float LSTMSigmoid(float v) { return 0.5f * Tanh(0.5f * v) + 0.5f; }
NEREUS_HOST_DEVICE inline LSTMGates LSTMUnitGates(const float* x, int d, int dim, float cont) {
  LSTMGates gates;
  gates.i = LSTMSigmoid(x[d]);
  gates.f = cont == 0.0f ? 0.0f : cont * LSTMSigmoid(x[dim + d]);
  gates.o = LSTMSigmoid(x[2 * dim + d]);
  gates.g = Tanh(x[3 * dim + d]);
  return gates;
}
// c and h of unit d.
NEREUS_HOST_DEVICE inline void LSTMUnitForward(float c_prev, const float* x, int d, int dim, float cont, float* c,
                                               float* h) {
  const LSTMGates gates = LSTMUnitGates(x, d, dim, cont);
  const float cell = gates.f * c_prev + gates.i * gates.g;
  *c = cell;
  *h = gates.o * Tanh(cell);
}
// The gradients of c_prev and of unit d's four gate inputs (written at
// x_diff[d], x_diff[dim + d], ...), from c's and h's gradients (Caffe's
// formulas: f's is the sigmoid's derivative at cont = 1).
NEREUS_HOST_DEVICE inline void LSTMUnitBackward(float c_prev, const float* x, int d, int dim, float cont, float c,
                                                float c_diff, float h_diff, float* c_prev_diff, float* x_diff) {
  const LSTMGates gates = LSTMUnitGates(x, d, dim, cont);
  const float tanh_c = Tanh(c);
  const float c_term = c_diff + h_diff * gates.o * (1.0f - tanh_c * tanh_c);
  *c_prev_diff = c_term * gates.f;
  x_diff[d] = c_term * gates.g * gates.i * (1.0f - gates.i);
  x_diff[dim + d] = c_term * c_prev * gates.f * (1.0f - gates.f);
  x_diff[2 * dim + d] = h_diff * tanh_c * gates.o * (1.0f - gates.o);
  x_diff[3 * dim + d] = c_term * gates.i * (1.0f - gates.g * gates.g);
}

}  // namespace ops

class LSTMUnitLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "LSTMUnit"; }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  // cont (bottom 2) has no gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // Checks the bottoms' shapes; returns the error.
  static Status CheckShapes(const std::vector<Blob*>& bottom);

  int num_ = 0;         // N: streams
  int hidden_dim_ = 0;  // D: units
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LSTM_UNIT_LAYER_H_

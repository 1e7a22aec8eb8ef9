// LSTM, as Caffe's: Caffe unrolls it into a net of InnerProduct, Scale,
// Eltwise and LSTMUnit layers over the T timesteps; this layer runs the same
// computation step by step, with the same parameters in the same order and
// the same sums in the same order.
//
// Bottoms: x [T, N, ...] (each step's input, its axes from 2 on flattened to
// X), cont [T, N] (0 where a sequence starts: the state before it is
// forgotten), then optionally x_static [N, ...] (an input for every step),
// then, with recurrent_param.expose_hidden, h_0 and c_0 [1, N, H]. Tops: h
// [T, N, H] (H = num_output), then with expose_hidden h_T and c_T [1, N, H].
// Parameters (recurrent_param's fillers; Caffe's order): W_xc [4H, X], b_c
// [4H], W_xc_static [4H, S] with x_static, W_hc [4H, H]. Step t:
//   gates_t = W_hc (cont_t h_{t-1}) + (W_xc x_t + b_c) [+ W_xc_static x_static]
//   c_t, h_t = LSTMUnit(c_{t-1}, gates_t, cont_t)        (lstm_unit_layer.h)
//
// State across iterations: without expose_hidden the layer keeps the last
// step's h_T and c_T and starts the next forward from them (Caffe copies them
// into h_0 and c_0), in TRAIN and TEST alike; they start at 0 and go back to
// 0 when the number of streams N changes. A cont of 0 at a stream's first
// step makes the carried state irrelevant. The state is the layer's own: it
// is not a parameter, is not checkpointed and, in a job, each worker keeps
// its own (as BatchNorm's statistics). No gradient flows into the carried
// state; with expose_hidden, h_0 and c_0 get theirs.
//
// cont has no gradient: the layer cannot be forced to backpropagate to it and
// a net that needs it is refused when built (Caffe dies in Backward).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LSTM_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LSTM_LAYER_H_

#include <string>
#include <vector>

#include "worker/trainer/layers/lstm_unit_layer.h"
#include "worker/trainer/layers/recurrent_layer.h"

namespace nereus {

class LSTMLayer : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "LSTM"; }

 protected:
  NEREUS_LAYER_PASSES;
  const Spec& spec() const override;
  void AddStepParameters(std::vector<std::vector<int>>* shapes, std::vector<std::string>* names) const override;
  void ReshapeSteps() override;

 private:
  // The step-by-step passes, written once over CpuMath/GpuMath; the
  // element-wise parts go through Cells (lstm_layer.cc: loops; lstm_layer.cu:
  // kernels).
  template <class Math, class Cells>
  void ForwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& bottom,
                   const std::vector<Blob*>& top);
  template <class Math, class Cells>
  void BackwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& top,
                    const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom);

  // W_hc is blobs_[step_params_] (2; 3 with x_static).
  Blob gate_x_;       // [T, N, 4H]: W_xc x + b_c
  Blob gate_static_;  // [N, 4H]: W_xc_static x_static
  Blob gates_;        // [T, N, 4H]: the gate inputs (diff: their gradients)
  Blob h_;            // [T + 1, N, H]: h_0 .. h_T (diff: their gradients)
  Blob c_;            // [T + 1, N, H]: c_0 .. c_T (diff: their gradients)
  Blob continued_;    // [T, N, H]: cont_t h_{t-1} (diff: its gradient)
};

template <class Math, class Cells>
void LSTMLayer::ForwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& bottom,
                            const std::vector<Blob*>& top) {
  const int T = steps_, N = streams_, H = hidden_, G = 4 * hidden_;
  const float* cont = math.data(*bottom[1]);
  float* gate_x = math.mutable_data(&gate_x_);
  ForwardInputs(math, bottom, gate_x, &gate_static_);
  float* h = math.mutable_data(&h_);
  float* c = math.mutable_data(&c_);
  LoadState(math, bottom, 0, h);
  LoadState(math, bottom, 1, c);
  float* continued = math.mutable_data(&continued_);
  float* gates = math.mutable_data(&gates_);
  for (int t = 0; t < T; ++t) {
    float* gates_t = gates + static_cast<long>(t) * N * G;
    float* continued_t = continued + static_cast<long>(t) * N * H;
    cells.Continue(N * H, h + static_cast<long>(t) * N * H, cont + t * N, H, continued_t);
    // Caffe's Eltwise SUM: W_hc h, then + W_xc x, then + the static term.
    math.gemm(CblasNoTrans, CblasTrans, N, G, H, 1.0f, continued_t, math.data(*blobs_[step_params_]), 0.0f, gates_t);
    math.axpy(N * G, 1.0f, gate_x + static_cast<long>(t) * N * G, gates_t);
    if (static_input_) math.axpy(N * G, 1.0f, math.data(gate_static_), gates_t);
    cells.UnitForward(N * H, c + static_cast<long>(t) * N * H, gates_t, cont + t * N, H,
                      c + static_cast<long>(t + 1) * N * H, h + static_cast<long>(t + 1) * N * H);
  }
  math.copy(T * N * H, h + N * H, math.mutable_data(top[0]));
  SaveState(math, top, 0, h + static_cast<long>(T) * N * H);
  SaveState(math, top, 1, c + static_cast<long>(T) * N * H);
}

template <class Math, class Cells>
void LSTMLayer::BackwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& top,
                             const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom) {
  const int T = steps_, N = streams_, H = hidden_, G = 4 * hidden_;
  const float* cont = math.data(*bottom[1]);
  const float* h = math.data(h_);
  const float* c = math.data(c_);
  const float* gates = math.data(gates_);
  const float* continued = math.data(continued_);
  float* dh = math.mutable_diff(&h_);
  float* dc = math.mutable_diff(&c_);
  float* dgates = math.mutable_diff(&gates_);
  float* dcontinued = math.mutable_diff(&continued_);
  // h_1 .. h_T start with the top's gradient; h_T and c_T with their tops'
  // (expose_hidden), else c_T's is 0.
  math.copy(T * N * H, math.diff(*top[0]), dh + N * H);
  float* dc_last = dc + static_cast<long>(T) * N * H;
  if (expose_hidden_) {
    math.axpy(N * H, 1.0f, math.diff(*top[1]), dh + static_cast<long>(T) * N * H);
    math.copy(N * H, math.diff(*top[2]), dc_last);
  } else {
    math.scale(N * H, 0.0f, math.data(c_), dc_last);  // zeros
  }
  const float* w_hc = math.data(*blobs_[step_params_]);
  float* dw_hc = math.mutable_diff(blobs_[step_params_].get());
  for (int t = T - 1; t >= 0; --t) {
    const long state = static_cast<long>(t) * N * H;
    const long next = static_cast<long>(t + 1) * N * H;
    float* dgates_t = dgates + static_cast<long>(t) * N * G;
    cells.UnitBackward(N * H, c + state, gates + static_cast<long>(t) * N * G, cont + t * N, H, c + next, dc + next,
                       dh + next, dc + state, dgates_t);
    if (param_propagate_down(step_params_)) {
      math.gemm(CblasTrans, CblasNoTrans, G, H, N, 1.0f, dgates_t, continued + state, 1.0f, dw_hc);
    }
    math.gemm(CblasNoTrans, CblasNoTrans, N, H, G, 1.0f, dgates_t, w_hc, 0.0f, dcontinued + state);
    // h_t's gradient so far (its top's; 0 for h_0) plus the Scale's.
    if (t == 0) math.scale(N * H, 0.0f, h, dh);  // zeros
    cells.HiddenGradient(N * H, dh + state, dcontinued + state, cont + t * N, H, dh + state);
  }
  BackwardInputs(math, propagate_down, bottom, dgates, &gate_static_);
  BackwardState(math, propagate_down, bottom, 0, dh);
  BackwardState(math, propagate_down, bottom, 1, dc);
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LSTM_LAYER_H_

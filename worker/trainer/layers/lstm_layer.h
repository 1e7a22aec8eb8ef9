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

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layers/lstm_unit_layer.h"
#include "worker/trainer/math/blob_math.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of LSTM's steps, besides LSTMUnit's, shared by the
// CPU loops (lstm_layer.cc) and the GPU kernels (lstm_layer.cu); element i
// of an [N, H] blob belongs to stream i / H.
//
// Caffe's Scale of h_{t-1} by cont_t.
NEREUS_HOST_DEVICE inline float LSTMContinue(const float* h_prev, const float* cont, int i, int hidden) {
  return h_prev[i] * cont[i / hidden];
}
// h_{t-1}'s gradient: what it had (the top's, for t - 1 >= 1) plus the
// Scale's, cont_t times the gradient of cont_t h_{t-1}.
NEREUS_HOST_DEVICE inline float LSTMHiddenGradient(float base, const float* continued_diff, const float* cont, int i,
                                                   int hidden) {
  return base + continued_diff[i] * cont[i / hidden];
}

}  // namespace ops

class LSTMLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "LSTM"; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 5; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 3; }
  // cont (bottom 1) has no gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  NEREUS_LAYER_PASSES;

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
  // Checks the bottoms' and tops' counts and shapes; returns the error.
  Status CheckShapes(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;

  bool expose_hidden_ = false;
  bool static_input_ = false;
  int hidden_ = 0;      // H
  int steps_ = 0;       // T
  int streams_ = 0;     // N
  int input_dim_ = 0;   // X
  int static_dim_ = 0;  // S
  int w_hc_ = 2;        // the index of W_hc in blobs_ (3 with x_static)
  Blob gate_x_;         // [T, N, 4H]: W_xc x + b_c
  Blob gate_static_;    // [N, 4H]: W_xc_static x_static
  Blob gates_;          // [T, N, 4H]: the gate inputs (diff: their gradients)
  Blob h_;              // [T + 1, N, H]: h_0 .. h_T (diff: their gradients)
  Blob c_;              // [T + 1, N, H]: c_0 .. c_T (diff: their gradients)
  Blob continued_;      // [T, N, H]: cont_t h_{t-1} (diff: its gradient)
  Blob ones_;           // [T * N]: ones for the bias
  Blob state_h_;        // [N, H]: the carried h_T (without expose_hidden)
  Blob state_c_;        // [N, H]: the carried c_T
};

template <class Math, class Cells>
void LSTMLayer::ForwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& bottom,
                            const std::vector<Blob*>& top) {
  const int T = steps_, N = streams_, H = hidden_, G = 4 * hidden_;
  const float* cont = math.data(*bottom[1]);
  float* gate_x = math.mutable_data(&gate_x_);
  math.gemm(CblasNoTrans, CblasTrans, T * N, G, input_dim_, 1.0f, math.data(*bottom[0]), math.data(*blobs_[0]), 0.0f,
            gate_x);
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, G, 1, 1.0f, math.data(ones_), math.data(*blobs_[1]), 1.0f, gate_x);
  if (static_input_) {
    math.gemm(CblasNoTrans, CblasTrans, N, G, static_dim_, 1.0f, math.data(*bottom[2]), math.data(*blobs_[2]), 0.0f,
              math.mutable_data(&gate_static_));
  }
  float* h = math.mutable_data(&h_);
  float* c = math.mutable_data(&c_);
  const int first_hidden = 2 + (static_input_ ? 1 : 0);
  math.copy(N * H, expose_hidden_ ? math.data(*bottom[first_hidden]) : math.data(state_h_), h);
  math.copy(N * H, expose_hidden_ ? math.data(*bottom[first_hidden + 1]) : math.data(state_c_), c);
  float* continued = math.mutable_data(&continued_);
  float* gates = math.mutable_data(&gates_);
  for (int t = 0; t < T; ++t) {
    float* gates_t = gates + static_cast<long>(t) * N * G;
    float* continued_t = continued + static_cast<long>(t) * N * H;
    cells.Continue(N * H, h + static_cast<long>(t) * N * H, cont + t * N, H, continued_t);
    // Caffe's Eltwise SUM: W_hc h, then + W_xc x, then + the static term.
    math.gemm(CblasNoTrans, CblasTrans, N, G, H, 1.0f, continued_t, math.data(*blobs_[w_hc_]), 0.0f, gates_t);
    math.axpy(N * G, 1.0f, gate_x + static_cast<long>(t) * N * G, gates_t);
    if (static_input_) math.axpy(N * G, 1.0f, math.data(gate_static_), gates_t);
    cells.UnitForward(N * H, c + static_cast<long>(t) * N * H, gates_t, cont + t * N, H,
                      c + static_cast<long>(t + 1) * N * H, h + static_cast<long>(t + 1) * N * H);
  }
  math.copy(T * N * H, h + N * H, math.mutable_data(top[0]));
  const float* h_last = h + static_cast<long>(T) * N * H;
  const float* c_last = c + static_cast<long>(T) * N * H;
  if (expose_hidden_) {
    math.copy(N * H, h_last, math.mutable_data(top[1]));
    math.copy(N * H, c_last, math.mutable_data(top[2]));
  } else {
    math.copy(N * H, h_last, math.mutable_data(&state_h_));
    math.copy(N * H, c_last, math.mutable_data(&state_c_));
  }
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
  const float* w_hc = math.data(*blobs_[w_hc_]);
  float* dw_hc = math.mutable_diff(blobs_[w_hc_].get());
  for (int t = T - 1; t >= 0; --t) {
    const long state = static_cast<long>(t) * N * H;
    const long next = static_cast<long>(t + 1) * N * H;
    float* dgates_t = dgates + static_cast<long>(t) * N * G;
    cells.UnitBackward(N * H, c + state, gates + static_cast<long>(t) * N * G, cont + t * N, H, c + next, dc + next,
                       dh + next, dc + state, dgates_t);
    if (param_propagate_down(w_hc_)) {
      math.gemm(CblasTrans, CblasNoTrans, G, H, N, 1.0f, dgates_t, continued + state, 1.0f, dw_hc);
    }
    math.gemm(CblasNoTrans, CblasNoTrans, N, H, G, 1.0f, dgates_t, w_hc, 0.0f, dcontinued + state);
    // h_t's gradient so far (its top's; 0 for h_0) plus the Scale's.
    if (t == 0) math.scale(N * H, 0.0f, h, dh);  // zeros
    cells.HiddenGradient(N * H, dh + state, dcontinued + state, cont + t * N, H, dh + state);
  }
  if (param_propagate_down(0)) {
    math.gemm(CblasTrans, CblasNoTrans, G, input_dim_, T * N, 1.0f, dgates, math.data(*bottom[0]), 1.0f,
              math.mutable_diff(blobs_[0].get()));
  }
  if (param_propagate_down(1)) {
    math.gemv(CblasTrans, T * N, G, 1.0f, dgates, math.data(ones_), 1.0f, math.mutable_diff(blobs_[1].get()));
  }
  if (propagate_down[0]) {
    math.gemm(CblasNoTrans, CblasNoTrans, T * N, input_dim_, G, 1.0f, dgates, math.data(*blobs_[0]), 0.0f,
              math.mutable_diff(bottom[0]));
  }
  if (static_input_) {
    // The static term's gradient: the steps' gate gradients added in step
    // order (Caffe's Split).
    float* dstatic = math.mutable_diff(&gate_static_);
    math.copy(N * G, dgates, dstatic);
    for (int t = 1; t < T; ++t) math.axpy(N * G, 1.0f, dgates + static_cast<long>(t) * N * G, dstatic);
    if (param_propagate_down(2)) {
      math.gemm(CblasTrans, CblasNoTrans, G, static_dim_, N, 1.0f, dstatic, math.data(*bottom[2]), 1.0f,
                math.mutable_diff(blobs_[2].get()));
    }
    if (propagate_down[2]) {
      math.gemm(CblasNoTrans, CblasNoTrans, N, static_dim_, G, 1.0f, dstatic, math.data(*blobs_[2]), 0.0f,
                math.mutable_diff(bottom[2]));
    }
  }
  if (expose_hidden_) {
    const int first_hidden = 2 + (static_input_ ? 1 : 0);
    if (propagate_down[first_hidden]) math.copy(N * H, dh, math.mutable_diff(bottom[first_hidden]));
    if (propagate_down[first_hidden + 1]) math.copy(N * H, dc, math.mutable_diff(bottom[first_hidden + 1]));
  }
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LSTM_LAYER_H_

// RNN, as Caffe's: Caffe unrolls it into a net of InnerProduct, Scale,
// Eltwise and TanH layers over the T timesteps; this layer runs the same
// computation step by step, with the same parameters in the same order.
//
// Bottoms: x [T, N, ...] (each step's input, its axes from 2 on flattened to
// X), cont [T, N] (0 where a sequence starts: the state before it is
// forgotten), then optionally x_static [N, ...] (an input for every step),
// then, with recurrent_param.expose_hidden, h_0 [1, N, H]. Tops: o [T, N, H]
// (H = num_output), then with expose_hidden h_T [1, N, H]. Parameters
// (recurrent_param's fillers; Caffe's order): W_xh [H, X], b_h [H],
// W_xh_static [H, S] with x_static, W_hh [H, H], W_ho [H, H], b_o [H]. Step t:
//   h_t = tanh(W_hh (cont_t h_{t-1}) + (W_xh x_t + b_h) [+ W_xh_static x_static])
//   o_t = tanh(W_ho h_t + b_o)
//
// State across iterations: as LSTM's (lstm_layer.h; recurrent_layer.h holds
// it for both). Without expose_hidden
// the layer keeps the last step's h_T and starts the next forward from it
// (Caffe copies it into h_0), in TRAIN and TEST; it starts at 0 and returns
// to 0 when the number of streams N changes; a cont of 0 at a stream's first
// step makes it irrelevant. Not a parameter, not checkpointed, each worker's
// own in a job; no gradient flows into it (with expose_hidden, h_0 gets
// its own).
//
// cont has no gradient: the layer cannot be forced to backpropagate to it and
// a net that needs it is refused when built (Caffe dies in Backward).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_RNN_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_RNN_LAYER_H_

#include <string>
#include <vector>

#include "worker/trainer/layers/recurrent_layer.h"

namespace nereus {

class RNNLayer : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "RNN"; }

 protected:
  NEREUS_LAYER_PASSES;
  const Spec& spec() const override;
  void AddStepParameters(std::vector<std::vector<int>>* shapes, std::vector<std::string>* names) const override;
  void ReshapeSteps() override;

 private:
  // The step-by-step passes over CpuMath/GpuMath; the element-wise parts
  // (cont's scaling, tanh) go through Cells (rnn_layer.cc: loops over
  // ops:: functions; rnn_layer.cu: kernels running them).
  template <class Math, class Cells>
  void ForwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& bottom,
                   const std::vector<Blob*>& top);
  template <class Math, class Cells>
  void BackwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& top,
                    const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom);

  // W_hh is blobs_[step_params_] (2; 3 with x_static); W_ho, b_o follow.
  Blob hidden_x_;       // [T, N, H]: W_xh x + b_h
  Blob hidden_static_;  // [N, H]: W_xh_static x_static (diff: its gradient)
  Blob h_;              // [T + 1, N, H]: h_0 .. h_T (diff: their gradients)
  Blob continued_;      // [T, N, H]: cont_t h_{t-1} (diff: its gradient)
  Blob pre_;            // [T, N, H]: h_t's tanh input (diff: its gradient)
  Blob out_pre_;        // [T, N, H]: o_t's tanh input (diff: its gradient)
};

template <class Math, class Cells>
void RNNLayer::ForwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& bottom,
                           const std::vector<Blob*>& top) {
  const int T = steps_, N = streams_, H = hidden_;
  const long step = static_cast<long>(N) * H;
  const float* cont = math.data(*bottom[1]);
  float* hidden_x = math.mutable_data(&hidden_x_);
  ForwardInputs(math, bottom, hidden_x, &hidden_static_);
  float* h = math.mutable_data(&h_);
  LoadState(math, bottom, 0, h);
  float* continued = math.mutable_data(&continued_);
  float* pre = math.mutable_data(&pre_);
  for (int t = 0; t < T; ++t) {
    cells.Continue(N * H, h + t * step, cont + t * N, H, continued + t * step);
    // Caffe's Eltwise SUM: W_hh h, then + W_xh x, then + the static term.
    math.gemm(CblasNoTrans, CblasTrans, N, H, H, 1.0f, continued + t * step, math.data(*blobs_[step_params_]), 0.0f,
              pre + t * step);
    math.axpy(N * H, 1.0f, hidden_x + t * step, pre + t * step);
    if (static_input_) math.axpy(N * H, 1.0f, math.data(hidden_static_), pre + t * step);
    cells.Tanh(N * H, pre + t * step, h + (t + 1) * step);
  }
  float* out_pre = math.mutable_data(&out_pre_);
  math.gemm(CblasNoTrans, CblasTrans, T * N, H, H, 1.0f, h + step, math.data(*blobs_[step_params_ + 1]), 0.0f, out_pre);
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, H, 1, 1.0f, math.data(ones_), math.data(*blobs_[step_params_ + 2]), 1.0f,
            out_pre);
  cells.Tanh(T * N * H, out_pre, math.mutable_data(top[0]));
  SaveState(math, top, 0, h + T * step);
}

template <class Math, class Cells>
void RNNLayer::BackwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& top,
                            const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom) {
  const int T = steps_, N = streams_, H = hidden_;
  const long step = static_cast<long>(N) * H;
  const float* cont = math.data(*bottom[1]);
  const float* h = math.data(h_);
  float* dh = math.mutable_diff(&h_);
  float* dpre = math.mutable_diff(&pre_);
  float* dcontinued = math.mutable_diff(&continued_);
  // o = tanh(W_ho h + b_o): the gradients of W_ho, b_o and h_1 .. h_T.
  float* dout_pre = math.mutable_diff(&out_pre_);
  cells.TanhBackward(T * N * H, math.diff(*top[0]), math.data(*top[0]), dout_pre);
  if (param_propagate_down(step_params_ + 1)) {
    math.gemm(CblasTrans, CblasNoTrans, H, H, T * N, 1.0f, dout_pre, h + step, 1.0f,
              math.mutable_diff(blobs_[step_params_ + 1].get()));
  }
  if (param_propagate_down(step_params_ + 2)) {
    math.gemv(CblasTrans, T * N, H, 1.0f, dout_pre, math.data(ones_), 1.0f,
              math.mutable_diff(blobs_[step_params_ + 2].get()));
  }
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, H, H, 1.0f, dout_pre, math.data(*blobs_[step_params_ + 1]), 0.0f,
            dh + step);
  if (expose_hidden_) math.axpy(N * H, 1.0f, math.diff(*top[1]), dh + T * step);
  const float* w_hh = math.data(*blobs_[step_params_]);
  float* dw_hh = math.mutable_diff(blobs_[step_params_].get());
  for (int t = T - 1; t >= 0; --t) {
    cells.TanhBackward(N * H, dh + (t + 1) * step, h + (t + 1) * step, dpre + t * step);
    if (param_propagate_down(step_params_)) {
      math.gemm(CblasTrans, CblasNoTrans, H, H, N, 1.0f, dpre + t * step, math.data(continued_) + t * step, 1.0f,
                dw_hh);
    }
    math.gemm(CblasNoTrans, CblasNoTrans, N, H, H, 1.0f, dpre + t * step, w_hh, 0.0f, dcontinued + t * step);
    if (t == 0) math.scale(N * H, 0.0f, h, dh);  // h_0's gradient starts at 0
    cells.HiddenGradient(N * H, dh + t * step, dcontinued + t * step, cont + t * N, H, dh + t * step);
  }
  BackwardInputs(math, propagate_down, bottom, dpre, &hidden_static_);
  BackwardState(math, propagate_down, bottom, 0, dh);
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_RNN_LAYER_H_

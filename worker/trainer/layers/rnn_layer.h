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
// State across iterations: as LSTM's (lstm_layer.h). Without expose_hidden
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

#include <vector>

#include "worker/trainer/layer.h"
#include "worker/trainer/layers/lstm_layer.h"
#include "worker/trainer/math/blob_math.h"

namespace nereus {

class RNNLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "RNN"; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 4; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  // cont (bottom 1) has no gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  NEREUS_LAYER_PASSES;

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
  // Checks the bottoms' and tops' counts and shapes; returns the error.
  Status CheckShapes(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;

  bool expose_hidden_ = false;
  bool static_input_ = false;
  int hidden_ = 0;      // H
  int steps_ = 0;       // T
  int streams_ = 0;     // N
  int input_dim_ = 0;   // X
  int static_dim_ = 0;  // S
  int w_hh_ = 2;        // the index of W_hh in blobs_ (3 with x_static); W_ho, b_o follow
  Blob hidden_x_;       // [T, N, H]: W_xh x + b_h
  Blob hidden_static_;  // [N, H]: W_xh_static x_static (diff: its gradient)
  Blob h_;              // [T + 1, N, H]: h_0 .. h_T (diff: their gradients)
  Blob continued_;      // [T, N, H]: cont_t h_{t-1} (diff: its gradient)
  Blob pre_;            // [T, N, H]: h_t's tanh input (diff: its gradient)
  Blob out_pre_;        // [T, N, H]: o_t's tanh input (diff: its gradient)
  Blob ones_;           // [T * N]: ones for the biases
  Blob state_h_;        // [N, H]: the carried h_T (without expose_hidden)
};

template <class Math, class Cells>
void RNNLayer::ForwardWith(const Math& math, const Cells& cells, const std::vector<Blob*>& bottom,
                           const std::vector<Blob*>& top) {
  const int T = steps_, N = streams_, H = hidden_;
  const long step = static_cast<long>(N) * H;
  const float* cont = math.data(*bottom[1]);
  float* hidden_x = math.mutable_data(&hidden_x_);
  math.gemm(CblasNoTrans, CblasTrans, T * N, H, input_dim_, 1.0f, math.data(*bottom[0]), math.data(*blobs_[0]), 0.0f,
            hidden_x);
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, H, 1, 1.0f, math.data(ones_), math.data(*blobs_[1]), 1.0f, hidden_x);
  if (static_input_) {
    math.gemm(CblasNoTrans, CblasTrans, N, H, static_dim_, 1.0f, math.data(*bottom[2]), math.data(*blobs_[2]), 0.0f,
              math.mutable_data(&hidden_static_));
  }
  float* h = math.mutable_data(&h_);
  math.copy(N * H, expose_hidden_ ? math.data(*bottom[bottom.size() - 1]) : math.data(state_h_), h);
  float* continued = math.mutable_data(&continued_);
  float* pre = math.mutable_data(&pre_);
  for (int t = 0; t < T; ++t) {
    cells.Continue(N * H, h + t * step, cont + t * N, H, continued + t * step);
    // Caffe's Eltwise SUM: W_hh h, then + W_xh x, then + the static term.
    math.gemm(CblasNoTrans, CblasTrans, N, H, H, 1.0f, continued + t * step, math.data(*blobs_[w_hh_]), 0.0f,
              pre + t * step);
    math.axpy(N * H, 1.0f, hidden_x + t * step, pre + t * step);
    if (static_input_) math.axpy(N * H, 1.0f, math.data(hidden_static_), pre + t * step);
    cells.Tanh(N * H, pre + t * step, h + (t + 1) * step);
  }
  float* out_pre = math.mutable_data(&out_pre_);
  math.gemm(CblasNoTrans, CblasTrans, T * N, H, H, 1.0f, h + step, math.data(*blobs_[w_hh_ + 1]), 0.0f, out_pre);
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, H, 1, 1.0f, math.data(ones_), math.data(*blobs_[w_hh_ + 2]), 1.0f,
            out_pre);
  cells.Tanh(T * N * H, out_pre, math.mutable_data(top[0]));
  const float* h_last = h + T * step;
  math.copy(N * H, h_last, expose_hidden_ ? math.mutable_data(top[1]) : math.mutable_data(&state_h_));
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
  if (param_propagate_down(w_hh_ + 1)) {
    math.gemm(CblasTrans, CblasNoTrans, H, H, T * N, 1.0f, dout_pre, h + step, 1.0f,
              math.mutable_diff(blobs_[w_hh_ + 1].get()));
  }
  if (param_propagate_down(w_hh_ + 2)) {
    math.gemv(CblasTrans, T * N, H, 1.0f, dout_pre, math.data(ones_), 1.0f, math.mutable_diff(blobs_[w_hh_ + 2].get()));
  }
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, H, H, 1.0f, dout_pre, math.data(*blobs_[w_hh_ + 1]), 0.0f, dh + step);
  if (expose_hidden_) math.axpy(N * H, 1.0f, math.diff(*top[1]), dh + T * step);
  const float* w_hh = math.data(*blobs_[w_hh_]);
  float* dw_hh = math.mutable_diff(blobs_[w_hh_].get());
  for (int t = T - 1; t >= 0; --t) {
    cells.TanhBackward(N * H, dh + (t + 1) * step, h + (t + 1) * step, dpre + t * step);
    if (param_propagate_down(w_hh_)) {
      math.gemm(CblasTrans, CblasNoTrans, H, H, N, 1.0f, dpre + t * step, math.data(continued_) + t * step, 1.0f,
                dw_hh);
    }
    math.gemm(CblasNoTrans, CblasNoTrans, N, H, H, 1.0f, dpre + t * step, w_hh, 0.0f, dcontinued + t * step);
    if (t == 0) math.scale(N * H, 0.0f, h, dh);  // h_0's gradient starts at 0
    cells.HiddenGradient(N * H, dh + t * step, dcontinued + t * step, cont + t * N, H, dh + t * step);
  }
  if (param_propagate_down(0)) {
    math.gemm(CblasTrans, CblasNoTrans, H, input_dim_, T * N, 1.0f, dpre, math.data(*bottom[0]), 1.0f,
              math.mutable_diff(blobs_[0].get()));
  }
  if (param_propagate_down(1)) {
    math.gemv(CblasTrans, T * N, H, 1.0f, dpre, math.data(ones_), 1.0f, math.mutable_diff(blobs_[1].get()));
  }
  if (propagate_down[0]) {
    math.gemm(CblasNoTrans, CblasNoTrans, T * N, input_dim_, H, 1.0f, dpre, math.data(*blobs_[0]), 0.0f,
              math.mutable_diff(bottom[0]));
  }
  if (static_input_) {
    // The static term's gradient: the steps' added in step order (Caffe's Split).
    float* dstatic = math.mutable_diff(&hidden_static_);
    math.copy(N * H, dpre, dstatic);
    for (int t = 1; t < T; ++t) math.axpy(N * H, 1.0f, dpre + t * step, dstatic);
    if (param_propagate_down(2)) {
      math.gemm(CblasTrans, CblasNoTrans, H, static_dim_, N, 1.0f, dstatic, math.data(*bottom[2]), 1.0f,
                math.mutable_diff(blobs_[2].get()));
    }
    if (propagate_down[2]) {
      math.gemm(CblasNoTrans, CblasNoTrans, N, static_dim_, H, 1.0f, dstatic, math.data(*blobs_[2]), 0.0f,
                math.mutable_diff(bottom[2]));
    }
  }
  if (expose_hidden_ && propagate_down[bottom.size() - 1]) {
    math.copy(N * H, dh, math.mutable_diff(bottom[bottom.size() - 1]));
  }
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_RNN_LAYER_H_

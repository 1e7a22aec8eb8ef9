// RecurrentLayer: what LSTM (lstm_layer.h) and RNN (rnn_layer.h) share, as
// Caffe's RecurrentLayer is their base: the bottoms x [T, N, ...], cont
// [T, N], optional x_static [N, ...] and, with recurrent_param.expose_hidden,
// the initial states; their checks; the input projection's parameters W_x
// [G, X], b [G] and W_x_static [G, S] (G = gates * H) and their passes; the
// hidden states carried from one forward to the next (h for RNN, h and c for
// LSTM; see lstm_layer.h); and the element-wise parts of cont's Scale. Each
// layer keeps its own step parameters, buffers and step loop.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_RECURRENT_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_RECURRENT_LAYER_H_

#include <string>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/blob_math.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of cont's Scale, shared by the CPU loops
// (RecurrentCpuCells) and the GPU kernels (recurrent_layer.cu); element i of
// an [N, H] blob belongs to stream i / H.
//
// Caffe's Scale of h_{t-1} by cont_t.
NEREUS_HOST_DEVICE inline float RecurrentContinue(const float* h_prev, const float* cont, int i, int hidden) {
  return h_prev[i] * cont[i / hidden];
}
// h_{t-1}'s gradient: what it had (the top's, for t - 1 >= 1) plus the
// Scale's, cont_t times the gradient of cont_t h_{t-1}.
NEREUS_HOST_DEVICE inline float RecurrentHiddenGradient(float base, const float* continued_diff, const float* cont,
                                                        int i, int hidden) {
  return base + continued_diff[i] * cont[i / hidden];
}

}  // namespace ops

// cont's Scale on the CPU: loops over the ops:: functions. A layer's CPU
// cells derive from it and add their own element-wise parts.
struct RecurrentCpuCells {
  void Continue(int n, const float* h_prev, const float* cont, int hidden, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::RecurrentContinue(h_prev, cont, i, hidden);
  }
  void HiddenGradient(int n, const float* base, const float* continued_diff, const float* cont, int hidden,
                      float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::RecurrentHiddenGradient(base[i], continued_diff, cont, i, hidden);
  }
};

#ifdef NEREUS_HAVE_CUDA
// cont's Scale on the GPU (recurrent_layer.cu): one thread per element,
// launched under the layer's kernel names.
struct RecurrentGpuCells {
  gpu::Device* device;
  const char* continue_name;
  const char* hidden_gradient_name;
  void Continue(int n, const float* h_prev, const float* cont, int hidden, float* out) const;
  void HiddenGradient(int n, const float* base, const float* continued_diff, const float* cont, int hidden,
                      float* out) const;
};
#endif

class RecurrentLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3 + spec().states; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 1 + spec().states; }
  // cont (bottom 1) has no gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  static constexpr int kMaxStates = 2;
  // What tells the layers apart here.
  struct Spec {
    int states;                  // the states carried: 1 (h) or 2 (h, c)
    int gates;                   // G / H: the input projection's rows per hidden unit
    const char* input_names[3];  // W_x, b and W_x_static's names
    const char* state_bottoms;   // the initial states, in CheckShapes's message
    const char* exposed_tops;    // the tops with expose_hidden, in its message
    const char* lone_top;        // the top without, in its message
  };
  virtual const Spec& spec() const = 0;
  // Appends the step parameters' shapes and names (after W_x, b and
  // W_x_static; the first is blobs_[step_params_]).
  virtual void AddStepParameters(std::vector<std::vector<int>>* shapes, std::vector<std::string>* names) const = 0;
  // Sizes the layer's own buffers; steps_, streams_ and the dims are set.
  virtual void ReshapeSteps() = 0;

  // Forward: W_x x + b into x_out [T * N, G] and, with x_static,
  // W_x_static x_static into static_out [N, G].
  template <class Math>
  void ForwardInputs(const Math& math, const std::vector<Blob*>& bottom, float* x_out, Blob* static_out);
  // Forward: state k's initial value (h_0, c_0) into out [N, H]: its bottom
  // with expose_hidden, else the carried one.
  template <class Math>
  void LoadState(const Math& math, const std::vector<Blob*>& bottom, int k, float* out) {
    math.copy(streams_ * hidden_, expose_hidden_ ? math.data(*bottom[first_state_bottom() + k]) : math.data(state_[k]),
              out);
  }
  // Forward: state k's last value into its top with expose_hidden, else
  // into the carried state.
  template <class Math>
  void SaveState(const Math& math, const std::vector<Blob*>& top, int k, const float* last) {
    math.copy(streams_ * hidden_, last, expose_hidden_ ? math.mutable_data(top[1 + k]) : math.mutable_data(&state_[k]));
  }
  // Backward: from the gates' gradients dgates [T * N, G], those of W_x, b,
  // x and (through static_blob's diff) W_x_static and x_static.
  template <class Math>
  void BackwardInputs(const Math& math, const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom,
                      const float* dgates, Blob* static_blob);
  // Backward: with expose_hidden, state k's initial gradient d [N, H] into
  // its bottom.
  template <class Math>
  void BackwardState(const Math& math, const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom, int k,
                     const float* d) {
    const int b = first_state_bottom() + k;
    if (expose_hidden_ && propagate_down[b]) math.copy(streams_ * hidden_, d, math.mutable_diff(bottom[b]));
  }
  int first_state_bottom() const { return 2 + (static_input_ ? 1 : 0); }

  bool expose_hidden_ = false;
  bool static_input_ = false;
  int hidden_ = 0;          // H
  int steps_ = 0;           // T
  int streams_ = 0;         // N
  int input_dim_ = 0;       // X
  int static_dim_ = 0;      // S
  int step_params_ = 2;     // the index of the first step parameter in blobs_ (3 with x_static)
  Blob ones_;               // [T * N]: ones for the biases
  Blob state_[kMaxStates];  // [N, H]: the carried h_T (and c_T) (without expose_hidden)

 private:
  // Checks the bottoms' and tops' counts and shapes; returns the error.
  Status CheckShapes(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;

  std::vector<std::string> param_names_;
};

template <class Math>
void RecurrentLayer::ForwardInputs(const Math& math, const std::vector<Blob*>& bottom, float* x_out, Blob* static_out) {
  const int T = steps_, N = streams_, G = spec().gates * hidden_;
  math.gemm(CblasNoTrans, CblasTrans, T * N, G, input_dim_, 1.0f, math.data(*bottom[0]), math.data(*blobs_[0]), 0.0f,
            x_out);
  math.gemm(CblasNoTrans, CblasNoTrans, T * N, G, 1, 1.0f, math.data(ones_), math.data(*blobs_[1]), 1.0f, x_out);
  if (static_input_) {
    math.gemm(CblasNoTrans, CblasTrans, N, G, static_dim_, 1.0f, math.data(*bottom[2]), math.data(*blobs_[2]), 0.0f,
              math.mutable_data(static_out));
  }
}

template <class Math>
void RecurrentLayer::BackwardInputs(const Math& math, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom, const float* dgates, Blob* static_blob) {
  const int T = steps_, N = streams_, G = spec().gates * hidden_;
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
    float* dstatic = math.mutable_diff(static_blob);
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
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_RECURRENT_LAYER_H_

#include "worker/trainer/layers/rnn_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/layers/neuron_layers.h"

namespace nereus {
namespace {

// RNN's element-wise parts on the CPU: loops over the ops:: functions
// (cont's Scale as LSTM's, TanH's).
struct CpuCells {
  void Continue(int n, const float* h_prev, const float* cont, int hidden, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::LSTMContinue(h_prev, cont, i, hidden);
  }
  void HiddenGradient(int n, const float* base, const float* continued_diff, const float* cont, int hidden,
                      float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::LSTMHiddenGradient(base[i], continued_diff, cont, i, hidden);
  }
  void Tanh(int n, const float* in, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::Tanh(in[i]);
  }
  void TanhBackward(int n, const float* dy, const float* y, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::TanHBackward(dy[i], y[i]);
  }
};

}  // namespace

Status RNNLayer::CheckShapes(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  const Blob& x = *bottom[0];
  const Blob& cont = *bottom[1];
  if (x.num_axes() < 2) return InvalidArgumentError("x (bottom 0) must be [T, N, ...], got " + x.shape_string());
  if (cont.num_axes() != 2 || cont.shape(0) != x.shape(0) || cont.shape(1) != x.shape(1)) {
    return InvalidArgumentError("cont (bottom 1) must be [T, N] = [" + std::to_string(x.shape(0)) + ", " +
                                std::to_string(x.shape(1)) + "] as x's first axes, got " + cont.shape_string());
  }
  const size_t expected_bottoms = 2 + (static_input_ ? 1 : 0) + (expose_hidden_ ? 1 : 0);
  const size_t expected_tops = expose_hidden_ ? 2 : 1;
  if (bottom.size() != expected_bottoms || top.size() != expected_tops) {
    return InvalidArgumentError(
        std::string("takes x, cont, an optional x_static") + (expose_hidden_ ? " and h_0" : "") + " and gives " +
        (expose_hidden_ ? "o and h_T" : "o alone (h_T is a top with expose_hidden)") + "; got " +
        std::to_string(bottom.size()) + " bottoms and " + std::to_string(top.size()) + " tops");
  }
  if (static_input_ && (bottom[2]->num_axes() < 1 || bottom[2]->shape(0) != x.shape(1))) {
    return InvalidArgumentError("x_static (bottom 2) must be [N, ...] with N = " + std::to_string(x.shape(1)) +
                                ", got " + bottom[2]->shape_string());
  }
  if (expose_hidden_ && bottom.back()->shape() != std::vector<int>{1, x.shape(1), hidden_}) {
    return InvalidArgumentError("h_0 must be [1, N, num_output] = [1, " + std::to_string(x.shape(1)) + ", " +
                                std::to_string(hidden_) + "], got " + bottom.back()->shape_string());
  }
  return Status::OK();
}

Status RNNLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::RecurrentParameter& p = layer_param_.recurrent_param();
  if (p.num_output() == 0) return LayerError("recurrent_param.num_output must be given and > 0");
  hidden_ = static_cast<int>(p.num_output());
  expose_hidden_ = p.expose_hidden();
  static_input_ = bottom.size() > 2 + (expose_hidden_ ? 1u : 0u);
  const Status shapes = CheckShapes(bottom, top);
  if (!shapes.ok()) return LayerError(shapes.message());
  const int H = hidden_;
  std::vector<std::vector<int>> shapes_of = {{H, bottom[0]->count(2)}, {H}};
  std::vector<std::string> names = {"W_xh", "b_h"};
  if (static_input_) {
    shapes_of.push_back({H, bottom[2]->count(1)});
    names.push_back("W_xh_static");
  }
  w_hh_ = static_cast<int>(shapes_of.size());
  shapes_of.insert(shapes_of.end(), {{H, H}, {H, H}, {H}});
  names.insert(names.end(), {"W_hh", "W_ho", "b_o"});
  if (!blobs_.empty()) {
    if (blobs_.size() != shapes_of.size()) {
      return LayerError("has " + std::to_string(blobs_.size()) + " blobs, expected " +
                        std::to_string(shapes_of.size()));
    }
    for (size_t i = 0; i < shapes_of.size(); ++i) {
      RETURN_IF_ERROR(CheckExistingShape(*blobs_[i], shapes_of[i], names[i]));
    }
  } else {
    for (size_t i = 0; i < shapes_of.size(); ++i) {
      const bool bias = names[i][0] == 'b';
      RETURN_IF_ERROR(AddFilledBlob(shapes_of[i], bias ? p.bias_filler() : p.weight_filler(),
                                    bias ? "recurrent_param.bias_filler" : "recurrent_param.weight_filler"));
    }
  }
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

void RNNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Status shapes = CheckShapes(bottom, top);
  LAYER_CHECK(shapes.ok()) << shapes.message();
  LAYER_CHECK(bottom[0]->count(2) == blobs_[0]->shape(1))
      << "x has " << bottom[0]->count(2) << " inputs a step, W_xh " << blobs_[0]->shape(1);
  LAYER_CHECK(!static_input_ || bottom[2]->count(1) == blobs_[2]->shape(1))
      << "x_static has " << bottom[2]->count(1) << " inputs, W_xh_static " << blobs_[2]->shape(1);
  steps_ = bottom[0]->shape(0);
  const int streams = bottom[0]->shape(1);
  input_dim_ = bottom[0]->count(2);
  static_dim_ = static_input_ ? bottom[2]->count(1) : 0;
  const int H = hidden_;
  if (streams != streams_ || state_h_.count() != streams * H) {
    // Another number of streams: the carried state starts again at 0.
    state_h_.Reshape({streams, H});
    caffe_set(state_h_.count(), 0.0f, state_h_.mutable_cpu_data());
  }
  streams_ = streams;
  hidden_x_.Reshape({steps_, streams_, H});
  hidden_static_.Reshape({streams_, H});
  h_.Reshape({steps_ + 1, streams_, H});
  continued_.Reshape({steps_, streams_, H});
  pre_.Reshape({steps_, streams_, H});
  out_pre_.Reshape({steps_, streams_, H});
  if (ones_.count() != steps_ * streams_) {
    ones_.Reshape({steps_ * streams_});
    caffe_set(ones_.count(), 1.0f, ones_.mutable_cpu_data());
  }
  top[0]->Reshape({steps_, streams_, H});
  if (expose_hidden_) top[1]->Reshape({1, streams_, H});
}

void RNNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(CpuMath(), CpuCells(), bottom, top);
}

void RNNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cont (bottom 1) has no gradient";
  BackwardWith(CpuMath(), CpuCells(), top, propagate_down, bottom);
}

}  // namespace nereus

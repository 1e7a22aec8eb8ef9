#include "worker/trainer/layers/lstm_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {
namespace {

// LSTM's element-wise parts on the CPU: loops over ops:: functions.
struct CpuCells {
  void Continue(int n, const float* h_prev, const float* cont, int hidden, float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::LSTMContinue(h_prev, cont, i, hidden);
  }
  void HiddenGradient(int n, const float* base, const float* continued_diff, const float* cont, int hidden,
                      float* out) const {
    for (int i = 0; i < n; ++i) out[i] = ops::LSTMHiddenGradient(base[i], continued_diff, cont, i, hidden);
  }
  void UnitForward(int n, const float* c_prev, const float* gates, const float* cont, int hidden, float* c,
                   float* h) const {
    for (int i = 0; i < n; ++i) {
      const int stream = i / hidden;
      ops::LSTMUnitForward(c_prev[i], gates + 4 * stream * hidden, i % hidden, hidden, cont[stream], &c[i], &h[i]);
    }
  }
  void UnitBackward(int n, const float* c_prev, const float* gates, const float* cont, int hidden, const float* c,
                    const float* c_diff, const float* h_diff, float* c_prev_diff, float* gates_diff) const {
    for (int i = 0; i < n; ++i) {
      const int stream = i / hidden;
      ops::LSTMUnitBackward(c_prev[i], gates + 4 * stream * hidden, i % hidden, hidden, cont[stream], c[i], c_diff[i],
                            h_diff[i], &c_prev_diff[i], gates_diff + 4 * stream * hidden);
    }
  }
};

}  // namespace

Status LSTMLayer::CheckShapes(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  const Blob& x = *bottom[0];
  const Blob& cont = *bottom[1];
  if (x.num_axes() < 2) return InvalidArgumentError("x (bottom 0) must be [T, N, ...], got " + x.shape_string());
  if (cont.num_axes() != 2 || cont.shape(0) != x.shape(0) || cont.shape(1) != x.shape(1)) {
    return InvalidArgumentError("cont (bottom 1) must be [T, N] = [" + std::to_string(x.shape(0)) + ", " +
                                std::to_string(x.shape(1)) + "] as x's first axes, got " + cont.shape_string());
  }
  const int hidden_bottoms = expose_hidden_ ? 2 : 0;
  const size_t expected_tops = expose_hidden_ ? 3 : 1;
  if (bottom.size() != static_cast<size_t>(2 + (static_input_ ? 1 : 0) + hidden_bottoms) ||
      top.size() != expected_tops) {
    return InvalidArgumentError(
        std::string("takes x, cont, an optional x_static") + (expose_hidden_ ? ", h_0 and c_0" : "") + " and gives " +
        (expose_hidden_ ? "h, h_T and c_T" : "h alone (h_T and c_T are tops with expose_hidden)") + "; got " +
        std::to_string(bottom.size()) + " bottoms and " + std::to_string(top.size()) + " tops");
  }
  if (static_input_ && (bottom[2]->num_axes() < 1 || bottom[2]->shape(0) != x.shape(1))) {
    return InvalidArgumentError("x_static (bottom 2) must be [N, ...] with N = " + std::to_string(x.shape(1)) +
                                ", got " + bottom[2]->shape_string());
  }
  for (int k = 0; k < hidden_bottoms; ++k) {
    const Blob& b = *bottom[bottom.size() - 2 + k];
    if (b.shape() != std::vector<int>{1, x.shape(1), hidden_}) {
      return InvalidArgumentError(std::string(k == 0 ? "h_0" : "c_0") + " must be [1, N, num_output] = [1, " +
                                  std::to_string(x.shape(1)) + ", " + std::to_string(hidden_) + "], got " +
                                  b.shape_string());
    }
  }
  return Status::OK();
}

Status LSTMLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::RecurrentParameter& p = layer_param_.recurrent_param();
  if (p.num_output() == 0) return LayerError("recurrent_param.num_output must be given and > 0");
  hidden_ = static_cast<int>(p.num_output());
  expose_hidden_ = p.expose_hidden();
  static_input_ = bottom.size() > 2 + (expose_hidden_ ? 2u : 0u);
  const Status shapes = CheckShapes(bottom, top);
  if (!shapes.ok()) return LayerError(shapes.message());
  const int gates = 4 * hidden_;
  std::vector<std::vector<int>> shapes_of = {{gates, bottom[0]->count(2)}, {gates}};
  if (static_input_) shapes_of.push_back({gates, bottom[2]->count(1)});
  shapes_of.push_back({gates, hidden_});
  w_hc_ = static_cast<int>(shapes_of.size()) - 1;
  const char* names[] = {"W_xc", "b_c", static_input_ ? "W_xc_static" : "W_hc", "W_hc"};
  if (!blobs_.empty()) {
    if (blobs_.size() != shapes_of.size()) {
      return LayerError("has " + std::to_string(blobs_.size()) + " blobs, expected " +
                        std::to_string(shapes_of.size()));
    }
    for (size_t i = 0; i < shapes_of.size(); ++i)
      RETURN_IF_ERROR(CheckExistingShape(*blobs_[i], shapes_of[i], names[i]));
  } else {
    for (size_t i = 0; i < shapes_of.size(); ++i) {
      const bool bias = i == 1;
      RETURN_IF_ERROR(AddFilledBlob(shapes_of[i], bias ? p.bias_filler() : p.weight_filler(),
                                    bias ? "recurrent_param.bias_filler" : "recurrent_param.weight_filler"));
    }
  }
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

void LSTMLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Status shapes = CheckShapes(bottom, top);
  LAYER_CHECK(shapes.ok()) << shapes.message();
  LAYER_CHECK(bottom[0]->count(2) == blobs_[0]->shape(1))
      << "x has " << bottom[0]->count(2) << " inputs a step, W_xc " << blobs_[0]->shape(1);
  LAYER_CHECK(!static_input_ || bottom[2]->count(1) == blobs_[2]->shape(1))
      << "x_static has " << bottom[2]->count(1) << " inputs, W_xc_static " << blobs_[2]->shape(1);
  steps_ = bottom[0]->shape(0);
  const int streams = bottom[0]->shape(1);
  input_dim_ = bottom[0]->count(2);
  static_dim_ = static_input_ ? bottom[2]->count(1) : 0;
  const int H = hidden_, G = 4 * hidden_;
  if (streams != streams_ || state_h_.count() != streams * H) {
    // Another number of streams: the carried state starts again at 0.
    state_h_.Reshape({streams, H});
    state_c_.Reshape({streams, H});
    caffe_set(state_h_.count(), 0.0f, state_h_.mutable_cpu_data());
    caffe_set(state_c_.count(), 0.0f, state_c_.mutable_cpu_data());
  }
  streams_ = streams;
  gate_x_.Reshape({steps_, streams_, G});
  gate_static_.Reshape({streams_, G});
  gates_.Reshape({steps_, streams_, G});
  h_.Reshape({steps_ + 1, streams_, H});
  c_.Reshape({steps_ + 1, streams_, H});
  continued_.Reshape({steps_, streams_, H});
  if (ones_.count() != steps_ * streams_) {
    ones_.Reshape({steps_ * streams_});
    caffe_set(ones_.count(), 1.0f, ones_.mutable_cpu_data());
  }
  top[0]->Reshape({steps_, streams_, H});
  if (expose_hidden_) {
    top[1]->Reshape({1, streams_, H});
    top[2]->Reshape({1, streams_, H});
  }
}

void LSTMLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(CpuMath(), CpuCells(), bottom, top);
}

void LSTMLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cont (bottom 1) has no gradient";
  BackwardWith(CpuMath(), CpuCells(), top, propagate_down, bottom);
}

}  // namespace nereus

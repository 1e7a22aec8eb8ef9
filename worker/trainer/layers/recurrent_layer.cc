#include "worker/trainer/layers/recurrent_layer.h"

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

Status RecurrentLayer::CheckShapes(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  const Spec& s = spec();
  const Blob& x = *bottom[0];
  const Blob& cont = *bottom[1];
  if (x.num_axes() < 2) return InvalidArgumentError("x (bottom 0) must be [T, N, ...], got " + x.shape_string());
  if (cont.num_axes() != 2 || cont.shape(0) != x.shape(0) || cont.shape(1) != x.shape(1)) {
    return InvalidArgumentError("cont (bottom 1) must be [T, N] = [" + std::to_string(x.shape(0)) + ", " +
                                std::to_string(x.shape(1)) + "] as x's first axes, got " + cont.shape_string());
  }
  const int state_bottoms = expose_hidden_ ? s.states : 0;
  const size_t expected_tops = expose_hidden_ ? 1 + s.states : 1;
  if (bottom.size() != static_cast<size_t>(2 + (static_input_ ? 1 : 0) + state_bottoms) ||
      top.size() != expected_tops) {
    return InvalidArgumentError(std::string("takes x, cont, an optional x_static") +
                                (expose_hidden_ ? s.state_bottoms : "") + " and gives " +
                                (expose_hidden_ ? s.exposed_tops : s.lone_top) + "; got " +
                                std::to_string(bottom.size()) + " bottoms and " + std::to_string(top.size()) + " tops");
  }
  if (static_input_ && (bottom[2]->num_axes() < 1 || bottom[2]->shape(0) != x.shape(1))) {
    return InvalidArgumentError("x_static (bottom 2) must be [N, ...] with N = " + std::to_string(x.shape(1)) +
                                ", got " + bottom[2]->shape_string());
  }
  for (int k = 0; k < state_bottoms; ++k) {
    const Blob& b = *bottom[bottom.size() - state_bottoms + k];
    if (b.shape() != std::vector<int>{1, x.shape(1), hidden_}) {
      return InvalidArgumentError(std::string(k == 0 ? "h_0" : "c_0") + " must be [1, N, num_output] = [1, " +
                                  std::to_string(x.shape(1)) + ", " + std::to_string(hidden_) + "], got " +
                                  b.shape_string());
    }
  }
  return Status::OK();
}

Status RecurrentLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Spec& s = spec();
  const caffe::RecurrentParameter& p = layer_param_.recurrent_param();
  if (p.num_output() == 0) return LayerError("recurrent_param.num_output must be given and > 0");
  hidden_ = static_cast<int>(p.num_output());
  expose_hidden_ = p.expose_hidden();
  static_input_ = bottom.size() > static_cast<size_t>(2 + (expose_hidden_ ? s.states : 0));
  const Status shapes = CheckShapes(bottom, top);
  if (!shapes.ok()) return LayerError(shapes.message());
  const int G = s.gates * hidden_;
  std::vector<std::vector<int>> shapes_of = {{G, bottom[0]->count(2)}, {G}};
  std::vector<std::string> names = {s.input_names[0], s.input_names[1]};
  if (static_input_) {
    shapes_of.push_back({G, bottom[2]->count(1)});
    names.push_back(s.input_names[2]);
  }
  step_params_ = static_cast<int>(shapes_of.size());
  AddStepParameters(&shapes_of, &names);
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
  param_names_ = names;
  return Status::OK();
}

void RecurrentLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Status shapes = CheckShapes(bottom, top);
  LAYER_CHECK(shapes.ok()) << shapes.message();
  LAYER_CHECK(bottom[0]->count(2) == blobs_[0]->shape(1))
      << "x has " << bottom[0]->count(2) << " inputs a step, " << spec().input_names[0] << " " << blobs_[0]->shape(1);
  LAYER_CHECK(!static_input_ || bottom[2]->count(1) == blobs_[2]->shape(1))
      << "x_static has " << bottom[2]->count(1) << " inputs, " << spec().input_names[2] << " " << blobs_[2]->shape(1);
  steps_ = bottom[0]->shape(0);
  const int streams = bottom[0]->shape(1);
  input_dim_ = bottom[0]->count(2);
  static_dim_ = static_input_ ? bottom[2]->count(1) : 0;
  const int H = hidden_, states = spec().states;
  if (streams != streams_ || state_[0].count() != streams * H) {
    // Another number of streams: the carried state starts again at 0.
    for (int k = 0; k < states; ++k) {
      state_[k].Reshape({streams, H});
      caffe_set(state_[k].count(), 0.0f, state_[k].mutable_cpu_data());
    }
  }
  streams_ = streams;
  ReshapeSteps();
  if (ones_.count() != steps_ * streams_) {
    ones_.Reshape({steps_ * streams_});
    caffe_set(ones_.count(), 1.0f, ones_.mutable_cpu_data());
  }
  top[0]->Reshape({steps_, streams_, H});
  if (expose_hidden_) {
    for (int k = 0; k < states; ++k) top[1 + k]->Reshape({1, streams_, H});
  }
}

}  // namespace nereus

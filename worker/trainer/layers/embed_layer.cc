#include "worker/trainer/layers/embed_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status EmbedLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::EmbedParameter& ep = layer_param_.embed_param();
  if (ep.num_output() == 0) return LayerError("embed_param.num_output must be positive");
  if (ep.input_dim() == 0) return LayerError("embed_param.input_dim must be positive");
  N_ = static_cast<int>(ep.num_output());
  K_ = static_cast<int>(ep.input_dim());
  bias_term_ = ep.bias_term();
  RETURN_IF_ERROR(SetUpWeightAndBias({K_, N_}, ep.weight_filler(), bias_term_, N_, ep.bias_filler()));
  if (bias_term_ && blobs_.size() >= 2) RETURN_IF_ERROR(CheckExistingShape(*blobs_[1], {N_}, "bias blob"));
  return Status::OK();
}

void EmbedLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  M_ = bottom[0]->count();
  std::vector<int> shape = bottom[0]->shape();
  shape.push_back(N_);
  top[0]->Reshape(shape);
}

std::string EmbedLayer::CheckIndices(const Blob& bottom) const {
  const float* idx = bottom.cpu_data();
  for (int p = 0; p < bottom.count(); ++p) {
    if (!ops::EmbedIndexValid(idx[p], K_)) {
      return "input " + FormatIndexValue(idx[p]) + " at position " + std::to_string(p) +
             " is not an integer index in [0, " + std::to_string(K_) + ") (embed_param.input_dim)";
    }
  }
  return "";
}

void EmbedLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string error = CheckIndices(*bottom[0]);
  if (!error.empty()) {
    set_forward_error(StatusCode::kInvalidArgument, error);
    return;
  }
  const float* idx = bottom[0]->cpu_data();
  const float* weight = blobs_[0]->cpu_data();
  const float* bias = bias_term_ ? blobs_[1]->cpu_data() : nullptr;
  float* out = top[0]->mutable_cpu_data();
  for (int p = 0; p < M_; ++p) {
    const float* row = weight + static_cast<size_t>(idx[p]) * N_;
    float* o = out + static_cast<size_t>(p) * N_;
    for (int j = 0; j < N_; ++j) o[j] = bias != nullptr ? row[j] + bias[j] : row[j];
  }
}

void EmbedLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[0]) << "cannot backpropagate to the input (indices)";
  const float* top_diff = top[0]->cpu_diff();
  if (param_propagate_down(0)) {
    const float* idx = bottom[0]->cpu_data();
    float* weight_diff = blobs_[0]->mutable_cpu_diff();
    for (int p = 0; p < M_; ++p) {
      float* row = weight_diff + static_cast<size_t>(idx[p]) * N_;
      const float* t = top_diff + static_cast<size_t>(p) * N_;
      for (int j = 0; j < N_; ++j) row[j] += t[j];
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    float* bias_diff = blobs_[1]->mutable_cpu_diff();
    for (int j = 0; j < N_; ++j) bias_diff[j] += ops::EmbedBiasGradAt(top_diff, M_, N_, j);
  }
}

}  // namespace nereus

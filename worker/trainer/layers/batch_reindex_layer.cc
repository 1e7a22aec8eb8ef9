#include "worker/trainer/layers/batch_reindex_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status BatchReindexLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[1]->num_axes() != 1) {
    return LayerError("the indices (bottom 1) must have one axis, got " + bottom[1]->shape_string());
  }
  if (bottom[0]->num_axes() == 0) return LayerError("the data (bottom 0) must have a first axis");
  return Status::OK();
}

void BatchReindexLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[1]->num_axes() == 1)
      << "the indices (bottom 1) must have one axis, got " << bottom[1]->shape_string();
  std::vector<int> shape = bottom[0]->shape();
  shape[0] = bottom[1]->shape(0);
  top[0]->Reshape(shape);
}

std::string BatchReindexLayer::CheckIndices(const Blob& data, const Blob& indices) const {
  const float* idx = indices.cpu_data();
  for (int m = 0; m < indices.count(); ++m) {
    if (!(idx[m] >= 0.0f) || !(idx[m] < static_cast<float>(data.shape(0)))) {
      return "index " + FormatIndexValue(idx[m]) + " at position " + std::to_string(m) + " is out of range [0, " +
             std::to_string(data.shape(0)) + ") (the data's first dimension)";
    }
  }
  return "";
}

void BatchReindexLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string error = CheckIndices(*bottom[0], *bottom[1]);
  if (!error.empty()) {
    set_forward_error(StatusCode::kInvalidArgument, error);
    return;
  }
  if (top[0]->count() == 0) return;
  const int inner = bottom[0]->count(1);
  const float* in = bottom[0]->cpu_data();
  const float* idx = bottom[1]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  for (int m = 0; m < bottom[1]->count(); ++m) {
    caffe_copy(inner, in + static_cast<int>(idx[m]) * inner, out + m * inner);
  }
}

void BatchReindexLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[1]) << "cannot backpropagate to the indices (bottom 1)";
  if (!propagate_down[0]) return;
  const int inner = bottom[0]->count(1);
  const float* idx = bottom[1]->cpu_data();
  const float* top_diff = top[0]->cpu_diff();
  float* diff = bottom[0]->mutable_cpu_diff();
  caffe_set(bottom[0]->count(), 0.0f, diff);
  for (int m = 0; m < bottom[1]->count(); ++m) {
    float* row = diff + static_cast<int>(idx[m]) * inner;
    for (int k = 0; k < inner; ++k) row[k] += top_diff[m * inner + k];
  }
}

}  // namespace nereus

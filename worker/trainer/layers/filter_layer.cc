#include "worker/trainer/layers/filter_layer.h"

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

std::string FilterLayer::ShapeError(const std::vector<Blob*>& bottom) const {
  const Blob& selector = *bottom.back();
  if (selector.num_axes() == 0) return "the selector (the last bottom) must have a first axis";
  for (int i = 1; i < selector.num_axes(); ++i) {
    if (selector.shape(i) != 1) {
      return "selector blob dimensions must be singletons (1), except the first; got " + selector.shape_string();
    }
  }
  for (size_t i = 0; i + 1 < bottom.size(); ++i) {
    if (bottom[i]->num_axes() == 0 || bottom[i]->shape(0) != selector.shape(0)) {
      return "each bottom should have the same 0th dimension as the selector blob; bottom " + std::to_string(i) +
             " is " + bottom[i]->shape_string() + ", the selector " + selector.shape_string();
    }
  }
  return "";
}

Status FilterLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (top.size() != bottom.size() - 1) {
    return LayerError("takes one top per filtered bottom (the bottoms but the last, the selector): " +
                      std::to_string(bottom.size() - 1) + " top(s) expected, got " + std::to_string(top.size()));
  }
  const std::string error = ShapeError(bottom);
  if (!error.empty()) return LayerError(error);
  first_reshape_ = true;
  return Status::OK();
}

void FilterLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string error = ShapeError(bottom);
  LAYER_CHECK(error.empty()) << error;
  const Blob& selector = *bottom.back();
  const float* select = selector.cpu_data();
  indices_to_forward_.clear();
  for (int n = 0; n < selector.shape(0); ++n) {
    if (select[n] != 0.0f) indices_to_forward_.push_back(n);
  }
  int rows = static_cast<int>(indices_to_forward_.size());
  if (first_reshape_) {
    // Set-up: no selector has been read yet; the tops get every row.
    rows = bottom[0]->shape(0);
    first_reshape_ = false;
  }
  for (size_t t = 0; t < top.size(); ++t) {
    std::vector<int> shape = bottom[t]->shape();
    shape[0] = rows;
    top[t]->Reshape(shape);
  }
#ifdef NEREUS_HAVE_CUDA
  if (device() != nullptr) {
    const int n = selector.shape(0);
    const size_t m = indices_to_forward_.size();
    const size_t forward_bytes = sizeof(int) * (m > 0 ? m : 1);
    const size_t backward_bytes = sizeof(int) * static_cast<size_t>(n > 0 ? n : 1);
    if (gpu_forward_ == nullptr || gpu_forward_->size() != forward_bytes) {
      gpu_forward_ = std::make_shared<SyncedMemory>(forward_bytes);
    }
    if (gpu_backward_ == nullptr || gpu_backward_->size() != backward_bytes) {
      gpu_backward_ = std::make_shared<SyncedMemory>(backward_bytes);
    }
    int* forward = static_cast<int*>(gpu_forward_->mutable_cpu_data());
    int* backward = static_cast<int*>(gpu_backward_->mutable_cpu_data());
    for (int i = 0; i < n; ++i) backward[i] = -1;
    for (size_t r = 0; r < m; ++r) {
      forward[r] = indices_to_forward_[r];
      backward[indices_to_forward_[r]] = static_cast<int>(r);
    }
  }
#endif
}

void FilterLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t t = 0; t < top.size(); ++t) {
    const int dim = bottom[t]->count(1);
    const float* in = bottom[t]->cpu_data();
    float* out = top[t]->mutable_cpu_data();
    for (size_t r = 0; r < indices_to_forward_.size(); ++r) {
      caffe_copy(dim, in + static_cast<size_t>(indices_to_forward_[r]) * dim, out + r * dim);
    }
  }
}

void FilterLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down.back()) << "cannot backpropagate to the selector (the last bottom)";
  for (size_t t = 0; t < top.size(); ++t) {
    if (!propagate_down[t]) continue;
    const int dim = bottom[t]->count(1);
    float* diff = bottom[t]->mutable_cpu_diff();
    caffe_set(bottom[t]->count(), 0.0f, diff);
    const float* top_diff = top[t]->cpu_diff();
    for (size_t r = 0; r < indices_to_forward_.size(); ++r) {
      caffe_copy(dim, top_diff + r * dim, diff + static_cast<size_t>(indices_to_forward_[r]) * dim);
    }
  }
}

}  // namespace nereus

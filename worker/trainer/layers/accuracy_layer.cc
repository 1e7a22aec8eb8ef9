#include "worker/trainer/layers/accuracy_layer.h"

#include <algorithm>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status AccuracyLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::AccuracyParameter& p = layer_param_.accuracy_param();
  top_k_ = static_cast<int>(p.top_k());
  if (top_k_ <= 0) return LayerError("top_k must be > 0");
  has_ignore_label_ = p.has_ignore_label();
  ignore_label_ = p.ignore_label();
  const int num_axes = bottom[0]->num_axes();
  if (p.axis() < -num_axes || p.axis() >= num_axes) {
    return LayerError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                      bottom[0]->shape_string());
  }
  const int axis = bottom[0]->CanonicalAxisIndex(p.axis());
  const int classes = bottom[0]->shape(axis);
  if (top_k_ > classes) {
    return LayerError("top_k (" + std::to_string(top_k_) + ") must be less than or equal to the number of classes (" +
                      std::to_string(classes) + ")");
  }
  if (bottom[0]->count(0, axis) * bottom[0]->count(axis + 1) != bottom[1]->count()) {
    return LayerError("number of labels must match number of predictions: prediction shape " +
                      bottom[0]->shape_string() + " with axis " + std::to_string(axis) + ", label shape " +
                      bottom[1]->shape_string());
  }
  return Status::OK();
}

void AccuracyLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int axis = bottom[0]->CanonicalAxisIndex(layer_param_.accuracy_param().axis());
  outer_num_ = bottom[0]->count(0, axis);
  inner_num_ = bottom[0]->count(axis + 1);
  num_labels_ = bottom[0]->shape(axis);
  LAYER_CHECK(top_k_ <= num_labels_) << "top_k (" << top_k_ << ") must be less than or equal to the number of classes ("
                                     << num_labels_ << ")";
  LAYER_CHECK(outer_num_ * inner_num_ == bottom[1]->count())
      << "number of labels must match number of predictions: prediction shape " << bottom[0]->shape_string()
      << ", label shape " << bottom[1]->shape_string();
  top[0]->Reshape(std::vector<int>{});
  if (top.size() > 1) top[1]->Reshape(std::vector<int>{num_labels_});
  per_class_count_.assign(num_labels_, 0);
}

Layer::LabelRange AccuracyLayer::AcceptedLabels(int bottom_index) const {
  return bottom_index == 1 ? LabelsBelow(num_labels_, has_ignore_label_, ignore_label_) : LabelRange();
}

void AccuracyLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* scores = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  const int dim = bottom[0]->count() / outer_num_;
  float* per_class = top.size() > 1 ? top[1]->mutable_cpu_data() : nullptr;
  if (per_class != nullptr) caffe_set(num_labels_, 0.0f, per_class);
  std::fill(per_class_count_.begin(), per_class_count_.end(), 0);
  int correct = 0;
  int count = 0;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label_value = static_cast<int>(label[i * inner_num_ + j]);
      if (has_ignore_label_ && label_value == ignore_label_) continue;
      if (label_value < 0 || label_value >= num_labels_) {
        set_forward_error(StatusCode::kInvalidArgument, LabelOutOfRange(label_value, i * inner_num_ + j, num_labels_));
        return;
      }
      ++per_class_count_[label_value];
      if (ops::AccuracyHit(scores + i * dim + j, inner_num_, num_labels_, label_value, top_k_)) {
        ++correct;
        if (per_class != nullptr) per_class[label_value] += 1.0f;
      }
      ++count;
    }
  }
  top[0]->mutable_cpu_data()[0] = count == 0 ? 0.0f : static_cast<float>(correct) / count;
  if (per_class != nullptr) {
    for (int c = 0; c < num_labels_; ++c) {
      per_class[c] = per_class_count_[c] == 0 ? 0.0f : per_class[c] / per_class_count_[c];
    }
  }
}

void AccuracyLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                 const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < propagate_down.size(); ++i) {
    if (propagate_down[i]) {
      LOG(FATAL) << "layer " << layer_param_.name() << " (" << type() << "): Accuracy has no gradient; bottom " << i
                 << " asked for one";
    }
  }
}

}  // namespace nereus

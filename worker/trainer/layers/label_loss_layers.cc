#include "worker/trainer/layers/label_loss_layers.h"

#include <memory>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace {

// The loss top's weight 1 unless the prototxt gives weights; the others 0.
void DefaultLossWeights(caffe::LayerParameter* param, size_t num_tops) {
  if (param->loss_weight_size() != 0) return;
  param->add_loss_weight(1.0f);
  for (size_t i = 1; i < num_tops; ++i) param->add_loss_weight(0.0f);
}

// Whether the label bottom holds one label per example: N, or N x 1 x ...
bool OneLabelPerExample(const Blob& labels) { return labels.num_axes() >= 1 && labels.count() == labels.shape(0); }

}  // namespace

void LabelLossLayer::CheckNoLabelGradient(const std::vector<bool>& propagate_down) const {
  for (size_t i = 1; i < propagate_down.size(); ++i) {
    LAYER_CHECK(!propagate_down[i]) << "cannot backpropagate to bottom " << i
                                    << (i == 1 ? " (the labels)" : " (the infogain matrix)");
  }
}

// ---- HingeLoss and MultinomialLogisticLoss ----

Status ExampleLabelLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  RETURN_IF_ERROR(LossLayer::LayerSetUpStatus(bottom, top));
  if (!OneLabelPerExample(*bottom[1])) {
    return LayerError(std::string("takes one label per example, got ") + scores_name() + " " +
                      bottom[0]->shape_string() + " and labels " + bottom[1]->shape_string());
  }
  num_ = bottom[0]->shape(0);
  dim_ = bottom[0]->count(1);
  return Status::OK();
}

void ExampleLabelLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LossLayer::Reshape(bottom, top);
  LAYER_CHECK(OneLabelPerExample(*bottom[1]))
      << "takes one label per example, got " << scores_name() << " " << bottom[0]->shape_string() << " and labels "
      << bottom[1]->shape_string();
  num_ = bottom[0]->shape(0);
  dim_ = bottom[0]->count(1);
}

Layer::LabelRange ExampleLabelLossLayer::AcceptedLabels(int bottom_index) const {
  return bottom_index == 1 ? LabelsBelow(dim_, false, 0) : LabelRange();
}

// ---- HingeLoss ----

Status HingeLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  RETURN_IF_ERROR(ExampleLabelLossLayer::LayerSetUpStatus(bottom, top));
  l2_ = layer_param_.hinge_loss_param().norm() == caffe::HingeLossParameter::L2;
  return Status::OK();
}

void HingeLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  ForwardExamples(bottom, top, [&](int i, int label_value) {
    return ops::HingeExampleLoss(x + static_cast<size_t>(i) * dim_, dim_, label_value, l2_);
  });
}

void HingeLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  CheckNoLabelGradient(propagate_down);
  if (!propagate_down[0]) return;
  const float* x = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  const float scale = top[0]->cpu_diff()[0] / static_cast<float>(num_);
  for (int i = 0; i < num_; ++i) {
    const int label_value = static_cast<int>(label[i]);
    for (int j = 0; j < dim_; ++j) {
      const int at = i * dim_ + j;
      dx[at] = ops::HingeGradient(ops::HingeMargin(x[at], j == label_value), j == label_value, l2_, scale);
    }
  }
}

// ---- MultinomialLogisticLoss ----

void MultinomialLogisticLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* prob = bottom[0]->cpu_data();
  ForwardExamples(bottom, top,
                  [&](int i, int label_value) { return ops::MultinomialLogisticLossAt(prob[i * dim_ + label_value]); });
}

void MultinomialLogisticLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                                const std::vector<Blob*>& bottom) {
  CheckNoLabelGradient(propagate_down);
  if (!propagate_down[0]) return;
  const float* prob = bottom[0]->cpu_data();
  const float* label = bottom[1]->cpu_data();
  float* diff = bottom[0]->mutable_cpu_diff();
  caffe_set(bottom[0]->count(), 0.0f, diff);
  const float scale = -top[0]->cpu_diff()[0] / static_cast<float>(num_);
  for (int i = 0; i < num_; ++i) {
    const int at = i * dim_ + static_cast<int>(label[i]);
    diff[at] = ops::MultinomialLogisticGradAt(prob[at], scale);
  }
}

// ---- InfogainLoss ----

Status InfogainLossLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  DefaultLossWeights(&layer_param_, top.size());
  RETURN_IF_ERROR(LossLayer::LayerSetUpStatus(bottom, top));
  const caffe::InfogainLossParameter& ip = layer_param_.infogain_loss_param();
  if (ip.axis() < -bottom[0]->num_axes() || ip.axis() >= bottom[0]->num_axes()) {
    return LayerError("infogain_loss_param.axis " + std::to_string(ip.axis()) + " is out of range for bottom shape " +
                      bottom[0]->shape_string());
  }
  const caffe::LossParameter& lp = layer_param_.loss_param();
  if (lp.has_normalize()) return LayerError("loss_param.normalize is deprecated; use loss_param.normalization");
  normalization_ = lp.normalization();
  has_ignore_label_ = lp.has_ignore_label();
  ignore_label_ = lp.ignore_label();

  caffe::LayerParameter softmax_param;
  softmax_param.set_name(layer_param_.name() + "/softmax");
  softmax_param.set_type("Softmax");
  softmax_param.mutable_softmax_param()->set_axis(ip.axis());
  softmax_ = std::make_unique<SoftmaxLayer>(softmax_param);
  softmax_->set_device(device());
  softmax_bottom_ = {bottom[0]};
  softmax_top_ = {&prob_};
  RETURN_IF_ERROR(softmax_->SetUp(softmax_bottom_, softmax_top_));

  const int axis = bottom[0]->CanonicalAxisIndex(ip.axis());
  const int classes = bottom[0]->shape(axis);
  if (bottom[0]->count(0, axis) * bottom[0]->count(axis + 1) != bottom[1]->count()) {
    return LayerError(
        "number of labels must match number of predictions; e.g., if infogain axis == 1 and prediction shape is "
        "(N, C, H, W), label count (number of labels) must be N*H*W, with integer values in {0, 1, ..., C-1}; got "
        "prediction shape " +
        bottom[0]->shape_string() + " and label shape " + bottom[1]->shape_string());
  }
  if (bottom.size() < 3) {
    if (!ip.has_source()) {
      return LayerError("the infogain matrix must be given: infogain_loss_param.source or a third bottom");
    }
    caffe::BlobProto proto;
    const Status read = ReadProtoFromBinaryFile(ip.source(), &proto);
    if (!read.ok()) return LayerError("infogain_loss_param.source " + ip.source() + ": " + read.message());
    const Status loaded = infogain_.FromProto(proto);
    if (!loaded.ok()) return LayerError("infogain_loss_param.source " + ip.source() + ": " + loaded.message());
  }
  const Blob& h = H(bottom);
  if (h.count() != classes * classes) {
    return LayerError("the infogain matrix " + (bottom.size() < 3 ? "from " + ip.source() : std::string("(bottom 2)")) +
                      " has shape " + h.shape_string() + ", expected " + std::to_string(classes) + " x " +
                      std::to_string(classes) + " entries (the classes along axis " + std::to_string(axis) + ")");
  }
  return Status::OK();
}

void InfogainLossLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LossLayer::Reshape(bottom, top);
  softmax_bottom_[0] = bottom[0];
  softmax_->Reshape(softmax_bottom_, softmax_top_);
  const int axis = bottom[0]->CanonicalAxisIndex(layer_param_.infogain_loss_param().axis());
  outer_num_ = bottom[0]->count(0, axis);
  inner_num_ = bottom[0]->count(axis + 1);
  num_labels_ = bottom[0]->shape(axis);
  LAYER_CHECK(outer_num_ * inner_num_ == bottom[1]->count())
      << "number of labels must match number of predictions; prediction shape " << bottom[0]->shape_string()
      << ", label shape " << bottom[1]->shape_string();
  LAYER_CHECK(H(bottom).count() == num_labels_ * num_labels_)
      << "the infogain matrix has shape " << H(bottom).shape_string() << ", expected " << num_labels_ << " x "
      << num_labels_ << " entries";
  sum_rows_H_.Reshape({num_labels_});
  if (top.size() >= 2) top[1]->ReshapeLike(*bottom[0]);
}

Layer::LabelRange InfogainLossLayer::AcceptedLabels(int bottom_index) const {
  return bottom_index == 1 ? LabelsBelow(num_labels_, has_ignore_label_, ignore_label_) : LabelRange();
}

float InfogainLossLayer::Normalizer(int valid_count) const {
  return ops::SoftmaxLossNormalizer(static_cast<int>(normalization_), outer_num_, inner_num_, valid_count);
}

void InfogainLossLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  softmax_->Forward(softmax_bottom_, softmax_top_);
  const float* prob = prob_.cpu_data();
  const float* h = H(bottom).cpu_data();
  const int dim = num_labels_ * inner_num_;
  const PositionLosses sum = SumPositionLosses(
      bottom[1]->cpu_data(), outer_num_, inner_num_, has_ignore_label_, ignore_label_, num_labels_,
      [&](int i, int j, int label_value) {
        return ops::InfogainPositionLoss(h + label_value * num_labels_, prob + i * dim + j, inner_num_, num_labels_);
      });
  if (sum.bad_position >= 0) {
    set_forward_error(StatusCode::kInvalidArgument, LabelOutOfRange(sum.bad_label, sum.bad_position, num_labels_));
    return;
  }
  valid_count_ = sum.count;
  top[0]->mutable_cpu_data()[0] = static_cast<float>(sum.loss) / Normalizer(sum.count);
  if (top.size() == 2) caffe_copy(prob_.count(), prob, top[1]->mutable_cpu_data());
}

void InfogainLossLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  CheckNoLabelGradient(propagate_down);
  if (!propagate_down[0]) return;
  const float* h = H(bottom).cpu_data();
  float* row_sums = sum_rows_H_.mutable_cpu_data();
  for (int r = 0; r < num_labels_; ++r) row_sums[r] = ops::InfogainRowSum(h + r * num_labels_, num_labels_);
  const float* prob = prob_.cpu_data();
  const float* label = bottom[1]->cpu_data();
  float* diff = bottom[0]->mutable_cpu_diff();
  const float scale = top[0]->cpu_diff()[0] / Normalizer(valid_count_);
  const int dim = num_labels_ * inner_num_;
  for (int i = 0; i < outer_num_; ++i) {
    for (int j = 0; j < inner_num_; ++j) {
      const int label_value = static_cast<int>(label[i * inner_num_ + j]);
      const bool ignored = has_ignore_label_ && label_value == ignore_label_;
      for (int l = 0; l < num_labels_; ++l) {
        const int at = i * dim + l * inner_num_ + j;
        diff[at] = ignored ? 0.0f
                           : ops::InfogainGradAt(prob[at], row_sums[label_value], h[label_value * num_labels_ + l],
                                                 false, scale);
      }
    }
  }
}

}  // namespace nereus

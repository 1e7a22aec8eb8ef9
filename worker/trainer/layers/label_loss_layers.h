// HingeLoss, MultinomialLogisticLoss and InfogainLoss, as Caffe's: losses of
// scores (or probabilities) against integer class labels. Each gives a
// scalar loss whose loss_weight defaults to 1.
//
// HingeLoss: scores x (N x D, D = the count of one example) and N labels;
//   the margins m(i, j) = max(0, 1 + x(i, j) * (j == label(i) ? -1 : 1)),
//   E = sum(m) / N (hinge_loss_param.norm L1, the default) or
//   sum(m^2) / N (L2). Gradient: +-[m > 0] / N (L1), +-2 m / N (L2), minus
//   at the label.
// MultinomialLogisticLoss: probabilities p (N x D) and N labels;
//   E = -sum(log(max(p(i, label(i)), 1e-20))) / N. Gradient
//   -1 / (N max(p, 1e-20)) at each label, 0 elsewhere.
// InfogainLoss: scores, labels and the infogain matrix H (C x C, C = the
//   classes along infogain_loss_param.axis): read once at set-up from
//   infogain_loss_param.source (a binary BlobProto), or given as a third
//   bottom (read on every pass, so it may change). The scores go through a
//   softmax along the axis (outer x C x inner, as SoftmaxWithLoss);
//   E = -sum over the positions of sum_l H(label, l) log(max(p_l, 1e-20)),
//   divided as loss_param.normalization says (VALID by default; FULL,
//   BATCH_SIZE, NONE as SoftmaxWithLoss's; never below 1).
//   loss_param.ignore_label skips positions; the deprecated normalize is
//   refused, as Caffe refuses it. Gradient of the scores:
//   (p_l * rowsum(H)(label) - H(label, l)) / normalizer. An optional second
//   top receives the probabilities (loss weight 0).
//
// No gradient reaches the labels (nor InfogainLoss's H): asking for one is
// fatal, naming the layer, as in Caffe, and a Net never asks
// (AllowForceBackward). A label outside [0, classes) (not the ignore_label)
// is a forward error naming the layer and the position (Caffe does not check
// them); the layers say which labels they take (AcceptedLabels), so a Data
// layer can name the record instead. They hold no state across iterations
// (InfogainLoss's H from a file is a constant, not a learned blob).
//
// GPU code (label_loss_layers.cu): the element functions below, which the
// CPU runs too; each position's (example's) loss summed on one thread in the
// CPU's order, the positions summed by one block in double (the CPU sums
// them in double, in order: the two agree within that summation's error),
// the gradients one thread per element (the same values as the CPU's). The
// labels are checked on the device; only {valid count, first bad position}
// is read back.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LABEL_LOSS_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LABEL_LOSS_LAYERS_H_

#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layers/loss_layers.h"
#include "worker/trainer/layers/softmax_layer.h"
#include "worker/trainer/math/math_ops.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Caffe's kLOG_THRESHOLD: probabilities are clamped to it before the log.
constexpr float kLogThreshold = 1e-20f;

// Whether a label (as Caffe reads it, truncated to an int) is a class.
NEREUS_HOST_DEVICE inline bool LabelInRange(int label, int classes) { return label >= 0 && label < classes; }

// HingeLoss: one margin max(0, 1 -+ x) (minus at the label).
NEREUS_HOST_DEVICE inline float HingeMargin(float x, bool is_label) { return Max(0.0f, 1.0f + (is_label ? -x : x)); }
// One margin's part of the loss: m (L1) or m^2 (L2).
NEREUS_HOST_DEVICE inline float HingeLossTerm(float margin, bool l2) { return l2 ? margin * margin : margin; }
// One score's gradient, scale = top_diff / N: sign(m) * scale (L1) or
// 2 m * scale (L2), negated at the label.
NEREUS_HOST_DEVICE inline float HingeGradient(float margin, bool is_label, bool l2, float scale) {
  const float signed_margin = is_label ? -margin : margin;
  return l2 ? signed_margin * (2.0f * scale) : Sign(signed_margin) * scale;
}
// One example's L1 or L2 sum over its d scores (in order).
NEREUS_HOST_DEVICE inline float HingeExampleLoss(const float* x, int d, int label, bool l2) {
  float sum = 0.0f;
  for (int j = 0; j < d; ++j) sum += HingeLossTerm(HingeMargin(x[j], j == label), l2);
  return sum;
}

// MultinomialLogisticLoss: one example's -log(max(p, 1e-20)).
NEREUS_HOST_DEVICE inline float MultinomialLogisticLossAt(float prob_of_label) {
  return -Log(Max(prob_of_label, kLogThreshold));
}
// The gradient at the label, scale = -top_diff / N: scale / max(p, 1e-20).
NEREUS_HOST_DEVICE inline float MultinomialLogisticGradAt(float prob_of_label, float scale) {
  return scale / Max(prob_of_label, kLogThreshold);
}

// InfogainLoss: one position's -sum_l h_row[l] log(max(prob[l * stride],
// 1e-20)) over num_labels classes, in order.
NEREUS_HOST_DEVICE inline float InfogainPositionLoss(const float* h_row, const float* prob, int stride,
                                                     int num_labels) {
  float loss = 0.0f;
  for (int l = 0; l < num_labels; ++l) loss -= h_row[l] * Log(Max(prob[l * stride], kLogThreshold));
  return loss;
}
// The sum of one row of H (n entries, in order).
NEREUS_HOST_DEVICE inline float InfogainRowSum(const float* h_row, int n) {
  float sum = 0.0f;
  for (int l = 0; l < n; ++l) sum += h_row[l];
  return sum;
}
// One score's gradient: (p * rowsum(H)(label) - H(label, l)) * scale, 0 at
// an ignored position; scale = top_diff / normalizer.
NEREUS_HOST_DEVICE inline float InfogainGradAt(float prob, float row_sum, float h, bool ignored, float scale) {
  return ignored ? 0.0f : (prob * row_sum - h) * scale;
}

}  // namespace ops

// What the three share: the loss top's weight (1 unless given, 0 for
// InfogainLoss's probabilities), and on the GPU the check of the labels.
class LabelLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;
  // Bottom 1 holds the labels; nothing else may get a forced gradient but
  // the scores.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

 protected:
  // Fatal, naming the layer, when a gradient is asked of any bottom but the
  // first (what Caffe does).
  void CheckNoLabelGradient(const std::vector<bool>& propagate_down) const;
#ifdef NEREUS_HAVE_CUDA
  // After a GPU forward whose reduction wrote {valid count, first bad
  // position or -1} to stats_: reads them back, records a bad label as the
  // device's error (naming the label and position) and returns the count.
  int ReadGpuLabelStats(const Blob& labels, int classes);
  std::shared_ptr<SyncedMemory> stats_;           // {valid, first bad}, on the device
  Blob position_loss_;                            // each position's (example's) loss
  std::shared_ptr<SyncedMemory> position_state_;  // 1 counted, 0 ignored, -1 bad
  void ReserveGpuBuffers(int positions);
#endif
};

// What HingeLoss and MultinomialLogisticLoss share: N examples of dim_
// scores (or probabilities) each, one label per example (N, or N x 1 x ...)
// in 0 .. dim_ - 1, and a CPU forward that sums one loss an example.
class ExampleLabelLossLayer : public LabelLossLayer {
 public:
  using LabelLossLayer::LabelLossLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  LabelRange AcceptedLabels(int bottom_index) const override;

 protected:
  // What bottom 0 holds, in the messages ("scores", "probabilities").
  virtual const char* scores_name() const = 0;
  // The CPU forward: top = the sum (in double, in example order) of
  // loss_of(i, label of example i) / N; a label out of range is the
  // forward's error.
  template <class LossOf>
  void ForwardExamples(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top, LossOf loss_of);

  int num_ = 0;
  int dim_ = 0;
};

template <class LossOf>
void ExampleLabelLossLayer::ForwardExamples(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                                            LossOf loss_of) {
  const float* label = bottom[1]->cpu_data();
  double loss = 0.0;
  for (int i = 0; i < num_; ++i) {
    const int label_value = static_cast<int>(label[i]);
    if (!ops::LabelInRange(label_value, dim_)) {
      set_forward_error(StatusCode::kInvalidArgument, LabelOutOfRange(label_value, i, dim_));
      return;
    }
    loss += loss_of(i, label_value);
  }
  top[0]->mutable_cpu_data()[0] = static_cast<float>(loss) / static_cast<float>(num_);
}

class HingeLossLayer : public ExampleLabelLossLayer {
 public:
  using ExampleLabelLossLayer::ExampleLabelLossLayer;
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "HingeLoss"; }

 protected:
  NEREUS_LAYER_PASSES;
  const char* scores_name() const override { return "scores"; }

 private:
  bool l2_ = false;
};

class MultinomialLogisticLossLayer : public ExampleLabelLossLayer {
 public:
  using ExampleLabelLossLayer::ExampleLabelLossLayer;
  const char* type() const override { return "MultinomialLogisticLoss"; }

 protected:
  NEREUS_LAYER_PASSES;
  const char* scores_name() const override { return "probabilities"; }
};

class InfogainLossLayer : public LabelLossLayer {
 public:
  using LabelLossLayer::LabelLossLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "InfogainLoss"; }
  int ExactNumBottomBlobs() const override { return -1; }
  int MinBottomBlobs() const override { return 2; }
  int MaxBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return -1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  LabelRange AcceptedLabels(int bottom_index) const override;

 protected:
  NEREUS_LAYER_PASSES;

 private:
  float Normalizer(int valid_count) const;
  const Blob& H(const std::vector<Blob*>& bottom) const { return bottom.size() == 3 ? *bottom[2] : infogain_; }

  std::unique_ptr<SoftmaxLayer> softmax_;
  Blob prob_;
  std::vector<Blob*> softmax_bottom_;
  std::vector<Blob*> softmax_top_;
  Blob infogain_;    // H from infogain_loss_param.source (2 bottoms)
  Blob sum_rows_H_;  // [C]: H's row sums, for backward
  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int outer_num_ = 0;
  int inner_num_ = 0;
  int num_labels_ = 0;
  int valid_count_ = 0;  // of the last forward
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LABEL_LOSS_LAYERS_H_

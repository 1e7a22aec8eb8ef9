// EuclideanLoss, SigmoidCrossEntropyLoss and SoftmaxWithLoss, as Caffe's.
// Each gives a scalar loss whose loss_weight defaults to 1 (Caffe's
// LossLayer; any loss_weight may be given, as for every layer).
//
// EuclideanLoss and SigmoidCrossEntropyLoss take two bottoms of the same
// count.
// EuclideanLoss: E = sum((a - b)^2) / (2 N), N = the bottoms' first
//   dimension. Both bottoms get gradients (+-(a - b) / N).
// SigmoidCrossEntropyLoss: bottom 0 scores x, bottom 1 targets t in [0, 1];
//   E = -sum(t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))) / normalizer,
//   computed without overflow. loss_param.ignore_label skips entries whose
//   target equals it; normalization as Caffe: given normalization, else the
//   deprecated normalize (true: VALID, false: BATCH_SIZE), else BATCH_SIZE.
//   The targets get no gradient.
// SoftmaxWithLoss: scores and integer labels (outer x inner of them; outer
//   and inner as Softmax's, softmax_layer.h). Outputs the mean (see
//   normalization) of -log(prob[label]) as a scalar; an optional second top
//   receives the probabilities. Labels equal to loss_param.ignore_label
//   contribute neither loss nor gradient. normalization: FULL divides by
//   outer*inner, VALID by the number of non-ignored labels, BATCH_SIZE by
//   outer, NONE by 1 (always at least 1); the deprecated normalize: false,
//   when normalization is not given, means BATCH_SIZE.
// All three have GPU code (loss_layers.cu): the element functions below,
// which the CPU runs too, and the loss summed on the device by one block (in
// double): no copy to the host (but SoftmaxWithLoss's, to check the labels).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LOSS_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LOSS_LAYERS_H_

#include <cfloat>
#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/layers/softmax_layer.h"
#include "worker/trainer/math/math_ops.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of the losses, shared by the CPU (loss_layers.cc)
// and the GPU kernels (loss_layers.cu).

// EuclideanLoss from the sum of squared differences and the batch size.
NEREUS_HOST_DEVICE inline float EuclideanLossValue(float sum_of_squares, int num) {
  return sum_of_squares / static_cast<float>(num) / 2.0f;
}
// The factor of a - b in bottom i's gradient: +-top_diff / num (sign +1 for
// bottom 0, -1 for bottom 1).
NEREUS_HOST_DEVICE inline float EuclideanLossGradScale(float sign, float top_diff, int num) {
  return sign * top_diff / static_cast<float>(num);
}

// Whether a SigmoidCrossEntropyLoss target is ignored.
NEREUS_HOST_DEVICE inline bool SigmoidCrossEntropyIgnored(float target, bool has_ignore_label, int ignore_label) {
  return has_ignore_label && static_cast<int>(target) == ignore_label;
}
// One entry's t log(s) + (1 - t) log(1 - s), s = sigmoid(x) (the negated
// loss), written so that exp never overflows:
// x (t - [x >= 0]) - log(1 + exp(x - 2 x [x >= 0])).
NEREUS_HOST_DEVICE inline float SigmoidCrossEntropyLogLikelihood(float x, float t) {
  const float positive = x >= 0.0f ? 1.0f : 0.0f;
  return x * (t - positive) - Log(1.0f + Exp(x - 2.0f * x * positive));
}
// One score's gradient, (sigmoid(x) - t) * scale (0 when ignored), scale =
// top_diff / normalizer.
NEREUS_HOST_DEVICE inline float SigmoidCrossEntropyGradient(float x, float t, bool ignored, float scale) {
  return ignored ? 0.0f : (SigmoidForward(x) - t) * scale;
}

// One position's loss, -log(prob of its label), the probability clamped at
// FLT_MIN.
NEREUS_HOST_DEVICE inline float SoftmaxLossAt(float prob_of_label) { return -Log(Max(prob_of_label, FLT_MIN)); }

// The loss's divisor (caffe::LossParameter::NormalizationMode as an int):
// FULL outer * inner, VALID the count of non-ignored labels, BATCH_SIZE
// outer, NONE 1; never below 1.
NEREUS_HOST_DEVICE inline float SoftmaxLossNormalizer(int mode, int outer, int inner, int valid_count) {
  float normalizer = 1.0f;
  switch (mode) {
    case 0:  // FULL
      normalizer = static_cast<float>(outer * inner);
      break;
    case 1:  // VALID
      normalizer = static_cast<float>(valid_count);
      break;
    case 2:  // BATCH_SIZE
      normalizer = static_cast<float>(outer);
      break;
    default:  // NONE
      normalizer = 1.0f;
      break;
  }
  return Max(1.0f, normalizer);
}

// One score's gradient: (prob - [c is the label]) * loss_weight / normalizer,
// 0 * that for an ignored label (Backward_cpu's copy, subtraction and scal).
NEREUS_HOST_DEVICE inline float SoftmaxLossGradAt(float prob, bool is_label, bool ignored, float scale) {
  const float d = ignored ? 0.0f : (is_label ? prob - 1.0f : prob);
  return d * scale;
}

}  // namespace ops

// The CPU forward loop of the softmax losses with a label a position
// (SoftmaxWithLoss, InfogainLoss): over the outer x inner positions, in
// order, those whose label is not ignore_label add loss_at(i, j, label) to
// loss (in double) and are counted. Stops at the first label outside
// 0 .. classes - 1 and names it (bad_position >= 0).
struct PositionLosses {
  double loss = 0.0;
  int count = 0;
  int bad_label = 0;
  int bad_position = -1;
};
template <class LossAt>
PositionLosses SumPositionLosses(const float* label, int outer, int inner, bool has_ignore_label, int ignore_label,
                                 int classes, LossAt loss_at) {
  PositionLosses sum;
  for (int i = 0; i < outer; ++i) {
    for (int j = 0; j < inner; ++j) {
      const int label_value = static_cast<int>(label[i * inner + j]);
      if (has_ignore_label && label_value == ignore_label) continue;
      if (label_value < 0 || label_value >= classes) {
        sum.bad_label = label_value;
        sum.bad_position = i * inner + j;
        return sum;
      }
      sum.loss += loss_at(i, j, label_value);
      ++sum.count;
    }
  }
  return sum;
}

// Caffe's LossLayer: two bottoms with the same first dimension, one scalar
// top (created when the prototxt omits it), loss_weight 1 by default.
class LossLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
};

class EuclideanLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "EuclideanLoss"; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  Blob diff_;  // a - b of the last forward
};

class SigmoidCrossEntropyLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  // Asking for the targets' gradient is fatal, naming the layer (as Caffe).
  NEREUS_LAYER_PASSES;

 private:
  float Normalizer(int valid_count) const;

  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::BATCH_SIZE;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int outer_num_ = 0;
  int inner_num_ = 0;
  float normalizer_ = 1.0f;  // of the last forward on the CPU
#ifdef NEREUS_HAVE_CUDA
  Blob gpu_normalizer_;  // [1]: of the last forward on the GPU, on the device
#endif
};

class SoftmaxWithLossLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "SoftmaxWithLoss"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AutoTopBlobs() const override { return true; }
  // The labels never get a gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }
  // Bottom 1: labels 0 .. classes - 1 and ignore_label.
  LabelRange AcceptedLabels(int bottom_index) const override;

 protected:
  // Writes the gradient of the scores; asking for the labels' gradient is a
  // configuration error (LOG(FATAL) naming the layer, as in Caffe).
  NEREUS_LAYER_PASSES;

 private:
  float Normalizer(int valid_count) const;

  std::unique_ptr<SoftmaxLayer> softmax_;
  Blob prob_;
  std::vector<Blob*> softmax_bottom_;
  std::vector<Blob*> softmax_top_;
  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::VALID;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int outer_num_ = 0;
  int inner_num_ = 0;
  int channels_ = 0;
  int valid_count_ = 0;  // of the last forward
#ifdef NEREUS_HAVE_CUDA
  Blob position_loss_;  // [outer * inner]: each position's loss (0 ignored)
  // Per position: 1 counted, 0 ignored, -1 label out of range.
  std::shared_ptr<SyncedMemory> position_state_;
  // {valid count, first position with a bad label or -1}, on the device.
  std::shared_ptr<SyncedMemory> stats_;
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LOSS_LAYERS_H_

// Softmax and SoftmaxWithLoss, as Caffe's.
//
// Softmax normalises along `axis` (softmax_param.axis, default 1): the bottom
// is outer x channels x inner with outer = count(0, axis), inner =
// count(axis + 1).
//
// SoftmaxWithLoss takes scores and integer labels (outer x inner of them) and
// outputs the mean (see normalization) of -log(prob[label]) as a scalar; an
// optional second top receives the probabilities. Labels equal to
// loss_param.ignore_label contribute neither loss nor gradient.
// normalization: FULL divides by outer*inner, VALID by the number of
// non-ignored labels, BATCH_SIZE by outer, NONE by 1 (always at least 1);
// the deprecated normalize: false, when normalization is not given, means
// BATCH_SIZE. Its loss weight defaults to 1.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYERS_H_

#include <cfloat>
#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Per-position arithmetic, shared by the CPU loops (softmax_layers.cc) and
// the GPU kernels (softmax_layers.cu). A position's channels are `inner`
// floats apart, starting at x (y, dy, dx).

// Softmax over the channels: subtract the maximum, exponentiate, normalise.
NEREUS_HOST_DEVICE inline void SoftmaxAt(const float* x, float* y, int channels, int inner) {
  float max_value = -FLT_MAX;
  for (int c = 0; c < channels; ++c) max_value = Max(max_value, x[c * inner]);
  float sum = 0.0f;
  for (int c = 0; c < channels; ++c) {
    y[c * inner] = Exp(x[c * inner] - max_value);
    sum += y[c * inner];
  }
  for (int c = 0; c < channels; ++c) y[c * inner] /= sum;
}

// dx_c = (dy_c - sum_k dy_k y_k) * y_c.
NEREUS_HOST_DEVICE inline void SoftmaxBackwardAt(const float* y, const float* dy, float* dx, int channels, int inner) {
  float dot = 0.0f;
  for (int c = 0; c < channels; ++c) dot += dy[c * inner] * y[c * inner];
  for (int c = 0; c < channels; ++c) dx[c * inner] = (dy[c * inner] - dot) * y[c * inner];
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

class SoftmaxLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  int outer_num_ = 0;
  int channels_ = 0;
  int inner_num_ = 0;
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

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYERS_H_

// More element-wise ("neuron") layers, with Caffe's formulas. One bottom, one
// top of the same shape; all may run in place (top == bottom).
//   AbsVal:    y = |x|
//   BNLL:      y = log(1 + exp(x))   (computed without overflow)
//   ELU:       y = x if x > 0, else alpha * (exp(x) - 1)
//   Exp:       y = base ^ (shift + scale * x)   (base -1 means e)
//   Log:       y = log_base(shift + scale * x)  (base -1 means e)
//   Power:     y = (shift + scale * x) ^ power
//   Threshold: y = 1 if x > threshold, else 0   (no gradient, as in Caffe)
//   PReLU:     y = max(x, 0) + a_c * min(x, 0), a learned per channel
//              (axis 1), or one a for all when channel_shared; a starts at
//              0.25 unless prelu_param.filler says otherwise.
// All but PReLU are ElementLayers (neuron_layers.h) of the Ops below, whose
// element functions the CPU loops and the GPU kernels (neuron_layers.cu) both
// run; PReLU's GPU code is elementwise_layers.cu. A layer that keeps its
// input for backward when in place keeps it in a Blob, on the device it runs
// on.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_ELEMENTWISE_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_ELEMENTWISE_LAYERS_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of these layers, shared by the CPU loops
// (elementwise_layers.cc) and the GPU kernels (elementwise_layers.cu).
// PReLU's forward and backward are ReLU's (neuron_layers.h) with the
// channel's slope.

NEREUS_HOST_DEVICE inline float AbsValBackward(float top_diff, float x) { return top_diff * Sign(x); }

// Caffe's: exp() of more would overflow.
constexpr float kBNLLThreshold = 50.0f;
NEREUS_HOST_DEVICE inline float BNLLForward(float x) { return x > 0.0f ? x + Log(1.0f + Exp(-x)) : Log(1.0f + Exp(x)); }
NEREUS_HOST_DEVICE inline float BNLLBackward(float top_diff, float x) {
  const float e = Exp(Min(x, kBNLLThreshold));
  return top_diff * e / (e + 1.0f);
}

NEREUS_HOST_DEVICE inline float ELUForward(float x, float alpha) {
  return Max(x, 0.0f) + alpha * (Exp(Min(x, 0.0f)) - 1.0f);
}
// `x` the input (or, in place, the output: the same sign), `y` the output.
NEREUS_HOST_DEVICE inline float ELUBackward(float top_diff, float x, float y, float alpha) {
  return x > 0.0f ? top_diff : top_diff * (y + alpha);
}

// inner_scale = log(base) * scale, outer_scale = base ^ shift.
NEREUS_HOST_DEVICE inline float ExpForward(float x, float inner_scale, float outer_scale) {
  const float v = Exp(inner_scale == 1.0f ? x : inner_scale * x);
  return outer_scale == 1.0f ? v : outer_scale * v;
}
NEREUS_HOST_DEVICE inline float ExpBackward(float top_diff, float y, float inner_scale) {
  const float d = top_diff * y;
  return inner_scale == 1.0f ? d : d * inner_scale;
}

// base_scale = 1 / ln(base).
NEREUS_HOST_DEVICE inline float LogForward(float x, float scale, float shift, float base_scale) {
  const float v = Log(scale * x + shift);
  return base_scale == 1.0f ? v : v * base_scale;
}
NEREUS_HOST_DEVICE inline float LogBackward(float top_diff, float x, float scale, float shift, float base_scale) {
  return top_diff * (scale * base_scale) / (scale * x + shift);
}

// (shift + scale * x) ^ power; the layer handles scale * power == 0 (a
// constant output) itself.
NEREUS_HOST_DEVICE inline float PowerForward(float x, float power, float scale, float shift) {
  const float base = scale * x + shift;
  return power == 1.0f ? base : Pow(base, power);
}
// top_diff * power * scale * (shift + scale * x) ^ (power - 1).
NEREUS_HOST_DEVICE inline float PowerBackward(float top_diff, float x, float power, float scale, float shift) {
  const float diff_scale = power * scale;
  float d;
  if (diff_scale == 0.0f) {
    d = 0.0f;
  } else if (power == 1.0f) {
    d = diff_scale;
  } else if (power == 2.0f) {
    d = diff_scale * (scale * x + shift);
  } else {
    d = diff_scale * Pow(scale * x + shift, power - 1.0f);
  }
  return top_diff * d;
}

NEREUS_HOST_DEVICE inline float ThresholdForward(float x, float threshold) { return x > threshold ? 1.0f : 0.0f; }

// The slope that element i uses: its channel's (axis 1 of num x channels x
// dim), or the one shared slope.
NEREUS_HOST_DEVICE inline int PReLUChannel(int i, int channels, int dim, bool channel_shared) {
  return channel_shared ? 0 : (i / dim) % channels;
}
// The gradient of slope c: `acc` (the slope's gradient so far) plus, one by
// one in increasing element order, top_diff * x of the elements of channel c
// (of every channel when shared) with x <= 0.
NEREUS_HOST_DEVICE inline float PReLUSlopeGradient(const float* top_diff, const float* x, int c, int num, int channels,
                                                   int dim, bool channel_shared, float acc) {
  const int first = channel_shared ? 0 : c;
  const int last = channel_shared ? channels : c + 1;
  for (int n = 0; n < num; ++n) {
    for (int ch = first; ch < last; ++ch) {
      const int base = (n * channels + ch) * dim;
      for (int s = 0; s < dim; ++s) acc += top_diff[base + s] * x[base + s] * (x[base + s] <= 0.0f ? 1.0f : 0.0f);
    }
  }
  return acc;
}

struct AbsValOp : ElementOp {
  static constexpr const char* kType = "AbsVal";
  static constexpr bool kInPlace = false;  // Needs the input's sign (Caffe refuses it too).
  NEREUS_HOST_DEVICE float Forward(float x) const { return Abs(x); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return AbsValBackward(dy, x); }
};

struct BNLLOp : ElementOp {
  static constexpr const char* kType = "BNLL";
  static constexpr bool kSavesInput = true;
  NEREUS_HOST_DEVICE float Forward(float x) const { return BNLLForward(x); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return BNLLBackward(dy, x); }
};

// In place the bottom holds y, whose sign is x's (alpha > 0), as in Caffe.
struct ELUOp : ElementOp {
  static constexpr const char* kType = "ELU";
  Status SetUp(const caffe::LayerParameter& param) {
    alpha = param.elu_param().alpha();
    return Status::OK();
  }
  NEREUS_HOST_DEVICE float Forward(float x) const { return ELUForward(x, alpha); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return ELUBackward(dy, x, y, alpha); }
  float alpha = 1.0f;
};

struct ExpOp : ElementOp {
  static constexpr const char* kType = "Exp";
  Status SetUp(const caffe::LayerParameter& param);
  NEREUS_HOST_DEVICE float Forward(float x) const { return ExpForward(x, inner_scale, outer_scale); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return ExpBackward(dy, y, inner_scale); }
  float inner_scale = 1.0f;  // log(base) * scale
  float outer_scale = 1.0f;  // base ^ shift
};

struct LogOp : ElementOp {
  static constexpr const char* kType = "Log";
  static constexpr bool kSavesInput = true;
  Status SetUp(const caffe::LayerParameter& param);
  NEREUS_HOST_DEVICE float Forward(float x) const { return LogForward(x, input_scale, input_shift, base_scale); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const {
    return LogBackward(dy, x, input_scale, input_shift, base_scale);
  }
  float base_scale = 1.0f;  // 1 / ln(base)
  float input_scale = 1.0f;
  float input_shift = 0.0f;
};

struct PowerOp : ElementOp {
  static constexpr const char* kType = "Power";
  static constexpr bool kSavesInput = true;
  Status SetUp(const caffe::LayerParameter& param);
  // The output does not depend on the input when scale * power == 0.
  bool Constant(float* value) const;
  NEREUS_HOST_DEVICE float Forward(float x) const { return PowerForward(x, power, scale, shift); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const {
    return PowerBackward(dy, x, power, scale, shift);
  }
  float power = 1.0f;
  float scale = 1.0f;
  float shift = 0.0f;
};

// No gradient, as in Caffe.
struct ThresholdOp : ElementOp {
  static constexpr const char* kType = "Threshold";
  static constexpr bool kHasGradient = false;
  Status SetUp(const caffe::LayerParameter& param) {
    threshold = param.threshold_param().threshold();
    return Status::OK();
  }
  NEREUS_HOST_DEVICE float Forward(float x) const { return ThresholdForward(x, threshold); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return 0.0f; }
  float threshold = 0.0f;
};

}  // namespace ops

using AbsValLayer = ElementLayer<ops::AbsValOp>;
using BNLLLayer = ElementLayer<ops::BNLLOp>;
using ELULayer = ElementLayer<ops::ELUOp>;
using ExpLayer = ElementLayer<ops::ExpOp>;
using LogLayer = ElementLayer<ops::LogOp>;
using PowerLayer = ElementLayer<ops::PowerOp>;
using ThresholdLayer = ElementLayer<ops::ThresholdOp>;

class PReLULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "PReLU"; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  bool channel_shared_ = false;
  Blob bottom_copy_;  // the input, kept for backward when in place
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_ELEMENTWISE_LAYERS_H_

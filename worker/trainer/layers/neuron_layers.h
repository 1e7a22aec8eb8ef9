// The element-wise ("neuron") layers, with Caffe's formulas: one bottom, one
// top of the same shape; all but AbsVal may run in place (top == bottom), as
// in Caffe.
//   ReLU:      y = max(x, 0) + negative_slope * min(x, 0)
//   Sigmoid:   y = 1 / (1 + exp(-x))
//   TanH:      y = tanh(x)
//   Dropout:   TRAIN: y = x * mask * scale, mask ~ Bernoulli(1 - dropout_ratio),
//              scale = 1 / (1 - dropout_ratio) (1 when scale_train is false);
//              TEST: y = x (times 1 - dropout_ratio when scale_train is false).
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
//   Clip:      y = max(min, min(x, max)); the gradient passes where
//              min <= x <= max (both ends included, as Caffe's).
//   Swish:     y = x * sigmoid(beta * x); dy/dx = beta y + s (1 - beta y),
//              s = sigmoid(beta * x).
// All but Dropout and PReLU are ElementLayers: an element function each way
// (an Op below), run by the CPU loops below and by the GPU kernels of
// neuron_layers.cu. A layer that keeps its input for backward when in place
// keeps it in a Blob, on the device it runs on.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/math/math_ops.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of these layers, shared by the CPU loops (below and
// neuron_layers.cc) and the GPU kernels (neuron_layers.cu).
NEREUS_HOST_DEVICE inline float ReLUForward(float x, float slope) { return Max(x, 0.0f) + slope * Min(x, 0.0f); }
// `x` is the input (or, in place, the output: same sign for slope >= 0).
NEREUS_HOST_DEVICE inline float ReLUBackward(float top_diff, float x, float slope) {
  return top_diff * ((x > 0.0f ? 1.0f : 0.0f) + slope * (x <= 0.0f ? 1.0f : 0.0f));
}
// 0.5 tanh(0.5 x) + 0.5 is the logistic function without overflow.
NEREUS_HOST_DEVICE inline float SigmoidForward(float x) { return 0.5f * Tanh(0.5f * x) + 0.5f; }
NEREUS_HOST_DEVICE inline float SigmoidBackward(float top_diff, float y) { return top_diff * y * (1.0f - y); }
NEREUS_HOST_DEVICE inline float TanHBackward(float top_diff, float y) { return top_diff * (1.0f - y * y); }
// A unit is kept when its 32-bit draw exceeds the threshold.
NEREUS_HOST_DEVICE inline unsigned int DropoutKeep(uint32_t draw, uint32_t threshold) {
  return draw > threshold ? 1u : 0u;
}
// Forward (x the input) and backward (x the top's gradient) alike.
NEREUS_HOST_DEVICE inline float DropoutApply(float x, unsigned int keep, float scale) {
  return x * static_cast<float>(keep) * scale;
}

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

NEREUS_HOST_DEVICE inline float ClipForward(float x, float min, float max) { return Max(min, Min(x, max)); }
NEREUS_HOST_DEVICE inline float ClipBackward(float top_diff, float x, float min, float max) {
  return top_diff * (x >= min && x <= max ? 1.0f : 0.0f);
}

// Caffe's Swish: the sigmoid of beta * x (its internal Sigmoid layer's
// input, scaled first), then x times it.
NEREUS_HOST_DEVICE inline float SwishForward(float x, float beta) { return x * SigmoidForward(beta * x); }
// `x` the input, `y` the output.
NEREUS_HOST_DEVICE inline float SwishBackward(float top_diff, float x, float y, float beta) {
  const float s = SigmoidForward(beta * x);
  return top_diff * (beta * y + s * (1.0f - beta * y));
}

// PReLU's forward and backward are ReLU's (above) with the channel's slope.
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

// An ElementLayer's Op derives from this (its defaults) and adds kType (the
// layer type), NEREUS_HOST_DEVICE Forward(x) and Backward(dy, x, y), and, as
// it needs, SetUp (reads and checks the layer's parameters; an error names
// the field) and Constant.
struct ElementOp {
  static constexpr bool kInPlace = true;      // May run in place.
  static constexpr bool kSavesInput = false;  // Keeps its input for backward when in place.
  static constexpr bool kHasGradient = true;  // Else asking for a gradient is refused.
  Status SetUp(const caffe::LayerParameter& param) { return Status::OK(); }
  // True, with the value, when the output does not depend on the input.
  bool Constant(float* value) const { return false; }
};

struct ReLUOp : ElementOp {
  static constexpr const char* kType = "ReLU";
  Status SetUp(const caffe::LayerParameter& param) {
    slope = param.relu_param().negative_slope();
    return Status::OK();
  }
  NEREUS_HOST_DEVICE float Forward(float x) const { return ReLUForward(x, slope); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return ReLUBackward(dy, x, slope); }
  float slope = 0.0f;
};

struct SigmoidOp : ElementOp {
  static constexpr const char* kType = "Sigmoid";
  NEREUS_HOST_DEVICE float Forward(float x) const { return SigmoidForward(x); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return SigmoidBackward(dy, y); }
};

struct TanHOp : ElementOp {
  static constexpr const char* kType = "TanH";
  NEREUS_HOST_DEVICE float Forward(float x) const { return Tanh(x); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return TanHBackward(dy, y); }
};

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

// In place the input is kept for backward: Caffe's Clip reads its bottom,
// which in place holds the clipped output (always inside [min, max]), and so
// passes the gradient of clipped elements too; this gives the true gradient
// (0 there) in place as out of place.
struct ClipOp : ElementOp {
  static constexpr const char* kType = "Clip";
  static constexpr bool kSavesInput = true;
  Status SetUp(const caffe::LayerParameter& param);
  NEREUS_HOST_DEVICE float Forward(float x) const { return ClipForward(x, min, max); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return ClipBackward(dy, x, min, max); }
  float min = 0.0f;
  float max = 0.0f;
};

// Caffe keeps sigmoid(beta x) from the forward; this recomputes it from the
// input (kept in place), the same bits.
struct SwishOp : ElementOp {
  static constexpr const char* kType = "Swish";
  static constexpr bool kSavesInput = true;
  Status SetUp(const caffe::LayerParameter& param) {
    beta = param.swish_param().beta();
    return Status::OK();
  }
  NEREUS_HOST_DEVICE float Forward(float x) const { return SwishForward(x, beta); }
  NEREUS_HOST_DEVICE float Backward(float dy, float x, float y) const { return SwishBackward(dy, x, y, beta); }
  float beta = 1.0f;
};

}  // namespace ops

// Shape handling shared by the element-wise layers.
class NeuronLayer : public Layer {
 public:
  using Layer::Layer;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  // For a layer whose backward reads its input: in place, keeps a copy of
  // the bottom in *copy, on the side `math` names (CpuMath, GpuMath).
  template <class Math>
  static void SaveInputIfInPlace(const Math& math, const Blob& bottom, const Blob& top, Blob* copy) {
    if (&bottom != &top) return;
    copy->ReshapeLike(bottom);
    math.copy(bottom.count(), math.data(bottom), math.mutable_data(copy));
  }
  // The input the forward saw: the bottom, or (in place) that copy.
  static const Blob& SavedInput(const Blob& bottom, const Blob& top, const Blob& copy) {
    return &bottom == &top ? copy : bottom;
  }
};

// A neuron layer computed one element at a time by its Op, on the CPU (the
// loops below) and the GPU (one thread an element, neuron_layers.cu):
//   forward:  y = op.Forward(x), or op.Constant's value;
//   backward: dx = op.Backward(dy, x, y), x the input, y the output. In place
//             the bottom holds y: x is then the copy the forward kept when
//             Op::kSavesInput, else y (ReLU and ELU read only x's sign, which
//             y shares, as in Caffe).
template <class Op>
class ElementLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    if (!Op::kInPlace && bottom[0] == top[0]) {
      return LayerError(std::string(Op::kType) + " does not allow in-place computation");
    }
    const Status set_up = op_.SetUp(layer_param_);
    return set_up.ok() ? set_up : LayerError(set_up.message());
  }
  const char* type() const override { return Op::kType; }
  // Without a gradient (Threshold), a net that needs the bottom's gradient
  // is refused when built (Net), where Caffe dies in Backward.
  bool AllowForceBackward(int bottom_index) const override { return Op::kHasGradient; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // Whether backward has work; asking an Op without a gradient for one is
  // fatal, naming the layer (our bug: the Net refuses such a net).
  bool WantsGradient(const std::vector<bool>& propagate_down) const {
    LAYER_CHECK(Op::kHasGradient || !propagate_down[0]) << Op::kType << " has no gradient; set propagate_down: false";
    return propagate_down[0];
  }
  // The input the forward saw (the copy it kept, or the bottom).
  const Blob& Input(const Blob& bottom, const Blob& top) const {
    return Op::kSavesInput ? SavedInput(bottom, top, bottom_copy_) : bottom;
  }

  Op op_;
  Blob bottom_copy_;  // Op::kSavesInput: the input, kept for backward when in place.
};

template <class Op>
void ElementLayer<Op>::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (Op::kSavesInput) SaveInputIfInPlace(CpuMath(), *bottom[0], *top[0], &bottom_copy_);
  const int count = bottom[0]->count();
  float constant = 0.0f;
  if (op_.Constant(&constant)) {
    caffe_set(count, constant, top[0]->mutable_cpu_data());
    return;
  }
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  for (int i = 0; i < count; ++i) out[i] = op_.Forward(in[i]);
}

template <class Op>
void ElementLayer<Op>::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  if (!WantsGradient(propagate_down)) return;
  const float* x = Input(*bottom[0], *top[0]).cpu_data();
  const float* y = top[0]->cpu_data();
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const int count = bottom[0]->count();
  for (int i = 0; i < count; ++i) bottom_diff[i] = op_.Backward(top_diff[i], x[i], y[i]);
}

using ReLULayer = ElementLayer<ops::ReLUOp>;
using SigmoidLayer = ElementLayer<ops::SigmoidOp>;
using TanHLayer = ElementLayer<ops::TanHOp>;
using AbsValLayer = ElementLayer<ops::AbsValOp>;
using BNLLLayer = ElementLayer<ops::BNLLOp>;
using ELULayer = ElementLayer<ops::ELUOp>;
using ExpLayer = ElementLayer<ops::ExpOp>;
using LogLayer = ElementLayer<ops::LogOp>;
using PowerLayer = ElementLayer<ops::PowerOp>;
using ThresholdLayer = ElementLayer<ops::ThresholdOp>;
using ClipLayer = ElementLayer<ops::ClipOp>;
using SwishLayer = ElementLayer<ops::SwishOp>;

// Dropout draws its masks from its own engine, seeded at set-up from the
// Net's engine (rng()), so masks are reproducible for a given solver
// random_seed and do not depend on what other layers draw during training.
// On a GPU the draws come from the device's cuRAND generator (seeded with
// the solver's random_seed): other masks than the CPU's, the same rule.
class DropoutLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Dropout"; }

  // Reseeds the mask engine (tests use it to repeat a mask).
  void set_seed(uint32_t seed) { mask_rng_.seed(seed); }
  // The mask of the last TRAIN forward (1 keeps, 0 drops), copied to the
  // host.
  std::vector<unsigned int> mask() const;

 protected:
  NEREUS_LAYER_PASSES;

 private:
  float threshold_ = 0.5f;  // dropout_ratio
  float scale_ = 2.0f;      // 1 / (1 - threshold_)
  bool scale_train_ = true;
  uint32_t uint_threshold_ = 0;         // a unit is dropped when its draw is <= this
  std::mt19937 mask_rng_;               // The CPU's draws; on a GPU the device's cuRAND generator draws.
  std::shared_ptr<SyncedMemory> mask_;  // count unsigned ints
  int mask_count_ = 0;
};

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

#endif  // NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_

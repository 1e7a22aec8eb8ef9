// Element-wise ("neuron") layers: one bottom, one top of the same shape,
// computable in place (top == bottom), as in Caffe.
//   ReLU:    y = max(x, 0) + negative_slope * min(x, 0)
//   Sigmoid: y = 1 / (1 + exp(-x))
//   TanH:    y = tanh(x)
//   Dropout: TRAIN: y = x * mask * scale, mask ~ Bernoulli(1 - dropout_ratio),
//            scale = 1 / (1 - dropout_ratio) (1 when scale_train is false);
//            TEST: y = x (times 1 - dropout_ratio when scale_train is false).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "common/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math_ops.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of these layers, shared by the CPU loops
// (neuron_layers.cc) and the GPU kernels (neuron_layers.cu).
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

}  // namespace ops

// Shape handling shared by the element-wise layers.
class NeuronLayer : public Layer {
 public:
  using Layer::Layer;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  // The CPU loops of the element-wise layers: top = f(x) for each element x
  // of the bottom, and the bottom's diff = g(dy, x) for each element dy of
  // the top's diff and x of `x` (the input or the output, as g needs).
  template <typename F>
  static void ForwardEach(const Blob& bottom, Blob* top, F f) {
    const float* in = bottom.cpu_data();
    float* out = top->mutable_cpu_data();
    const int count = bottom.count();
    for (int i = 0; i < count; ++i) out[i] = f(in[i]);
  }
  template <typename G>
  static void BackwardEach(const Blob& top, const float* x, Blob* bottom, G g) {
    const float* top_diff = top.cpu_diff();
    float* bottom_diff = bottom->mutable_cpu_diff();
    const int count = bottom->count();
    for (int i = 0; i < count; ++i) bottom_diff[i] = g(top_diff[i], x[i]);
  }
};

class ReLULayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "ReLU"; }

 protected:
  NEREUS_LAYER_PASSES;
};

class SigmoidLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Sigmoid"; }

 protected:
  // Uses the top data (valid in place).
  NEREUS_LAYER_PASSES;
};

class TanHLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "TanH"; }

 protected:
  NEREUS_LAYER_PASSES;
};

// Dropout draws its masks from its own engine, seeded at set-up from the
// Net's engine (rng()), so masks are reproducible for a given solver
// random_seed and do not depend on what other layers draw during training.
// On a GPU the draws come from the device's cuRAND generator (seeded with
// the solver's random_seed): other masks than the CPU's, the same rule.
class DropoutLayer : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
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

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_

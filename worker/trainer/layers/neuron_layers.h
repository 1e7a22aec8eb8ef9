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
#include <random>
#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

// Shape handling shared by the element-wise layers.
class NeuronLayer : public Layer {
 public:
  explicit NeuronLayer(const caffe::LayerParameter& param) : Layer(param) {}
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
};

class ReLULayer : public NeuronLayer {
 public:
  explicit ReLULayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "ReLU"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

class SigmoidLayer : public NeuronLayer {
 public:
  explicit SigmoidLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "Sigmoid"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Uses the top data (valid in place).
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

class TanHLayer : public NeuronLayer {
 public:
  explicit TanHLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "TanH"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

// Dropout draws its masks from its own engine, seeded at set-up from the
// Net's engine (rng()), so masks are reproducible for a given solver
// random_seed and do not depend on what other layers draw during training.
class DropoutLayer : public NeuronLayer {
 public:
  explicit DropoutLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "Dropout"; }

  // Reseeds the mask engine (tests use it to repeat a mask).
  void set_seed(uint32_t seed) { mask_rng_.seed(seed); }
  // The mask of the last TRAIN forward (1 keeps, 0 drops).
  const std::vector<unsigned int>& mask() const { return mask_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  float threshold_ = 0.5f;  // dropout_ratio
  float scale_ = 2.0f;      // 1 / (1 - threshold_)
  bool scale_train_ = true;
  uint32_t uint_threshold_ = 0;  // a unit is dropped when its draw is <= this
  std::mt19937 mask_rng_;
  std::vector<unsigned int> mask_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_NEURON_LAYERS_H_

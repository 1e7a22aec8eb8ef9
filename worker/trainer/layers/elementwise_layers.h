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
#ifndef NEREUS_WORKER_TRAINER_LAYERS_ELEMENTWISE_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_ELEMENTWISE_LAYERS_H_

#include <vector>

#include "worker/trainer/layers/neuron_layers.h"

namespace nereus {

class AbsValLayer : public NeuronLayer {
 public:
  explicit AbsValLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "AbsVal"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Needs the input's sign: not in place (Caffe refuses it too).
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
};

class BNLLLayer : public NeuronLayer {
 public:
  explicit BNLLLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "BNLL"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // In place, keeps a copy of the input for backward.
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  std::vector<float> bottom_copy_;
};

class ELULayer : public NeuronLayer {
 public:
  explicit ELULayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "ELU"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // In place the bottom holds y, whose sign is x's (alpha > 0), as in Caffe.
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

class ExpLayer : public NeuronLayer {
 public:
  explicit ExpLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "Exp"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  float inner_scale_ = 1.0f;  // log(base) * scale
  float outer_scale_ = 1.0f;  // base ^ shift
};

class LogLayer : public NeuronLayer {
 public:
  explicit LogLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "Log"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // In place, keeps a copy of the input for backward.
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  float base_scale_ = 1.0f;  // 1 / ln(base)
  float input_scale_ = 1.0f;
  float input_shift_ = 0.0f;
  std::vector<float> bottom_copy_;
};

class PowerLayer : public NeuronLayer {
 public:
  explicit PowerLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "Power"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // In place, keeps a copy of the input for backward.
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  float power_ = 1.0f;
  float scale_ = 1.0f;
  float shift_ = 0.0f;
  std::vector<float> bottom_copy_;
};

class ThresholdLayer : public NeuronLayer {
 public:
  explicit ThresholdLayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  const char* type() const override { return "Threshold"; }
  // Not differentiable: a net that needs its bottom's gradient is refused
  // when built (Net), where Caffe dies in Backward.
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Asking for a gradient is fatal, naming the layer (our bug: the Net
  // refuses such a net).
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

class PReLULayer : public NeuronLayer {
 public:
  explicit PReLULayer(const caffe::LayerParameter& param) : NeuronLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "PReLU"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  bool channel_shared_ = false;
  std::vector<float> bottom_copy_;  // the input, kept for backward when in place
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_ELEMENTWISE_LAYERS_H_

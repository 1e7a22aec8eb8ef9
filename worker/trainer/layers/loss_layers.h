// EuclideanLoss and SigmoidCrossEntropyLoss, as Caffe's. Both take two
// bottoms of the same count and give a scalar loss whose loss_weight defaults
// to 1 (Caffe's LossLayer; any loss_weight may be given, as for every layer).
//
// EuclideanLoss: E = sum((a - b)^2) / (2 N), N = the bottoms' first
//   dimension. Both bottoms get gradients (+-(a - b) / N).
// SigmoidCrossEntropyLoss: bottom 0 scores x, bottom 1 targets t in [0, 1];
//   E = -sum(t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))) / normalizer,
//   computed without overflow. loss_param.ignore_label skips entries whose
//   target equals it; normalization as Caffe: given normalization, else the
//   deprecated normalize (true: VALID, false: BATCH_SIZE), else BATCH_SIZE.
//   The targets get no gradient.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LOSS_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LOSS_LAYERS_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

// Caffe's LossLayer: two bottoms with the same first dimension, one scalar
// top (created when the prototxt omits it), loss_weight 1 by default.
class LossLayer : public Layer {
 public:
  explicit LossLayer(const caffe::LayerParameter& param) : Layer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AutoTopBlobs() const override { return true; }
};

class EuclideanLossLayer : public LossLayer {
 public:
  explicit EuclideanLossLayer(const caffe::LayerParameter& param) : LossLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "EuclideanLoss"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  std::vector<float> diff_;  // a - b of the last forward
};

class SigmoidCrossEntropyLossLayer : public LossLayer {
 public:
  explicit SigmoidCrossEntropyLossLayer(const caffe::LayerParameter& param) : LossLayer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "SigmoidCrossEntropyLoss"; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Asking for the targets' gradient is fatal, naming the layer (as Caffe).
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  float Normalizer(int valid_count) const;

  caffe::LossParameter::NormalizationMode normalization_ = caffe::LossParameter::BATCH_SIZE;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int outer_num_ = 0;
  int inner_num_ = 0;
  float normalizer_ = 1.0f;  // of the last forward
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LOSS_LAYERS_H_

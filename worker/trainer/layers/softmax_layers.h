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

#include <memory>
#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class SoftmaxLayer : public Layer {
 public:
  explicit SoftmaxLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int outer_num_ = 0;
  int channels_ = 0;
  int inner_num_ = 0;
};

class SoftmaxWithLossLayer : public Layer {
 public:
  explicit SoftmaxWithLossLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

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
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Writes the gradient of the scores; asking for the labels' gradient is a
  // configuration error (LOG(FATAL) naming the layer, as in Caffe).
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

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
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYERS_H_

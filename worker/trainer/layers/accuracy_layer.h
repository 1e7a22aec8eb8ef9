// Accuracy: Caffe's AccuracyLayer. Bottoms: predictions (outer x classes x
// inner along `axis`) and integer labels (outer*inner of them). Top 0: the
// fraction of non-ignored labels whose class scores among the top_k (ties
// count against the label: a class with a score >= the label's counts as
// better). Optional top 1: per-class accuracy [classes]. No backward.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_ACCURACY_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_ACCURACY_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class AccuracyLayer : public Layer {
 public:
  explicit AccuracyLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  // Bottom 1: labels 0 .. classes - 1 and ignore_label.
  LabelRange AcceptedLabels(int bottom_index) const override;

 protected:
  // A label outside [0, classes) (and not ignore_label) is a forward error
  // (Layer::forward_error) naming the layer, the label and its position.
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Accuracy has no gradient: asking for one is fatal (as in Caffe).
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  int top_k_ = 1;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int outer_num_ = 0;
  int inner_num_ = 0;
  int num_labels_ = 0;
  std::vector<int> per_class_count_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_ACCURACY_LAYER_H_

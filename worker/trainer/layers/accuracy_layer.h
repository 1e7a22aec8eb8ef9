// Accuracy: Caffe's AccuracyLayer. Bottoms: predictions (outer x classes x
// inner along `axis`) and integer labels (outer*inner of them). Top 0: the
// fraction of non-ignored labels whose class scores among the top_k (ties
// count against the label: a class with a score >= the label's counts as
// better). Optional top 1: per-class accuracy [classes]. No backward.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_ACCURACY_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_ACCURACY_LAYER_H_

#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Whether `label` is among the top_k scores of one position (its classes
// `inner` floats apart from `scores`), ties counting against it: the CPU's
// loop (accuracy_layer.cc) and the GPU's kernel (accuracy_layer.cu).
NEREUS_HOST_DEVICE inline bool AccuracyHit(const float* scores, int inner, int num_labels, int label, int top_k) {
  const float true_score = scores[label * inner];
  // The true class itself is counted once, hence -1.
  int num_better = -1;
  for (int k = 0; k < num_labels && num_better < top_k; ++k) num_better += scores[k * inner] >= true_score ? 1 : 0;
  return num_better < top_k;
}

}  // namespace ops

class AccuracyLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Accuracy"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool AllowForceBackward(int bottom_index) const override { return false; }
  // Bottom 1: labels 0 .. classes - 1 and ignore_label.
  LabelRange AcceptedLabels(int bottom_index) const override;

 protected:
  // A label outside [0, classes) (and not ignore_label) is a forward error
  // (Layer::forward_error) naming the layer, the label and its position; on a
  // GPU it is the error the Net returns (the same words).
  // Accuracy has no gradient: asking for one is fatal (as in Caffe).
  NEREUS_LAYER_PASSES;

 private:
  int top_k_ = 1;
  bool has_ignore_label_ = false;
  int ignore_label_ = 0;
  int outer_num_ = 0;
  int inner_num_ = 0;
  int num_labels_ = 0;
  std::vector<int> per_class_count_;
#ifdef NEREUS_HAVE_CUDA
  // Per position: 1 hit, 0 miss, -1 ignored, -2 label out of range.
  std::shared_ptr<SyncedMemory> position_state_;
  // Per class: labels seen, then hits ([2 * num_labels] ints).
  std::shared_ptr<SyncedMemory> class_counts_;
  // {first position with a bad label or -1}.
  std::shared_ptr<SyncedMemory> stats_;
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_ACCURACY_LAYER_H_

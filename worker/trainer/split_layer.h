// Caffe's SplitLayer: copies its bottom to every top (the tops share the
// bottom's data) and sums the tops' gradients into the bottom's. The Net
// inserts one after every blob consumed more than once (InsertSplits); a
// prototxt may also name it ("Split"). Not in place.
#ifndef NEREUS_WORKER_TRAINER_SPLIT_LAYER_H_
#define NEREUS_WORKER_TRAINER_SPLIT_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class SplitLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Split"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The bottom's gradient, the sum of the tops' in order, for the CPU or the
  // GPU (`math`: CpuMath, GpuMath, blob_math.h).
  template <class Math>
  static void SumTopDiffs(const Math& math, const std::vector<Blob*>& top, Blob* bottom) {
    const int count = bottom->count();
    float* bottom_diff = math.mutable_diff(bottom);
    if (top.size() == 1) {
      math.copy(count, math.diff(*top[0]), bottom_diff);
      return;
    }
    math.add(count, math.diff(*top[0]), math.diff(*top[1]), bottom_diff);
    for (size_t i = 2; i < top.size(); ++i) math.axpy(count, 1.0f, math.diff(*top[i]), bottom_diff);
  }
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_SPLIT_LAYER_H_

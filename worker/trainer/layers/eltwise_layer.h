// Eltwise (Caffe's EltwiseLayer): element-wise PROD, SUM (with one optional
// coefficient per bottom) or MAX of bottoms of identical shape. MAX routes
// each gradient to the bottom that supplied the maximum (on ties: bottom 1
// over bottom 0, then the earlier bottom; Caffe's order).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_ELTWISE_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_ELTWISE_LAYER_H_

#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Eltwise MAX, per element, shared by the CPU loops and the GPU kernels
// (eltwise_layer.cc and .cu): the first pair (ties go to bottom 1,
// as in Caffe), then each further bottom i when strictly greater.
NEREUS_HOST_DEVICE inline void EltwiseMaxFirst(float a, float b, float* top, int* index) {
  if (a > b) {
    *top = a;
    *index = 0;
  } else {
    *top = b;
    *index = 1;
  }
}
NEREUS_HOST_DEVICE inline void EltwiseMaxNext(float c, int i, float* top, int* index) {
  if (c > *top) {
    *top = c;
    *index = i;
  }
}
NEREUS_HOST_DEVICE inline float EltwiseMaxBackward(float top_diff, int index, int i) {
  return index == i ? top_diff : 0.0f;
}

}  // namespace ops

class EltwiseLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Eltwise"; }
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // SUM's and PROD's gradient of bottom i, for the CPU or the GPU
  // (`math`: CpuMath, GpuMath, blob_math.h).
  template <class Math>
  void BackwardSumProd(const Math& math, const std::vector<Blob*>& top, const std::vector<Blob*>& bottom,
                       size_t i) const;

  caffe::EltwiseParameter::EltwiseOp op_ = caffe::EltwiseParameter::SUM;
  std::vector<float> coeffs_;
  bool stable_prod_grad_ = true;
  std::shared_ptr<SyncedMemory> max_idx_;  // MAX: which bottom won, per element (ints)
  int max_idx_count_ = 0;
};

template <class Math>
void EltwiseLayer::BackwardSumProd(const Math& math, const std::vector<Blob*>& top, const std::vector<Blob*>& bottom,
                                   size_t i) const {
  const int count = top[0]->count();
  const float* top_diff = math.diff(*top[0]);
  float* bottom_diff = math.mutable_diff(bottom[i]);
  if (op_ == caffe::EltwiseParameter::SUM) {
    if (coeffs_[i] == 1.0f) {
      math.copy(count, top_diff, bottom_diff);
    } else {
      math.scale(count, coeffs_[i], top_diff, bottom_diff);
    }
    return;
  }
  if (stable_prod_grad_) {
    // Product of the other bottoms, without dividing by this one.
    bool initialized = false;
    for (size_t j = 0; j < bottom.size(); ++j) {
      if (j == i) continue;
      if (!initialized) {
        math.copy(count, math.data(*bottom[j]), bottom_diff);
        initialized = true;
      } else {
        math.mul(count, math.data(*bottom[j]), bottom_diff, bottom_diff);
      }
    }
  } else {
    math.div(count, math.data(*top[0]), math.data(*bottom[i]), bottom_diff);
  }
  math.mul(count, bottom_diff, top_diff, bottom_diff);
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_ELTWISE_LAYER_H_

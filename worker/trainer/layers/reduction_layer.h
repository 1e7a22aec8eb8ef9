// Reduction, as Caffe's: each item of the bottom (the axes before `axis`,
// default 0) reduced over all its remaining ("tail") axes to one value, by
// `operation`, then times `coeff` (default 1):
//   SUM:   sum x        ASUM: sum |x|
//   SUMSQ: sum x^2      MEAN: sum x / (the item's count)
// The top has the bottom's axes before `axis` (axis 0: a scalar, shape []).
// Backward: dx = dy * coeff times 1 (SUM), 1 / count (MEAN), sign(x)
// (ASUM: 0 at x = 0, as Caffe's caffe_cpu_sign) or 2 x (SUMSQ).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_REDUCTION_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_REDUCTION_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// Per-item and per-element arithmetic of Reduction, shared by the CPU loops
// (reduction_layer.cc) and the GPU kernels (reduction_layer.cu). `op` is a
// caffe::ReductionParameter::ReductionOp (the values below, checked against
// caffe.proto in reduction_layer.cc); `coeff` already divided by the item's
// count for MEAN.
constexpr int kReductionAsum = 2;
constexpr int kReductionSumsq = 3;
//
// One item's `dim` entries reduced in order, times coeff.
NEREUS_HOST_DEVICE inline float ReduceItem(const float* x, int dim, int op, float coeff) {
  float sum = 0.0f;
  for (int j = 0; j < dim; ++j) {
    const float v = x[j];
    sum += op == kReductionAsum ? Abs(v) : op == kReductionSumsq ? v * v : v;  // else SUM, MEAN
  }
  return coeff == 1.0f ? sum : sum * coeff;
}
// The gradient of entry x of an item whose top gradient is dy.
NEREUS_HOST_DEVICE inline float ReductionBackward(float dy, float x, int op, float coeff) {
  const float d = dy * coeff;
  return op == kReductionAsum ? Sign(x) * d : op == kReductionSumsq ? 2.0f * d * x : d;
}

}  // namespace ops

class ReductionLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Reduction"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  int op_ = 1;          // caffe::ReductionParameter::ReductionOp
  float coeff_ = 1.0f;  // coeff, divided by dim_ for MEAN
  int num_ = 0;         // Items: the bottom's count before the axis.
  int dim_ = 0;         // Entries per item.
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_REDUCTION_LAYER_H_

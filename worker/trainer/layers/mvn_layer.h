// MVN (mean-variance normalization), as Caffe's: each group of the bottom
// (each channel of each item, or with across_channels each item) is shifted
// to mean 0 and, with normalize_variance (the default), divided by its
// standard deviation plus eps (default 1e-9):
//   y = (x - mean) / (sqrt(mean((x - mean)^2)) + eps).
// Backward is Caffe's formula, with d = sqrt(var) + eps and n the group's
// count:
//   dx = (dy - (sum(dy) + y * sum(y dy)) / n) / d
// (the exact gradient for eps = 0; for eps > 0 it leaves out a term of
// relative size eps / d), or dx = dy - sum(dy) / n without normalize_variance.
// May run in place. Groups are the bottom's first axis (across_channels) or
// its first two (axis 1 counted as 1 when absent); the top has the bottom's
// shape (Caffe gives it the bottom's 4-D legacy shape: the same for 4-D
// bottoms, the same data for any).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_MVN_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_MVN_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// Per-group and per-element arithmetic of MVN, shared by the CPU loops
// (mvn_layer.cc) and the GPU kernels (mvn_layer.cu, one thread a group for
// the sums: the CPU's order, the same bits).
//
// A group's mean and the divisor d (1 without normalize_variance) of its
// `dim` entries x.
NEREUS_HOST_DEVICE inline void MVNGroupStats(const float* x, int dim, bool normalize_variance, float eps, float* mean,
                                             float* divisor) {
  const float inv = 1.0f / static_cast<float>(dim);
  float sum = 0.0f;
  for (int j = 0; j < dim; ++j) sum += x[j];
  const float m = sum * inv;
  *mean = m;
  *divisor = 1.0f;
  if (!normalize_variance) return;
  float squares = 0.0f;
  for (int j = 0; j < dim; ++j) squares += (x[j] - m) * (x[j] - m);
  *divisor = Sqrt(squares * inv) + eps;
}
NEREUS_HOST_DEVICE inline float MVNForward(float x, float mean, float divisor, bool normalize_variance) {
  return normalize_variance ? (x - mean) / divisor : x - mean;
}
// A group's sum(dy) and sum(y dy) for backward.
NEREUS_HOST_DEVICE inline void MVNGroupGradientSums(const float* y, const float* dy, int dim, float* sum_dy,
                                                    float* sum_y_dy) {
  float a = 0.0f;
  float b = 0.0f;
  for (int j = 0; j < dim; ++j) {
    a += dy[j];
    b += y[j] * dy[j];
  }
  *sum_dy = a;
  *sum_y_dy = b;
}
NEREUS_HOST_DEVICE inline float MVNBackward(float dy, float y, float sum_dy, float sum_y_dy, int dim, float divisor,
                                            bool normalize_variance) {
  const float inv = 1.0f / static_cast<float>(dim);
  if (!normalize_variance) return dy - sum_dy * inv;
  return (dy - (sum_dy + y * sum_y_dy) * inv) / divisor;
}

}  // namespace ops

class MVNLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "MVN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  bool normalize_variance_ = true;
  bool across_channels_ = false;
  float eps_ = 1e-9f;
  int groups_ = 0;
  int dim_ = 0;
  Blob mean_;     // [groups_]
  Blob divisor_;  // [groups_]: sqrt(var) + eps, or 1
  Blob sums_;     // [2 * groups_]: backward's sum(dy), sum(y dy) (the GPU's)
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_MVN_LAYER_H_

// Softmax, as Caffe's: normalises along `axis` (softmax_param.axis,
// default 1): the bottom is outer x channels x inner with outer = count(0,
// axis), inner = count(axis + 1). SoftmaxWithLoss, which runs one, is in
// loss_layers.h.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYER_H_

#include <cfloat>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// Per-position arithmetic, shared by the CPU loops (softmax_layer.cc) and
// the GPU kernels (softmax_layer.cu). A position's channels are `inner`
// floats apart, starting at x (y, dy, dx).

// Softmax over the channels: subtract the maximum, exponentiate, normalise.
NEREUS_HOST_DEVICE inline void SoftmaxAt(const float* x, float* y, int channels, int inner) {
  float max_value = -FLT_MAX;
  for (int c = 0; c < channels; ++c) max_value = Max(max_value, x[c * inner]);
  float sum = 0.0f;
  for (int c = 0; c < channels; ++c) {
    y[c * inner] = Exp(x[c * inner] - max_value);
    sum += y[c * inner];
  }
  for (int c = 0; c < channels; ++c) y[c * inner] /= sum;
}

// dx_c = (dy_c - sum_k dy_k y_k) * y_c.
NEREUS_HOST_DEVICE inline void SoftmaxBackwardAt(const float* y, const float* dy, float* dx, int channels, int inner) {
  float dot = 0.0f;
  for (int c = 0; c < channels; ++c) dot += dy[c * inner] * y[c * inner];
  for (int c = 0; c < channels; ++c) dx[c * inner] = (dy[c * inner] - dot) * y[c * inner];
}

}  // namespace ops

class SoftmaxLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Softmax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  int outer_num_ = 0;
  int channels_ = 0;
  int inner_num_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SOFTMAX_LAYER_H_

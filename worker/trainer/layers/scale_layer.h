// Scale, as Caffe's (a ResNet's "BatchNorm + Scale" pair: BatchNorm,
// batch_norm_layer.h, has no learned scale or shift).
//
// Scale multiplies bottom 0 by a scale broadcast along axes
// [axis, axis + num_axes) -- a learned blob, or bottom 1 -- and, with
// bias_term, adds a learned bias of the same shape. The learned scale starts
// at 1 (filler), the bias at 0 (bias_filler).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_SCALE_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_SCALE_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layers/axis_broadcast.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of Scale, shared by the CPU loops (scale_layer.cc)
// and the GPU kernels (scale_layer.cu). The sums over a scale's entry are not
// here: the CPU adds each row in order, the GPU with two cuBLAS
// matrix-vector products, so they differ in rounding.
NEREUS_HOST_DEVICE inline float ScaleForward(float x, float scale) { return x * scale; }
NEREUS_HOST_DEVICE inline float ScaleForwardBias(float x, float scale, float bias) {
  const float scaled = x * scale;
  return scaled + bias;
}

}  // namespace ops

class ScaleLayer : public AxisBroadcastLayer {
 public:
  using AxisBroadcastLayer::AxisBroadcastLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Scale"; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  int axis_ = 1;
  bool bias_term_ = false;
  int bias_index_ = -1;  // index of the bias in blobs()
  Blob bottom_copy_;     // the input, kept for backward when in place
#ifdef NEREUS_HAVE_CUDA
  Blob product_;  // [count]: dy * x
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SCALE_LAYER_H_

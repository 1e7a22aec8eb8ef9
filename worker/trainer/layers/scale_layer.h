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
#include "worker/trainer/layer.h"

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

class ScaleLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Scale"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // Checks that `scale` fits bottom's axes from axis_; returns the error.
  Status CheckScaleShape(const Blob& bottom, const Blob& scale) const;

  int axis_ = 1;
  bool bias_term_ = false;
  int bias_index_ = -1;  // index of the bias in blobs()
  int outer_dim_ = 0;
  int scale_dim_ = 0;
  int inner_dim_ = 0;
  Blob bottom_copy_;  // the input, kept for backward when in place
#ifdef NEREUS_HAVE_CUDA
  // Sums per (n, d) row of `x` (outer x scale_dim rows of inner_dim), then
  // over n, added to out (beta 1) or written (beta 0).
  void RowSumsGpu(const float* x, float beta, float* out);
  Blob inner_ones_;  // [inner_dim]
  Blob outer_ones_;  // [outer_dim]
  Blob row_sums_;    // [outer_dim * scale_dim]
  Blob product_;     // [count]: dy * x
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SCALE_LAYER_H_

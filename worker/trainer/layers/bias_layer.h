// Bias, as Caffe's (Scale's companion, scale_layer.h; Scale with bias_term
// is a Scale then a Bias).
//
// Bias adds to bottom 0 a bias broadcast along axes [axis, axis + num_axes):
// a learned blob (bias_param.filler, constant 0 by default: the layer starts
// as the identity), or bottom 1 (whose shape then gives the axes; num_axes
// and filler are ignored, as in Caffe). A bias of no axes (a scalar) is added
// to every element, whatever the axis. May run in place. Backward: the
// bottom's gradient is the top's; the bias's is the sum of the top's over
// the elements it was added to (accumulated for the learned blob, written
// for bottom 1).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_BIAS_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_BIAS_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of Bias, shared by the CPU loop (bias_layer.cc) and
// the GPU kernel (bias_layer.cu). The bias's gradient sums are not here: the
// CPU adds each row in order, the GPU with two cuBLAS matrix-vector products,
// as Scale's (scale_layer.h).
NEREUS_HOST_DEVICE inline float BiasForward(float x, float bias) { return x + bias; }
// The bias entry that element i of an [outer, bias_dim, inner] blob gets.
NEREUS_HOST_DEVICE inline int BiasIndex(int i, int bias_dim, int inner_dim) { return (i / inner_dim) % bias_dim; }

}  // namespace ops

class BiasLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Bias"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The axis the bias starts at for `bias`: 0 for a scalar bias.
  int BiasAxis(const Blob& bottom, const Blob& bias) const;
  // Checks that `bias` fits bottom's axes from `axis`; returns the error.
  static Status CheckBiasShape(const Blob& bottom, const Blob& bias, int axis);

  int outer_dim_ = 0;
  int bias_dim_ = 0;
  int inner_dim_ = 0;
#ifdef NEREUS_HAVE_CUDA
  Blob inner_ones_;  // [inner_dim]
  Blob outer_ones_;  // [outer_dim]
  Blob row_sums_;    // [outer_dim * bias_dim]
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BIAS_LAYER_H_

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
#include "worker/trainer/layers/axis_broadcast.h"

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

class BiasLayer : public AxisBroadcastLayer {
 public:
  using AxisBroadcastLayer::AxisBroadcastLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Bias"; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The axis the bias starts at for `bias`: 0 for a scalar bias.
  int BiasAxis(const Blob& bottom, const Blob& bias) const;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BIAS_LAYER_H_

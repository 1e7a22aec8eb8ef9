// Parameter, as Caffe's: no bottoms, one top that is a learned blob of
// parameter_param.shape (zeros at first, as Caffe's; a .caffemodel or a
// shared param { name: } gives it values). Forward shares the blob's data
// with the top (no copy), as Caffe does; backward adds the top's gradient to
// the blob's (Caffe shares the gradient instead, which loses all but the
// last of the iter_size passes a solver accumulates; adding keeps them).
// With lr_mult 0 nothing is added. The blob is the layer's only state, a
// parameter like any other: saved, restored and, in a job, pushed to the
// parameter server and pulled from it.
//
// GPU code (parameter_layer.cu): the same sharing; backward one axpy on the
// device (bitwise the CPU's: y + 1 * x).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_PARAMETER_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_PARAMETER_LAYER_H_

#include <vector>

#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {

class ParameterLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Parameter"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_PARAMETER_LAYER_H_

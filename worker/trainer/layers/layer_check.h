// Checks inside layer code (Reshape, Forward) that name the failing layer.
// Configuration errors found at set-up are returned as a Status through
// Layer::LayerError instead; these are for conditions that can only be seen
// once data flows (a bottom reshaped to an incompatible size, a label out of
// range), where Caffe's interface leaves no way to return an error.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LAYER_CHECK_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LAYER_CHECK_H_

#include <glog/logging.h>

// Usage inside a Layer member: LAYER_CHECK(a == b) << "what is wrong";
// Message: "Check failed: a == b layer conv1 (Convolution): what is wrong".
#define LAYER_CHECK(condition) \
  CHECK(condition) << "layer " << this->layer_param_.name() << " (" << this->type() << "): "

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LAYER_CHECK_H_

// Checks inside layer code (Reshape, Forward) that name the failing layer,
// and CheckAxis and ReadFourAxes, set-up checks several layers share.
// Configuration errors found at set-up are returned as a Status through
// Layer::LayerError instead; these are for conditions that can only be seen
// once data flows (a bottom reshaped to an incompatible size, a label out of
// range), where Caffe's interface leaves no way to return an error.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LAYER_CHECK_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LAYER_CHECK_H_

#include <glog/logging.h>

#include <sstream>
#include <string>

#include "common/base/status.h"
#include "worker/trainer/blob.h"

// Usage inside a Layer member: LAYER_CHECK(a == b) << "what is wrong";
// Message: "Check failed: a == b layer conv1 (Convolution): what is wrong".
#define LAYER_CHECK(condition) \
  CHECK(condition) << "layer " << this->layer_param_.name() << " (" << this->type() << "): "

namespace nereus {

// An index bottom's value as it was given (2, 2.5, -1), for the messages
// of the layers that read floats as indices (BatchReindex, Embed).
inline std::string FormatIndexValue(float value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

// A set-up check: `axis` (the layer parameter `field`) names an axis of
// `blob`, counting from the end when negative, as Caffe's CanonicalAxisIndex
// accepts.
inline Status CheckAxis(int axis, const Blob& blob, const char* field) {
  if (axis < -blob.num_axes() || axis >= blob.num_axes()) {
    return InvalidArgumentError(std::string(field) + " " + std::to_string(axis) + " is out of range for bottom shape " +
                                blob.shape_string());
  }
  return Status::OK();
}

// LRN's and Pooling's input, at set-up and at each reshape: `blob`'s
// channels, height and width, or the error of a blob without the 4 axes
// (num, channels, height, width).
inline Status ReadFourAxes(const Blob& blob, int* channels, int* height, int* width) {
  if (blob.num_axes() != 4) {
    return InvalidArgumentError("input must have 4 axes (num, channels, height, width), got " + blob.shape_string());
  }
  *channels = blob.shape(1);
  *height = blob.shape(2);
  *width = blob.shape(3);
  return Status::OK();
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LAYER_CHECK_H_

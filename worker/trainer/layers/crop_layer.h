// Crop, as Caffe's: bottom 0 cut to the shape of bottom 1 (the reference)
// on the axes from crop_param.axis (default 2) on, starting at
// crop_param.offset (none: 0; one: for every cropped axis; else one per
// cropped axis); the axes before `axis` are kept whole. Backward: the top's
// gradient goes back to the elements it was cut from, 0 elsewhere.
// Bottom 1 gives only a shape: its gradient is 0, written as zeros when a net
// asks for it (Caffe leaves it unwritten), so a reference that some other
// branch trains through is accepted, as in Caffe.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CROP_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CROP_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace ops {

// Where each top element comes from: top element i, of coordinates c_k
// (k < num_axes, from top_strides), is bottom element
// sum_k (c_k + offset_k) * bottom_strides_k = base + sum_k c_k * bottom_strides_k.
struct CropGeometry {
  int num_axes = 0;
  int base = 0;  // sum_k offset_k * bottom_strides_k
  int top_strides[kMaxBlobAxes] = {};
  int bottom_strides[kMaxBlobAxes] = {};
};

// The bottom element that top element i is cut from; shared by the CPU loops
// (crop_layer.cc) and the GPU kernels (crop_layer.cu).
NEREUS_HOST_DEVICE inline int CropSource(int i, const CropGeometry& g) {
  int source = g.base;
  for (int k = 0; k < g.num_axes; ++k) {
    source += i / g.top_strides[k] * g.bottom_strides[k];
    i %= g.top_strides[k];
  }
  return source;
}

}  // namespace ops

class CropLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Crop"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The top's shape and the geometry for these bottoms, or an error naming
  // the axis whose crop is out of bounds.
  Status Plan(const Blob& bottom, const Blob& reference, std::vector<int>* top_shape, ops::CropGeometry* g) const;

  ops::CropGeometry geometry_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CROP_LAYER_H_

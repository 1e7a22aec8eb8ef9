#include "worker/trainer/layers/crop_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status CropLayer::Plan(const Blob& bottom, const Blob& reference, std::vector<int>* top_shape,
                       ops::CropGeometry* g) const {
  const caffe::CropParameter& p = layer_param_.crop_param();
  const int num_axes = bottom.num_axes();
  if (p.axis() < -num_axes || p.axis() >= num_axes) {
    return InvalidArgumentError("crop_param.axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                                bottom.shape_string());
  }
  const int start = bottom.CanonicalAxisIndex(p.axis());
  if (p.offset_size() > 1 && start + p.offset_size() != num_axes) {
    return InvalidArgumentError("crop_param has " + std::to_string(p.offset_size()) + " offsets but " +
                                std::to_string(num_axes - start) + " axes are cropped (from axis " +
                                std::to_string(start) + " of " + bottom.shape_string() +
                                "): give one offset, or one per cropped axis");
  }
  // Caffe reads the reference's size of each cropped axis by its index.
  if (reference.num_axes() < num_axes) {
    return InvalidArgumentError("bottom 1 (the reference) has " + std::to_string(reference.num_axes()) +
                                " axes, fewer than bottom 0's " + std::to_string(num_axes) + ": " +
                                reference.shape_string() + " and " + bottom.shape_string());
  }
  *top_shape = bottom.shape();
  g->num_axes = num_axes;
  g->base = 0;
  for (int k = 0; k < num_axes; ++k) {
    int offset = 0;
    if (k >= start) {
      (*top_shape)[k] = reference.shape(k);
      if (p.offset_size() > 0) offset = static_cast<int>(p.offset(p.offset_size() == 1 ? 0 : k - start));
      if (offset < 0 || bottom.shape(k) - offset < reference.shape(k)) {
        return InvalidArgumentError("the crop of axis " + std::to_string(k) + " is out of bounds: size " +
                                    std::to_string(reference.shape(k)) + " at offset " + std::to_string(offset) +
                                    " of a bottom of size " + std::to_string(bottom.shape(k)) + " (bottom " +
                                    bottom.shape_string() + ", reference " + reference.shape_string() + ")");
      }
    }
    g->bottom_strides[k] = bottom.count(k + 1);
    g->base += offset * g->bottom_strides[k];
  }
  int stride = 1;
  for (int k = num_axes - 1; k >= 0; --k) {
    g->top_strides[k] = stride;
    stride *= (*top_shape)[k];
  }
  return Status::OK();
}

Status CropLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::vector<int> shape;
  ops::CropGeometry g;
  const Status planned = Plan(*bottom[0], *bottom[1], &shape, &g);
  return planned.ok() ? planned : LayerError(planned.message());
}

void CropLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::vector<int> shape;
  const Status planned = Plan(*bottom[0], *bottom[1], &shape, &geometry_);
  LAYER_CHECK(planned.ok()) << planned.message();
  top[0]->Reshape(shape);
}

void CropLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  const int count = top[0]->count();
  for (int i = 0; i < count; ++i) out[i] = in[ops::CropSource(i, geometry_)];
}

void CropLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (propagate_down[1]) caffe_set(bottom[1]->count(), 0.0f, bottom[1]->mutable_cpu_diff());
  if (!propagate_down[0]) return;
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  caffe_set(bottom[0]->count(), 0.0f, bottom_diff);
  const int count = top[0]->count();
  for (int i = 0; i < count; ++i) bottom_diff[ops::CropSource(i, geometry_)] = top_diff[i];
}

}  // namespace nereus

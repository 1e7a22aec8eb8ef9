// The shape layers' GPU code. Flatten, Reshape and Input need none of their
// own (they share memory or do nothing, shape_layers.h); Silence clears its
// bottoms' gradients on the device; Slice copies with Concat's kernel, the
// other way; ArgMax ranks each item's entries in a thread of its own.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/concat_layer.h"
#include "worker/trainer/layers/shape_layers.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// n = the number of items.
__global__ void ArgMaxKernel(int n, const float* in, float* out, int dim, int axis_dist, int top_k, bool has_axis,
                             bool out_max_val) {
  NEREUS_KERNEL_LOOP(item, n) {
    const int i = static_cast<int>(item);
    const float* x = in + static_cast<int64_t>(i / axis_dist) * dim * axis_dist + i % axis_dist;
    float value = 0.0f;
    int index = -1;
    for (int j = 0; j < top_k; ++j) {
      ops::ArgMaxNext(x, dim, axis_dist, j == 0, value, index, &value, &index);
      ops::ArgMaxWrite(out, i, j, top_k, axis_dist, has_axis, out_max_val, value, index);
    }
  }
}

}  // namespace

void ArgMaxLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  int dim, axis_dist;
  ItemGeometry(*bottom[0], &dim, &axis_dist);
  gpu::Launch(device(), "ArgMax", bottom[0]->count() / dim, ArgMaxKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), dim, axis_dist, top_k_, has_axis_, out_max_val_);
}

void ArgMaxLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  Backward_cpu(top, propagate_down, bottom);  // touches no data: refuses a gradient
}

void SliceLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->gpu_data();
  const int bottom_axis = bottom[0]->shape(slice_axis_);
  ForEachPart(top, slice_axis_, [&](size_t, Blob* t, int top_axis, int offset) {
    ConcatCopyGpu(device(), false, t->count(), in, t->mutable_gpu_data(), slice_size_, bottom_axis, top_axis, offset);
  });
}

void SliceLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  float* bottom_diff = bottom[0]->mutable_gpu_diff();
  const int bottom_axis = bottom[0]->shape(slice_axis_);
  ForEachPart(top, slice_axis_, [&](size_t, Blob* t, int top_axis, int offset) {
    ConcatCopyGpu(device(), true, t->count(), t->gpu_diff(), bottom_diff, slice_size_, bottom_axis, top_axis, offset);
  });
}

void SilenceLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (propagate_down[i]) caffe_gpu_set(device(), bottom[i]->count(), 0.0f, bottom[i]->mutable_gpu_diff());
  }
}

}  // namespace nereus

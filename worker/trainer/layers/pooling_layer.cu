// PoolingLayer's GPU code: one thread per output (forward) and per input
// element (backward, gathered), each running the element function
// pooling_layer.h shares with the CPU.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/pooling_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// Element `index` of a stack of rows x cols planes: its plane, row and
// column.
struct PlanePosition {
  int plane, row, col;
};
__device__ inline PlanePosition Locate(int index, int rows, int cols) {
  return {index / (rows * cols), (index % (rows * cols)) / cols, index % cols};
}

// n = planes * pooled_h * pooled_w. Exactly one of int_mask, float_mask is set.
__global__ void MaxPoolForwardKernel(int n, const float* bottom, ops::PoolGeometry g, float* top, int* int_mask,
                                     float* float_mask) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const PlanePosition p = Locate(index, g.pooled_h, g.pooled_w);
    int argmax = -1;
    top[index] = ops::MaxPoolAt(bottom + static_cast<int64_t>(p.plane) * g.height * g.width, g, p.row, p.col, &argmax);
    if (int_mask != nullptr) {
      int_mask[index] = argmax;
    } else {
      float_mask[index] = static_cast<float>(argmax);
    }
  }
}

__global__ void AvePoolForwardKernel(int n, const float* bottom, ops::PoolGeometry g, float* top) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const PlanePosition p = Locate(index, g.pooled_h, g.pooled_w);
    top[index] = ops::AvePoolAt(bottom + static_cast<int64_t>(p.plane) * g.height * g.width, g, p.row, p.col);
  }
}

// n = planes * height * width.
template <class Mask>
__global__ void MaxPoolBackwardKernel(int n, const float* top_diff, const Mask* mask, ops::PoolGeometry g,
                                      float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const PlanePosition p = Locate(index, g.height, g.width);
    const int64_t offset = static_cast<int64_t>(p.plane) * g.pooled_h * g.pooled_w;
    bottom_diff[index] = ops::MaxPoolBackwardAt(top_diff + offset, mask + offset, g, p.row, p.col);
  }
}

__global__ void AvePoolBackwardKernel(int n, const float* top_diff, ops::PoolGeometry g, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const PlanePosition p = Locate(index, g.height, g.width);
    const int64_t offset = static_cast<int64_t>(p.plane) * g.pooled_h * g.pooled_w;
    bottom_diff[index] = ops::AvePoolBackwardAt(top_diff + offset, g, p.row, p.col);
  }
}

}  // namespace

void PoolingLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = top[0]->count();
  if (method_ == caffe::PoolingParameter::MAX) {
    const bool use_top_mask = top.size() > 1;
    int* mask = use_top_mask ? nullptr : static_cast<int*>(max_idx_->mutable_gpu_data());
    float* top_mask = use_top_mask ? top[1]->mutable_gpu_data() : nullptr;
    gpu::Launch(device(), "MaxPoolForward", count, MaxPoolForwardKernel, bottom[0]->gpu_data(), geometry_,
                top[0]->mutable_gpu_data(), mask, top_mask);
    return;
  }
  gpu::Launch(device(), "AvePoolForward", count, AvePoolForwardKernel, bottom[0]->gpu_data(), geometry_,
              top[0]->mutable_gpu_data());
}

void PoolingLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const float* top_diff = top[0]->gpu_diff();
  float* bottom_diff = bottom[0]->mutable_gpu_diff();
  if (method_ == caffe::PoolingParameter::MAX) {
    if (top.size() > 1) {
      gpu::Launch(device(), "MaxPoolBackward", count, MaxPoolBackwardKernel<float>, top_diff, top[1]->gpu_data(),
                  geometry_, bottom_diff);
    } else {
      gpu::Launch(device(), "MaxPoolBackward", count, MaxPoolBackwardKernel<int>, top_diff,
                  static_cast<const int*>(max_idx_->gpu_data()), geometry_, bottom_diff);
    }
    return;
  }
  gpu::Launch(device(), "AvePoolBackward", count, AvePoolBackwardKernel, top_diff, geometry_, bottom_diff);
}

}  // namespace nereus

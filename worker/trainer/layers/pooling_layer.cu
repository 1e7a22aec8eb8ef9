// PoolingLayer's GPU code: one thread per output (forward) and per input
// element (backward, gathered), each running the element function
// pooling_layer.h shares with the CPU.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/layers/pooling_layer.h"

namespace nereus {
namespace {

// n = planes * pooled_h * pooled_w. Exactly one of int_mask, float_mask is set.
__global__ void MaxPoolForwardKernel(int n, const float* bottom, ops::PoolGeometry g, float* top, int* int_mask,
                                     float* float_mask) {
  const int out_plane = g.pooled_h * g.pooled_w;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int plane = index / out_plane;
    const int ph = (index % out_plane) / g.pooled_w;
    const int pw = index % g.pooled_w;
    int argmax = -1;
    top[index] = ops::MaxPoolAt(bottom + static_cast<int64_t>(plane) * g.height * g.width, g, ph, pw, &argmax);
    if (int_mask != nullptr) {
      int_mask[index] = argmax;
    } else {
      float_mask[index] = static_cast<float>(argmax);
    }
  }
}

__global__ void AvePoolForwardKernel(int n, const float* bottom, ops::PoolGeometry g, float* top) {
  const int out_plane = g.pooled_h * g.pooled_w;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int plane = index / out_plane;
    const int ph = (index % out_plane) / g.pooled_w;
    const int pw = index % g.pooled_w;
    top[index] = ops::AvePoolAt(bottom + static_cast<int64_t>(plane) * g.height * g.width, g, ph, pw);
  }
}

// n = planes * height * width.
template <class Mask>
__global__ void MaxPoolBackwardKernel(int n, const float* top_diff, const Mask* mask, ops::PoolGeometry g,
                                      float* bottom_diff) {
  const int in_plane = g.height * g.width;
  const int out_plane = g.pooled_h * g.pooled_w;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int plane = index / in_plane;
    const int h = (index % in_plane) / g.width;
    const int w = index % g.width;
    const int64_t offset = static_cast<int64_t>(plane) * out_plane;
    bottom_diff[index] = ops::MaxPoolBackwardAt(top_diff + offset, mask + offset, g, h, w);
  }
}

__global__ void AvePoolBackwardKernel(int n, const float* top_diff, ops::PoolGeometry g, float* bottom_diff) {
  const int in_plane = g.height * g.width;
  const int out_plane = g.pooled_h * g.pooled_w;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int plane = index / in_plane;
    const int h = (index % in_plane) / g.width;
    const int w = index % g.width;
    bottom_diff[index] = ops::AvePoolBackwardAt(top_diff + static_cast<int64_t>(plane) * out_plane, g, h, w);
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

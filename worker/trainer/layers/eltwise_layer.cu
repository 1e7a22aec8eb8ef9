// Eltwise's GPU code: eltwise_layer.cc's steps on the device (PROD and SUM
// through the GPU math functions, MAX by the element functions of
// eltwise_layer.h).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/eltwise_layer.h"
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

__global__ void MaxFirstKernel(int n, const float* a, const float* b, float* top, int* index) {
  NEREUS_KERNEL_LOOP(i, n) ops::EltwiseMaxFirst(a[i], b[i], top + i, index + i);
}
__global__ void MaxNextKernel(int n, const float* c, int bottom_index, float* top, int* index) {
  NEREUS_KERNEL_LOOP(i, n) ops::EltwiseMaxNext(c[i], bottom_index, top + i, index + i);
}
__global__ void MaxBackwardKernel(int n, const float* top_diff, const int* index, int bottom_index,
                                  float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::EltwiseMaxBackward(top_diff[i], index[i], bottom_index);
}

}  // namespace

void EltwiseLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = top[0]->count();
  float* top_data = top[0]->mutable_gpu_data();
  switch (op_) {
    case caffe::EltwiseParameter::PROD:
      caffe_gpu_mul(device(), count, bottom[0]->gpu_data(), bottom[1]->gpu_data(), top_data);
      for (size_t i = 2; i < bottom.size(); ++i)
        caffe_gpu_mul(device(), count, top_data, bottom[i]->gpu_data(), top_data);
      break;
    case caffe::EltwiseParameter::SUM:
      caffe_gpu_set(device(), count, 0.0f, top_data);
      for (size_t i = 0; i < bottom.size(); ++i)
        caffe_gpu_axpy(device(), count, coeffs_[i], bottom[i]->gpu_data(), top_data);
      break;
    case caffe::EltwiseParameter::MAX: {
      int* max_idx = static_cast<int*>(max_idx_->mutable_gpu_data());
      gpu::Launch(device(), "EltwiseMaxFirst", count, MaxFirstKernel, bottom[0]->gpu_data(), bottom[1]->gpu_data(),
                  top_data, max_idx);
      for (size_t i = 2; i < bottom.size(); ++i) {
        gpu::Launch(device(), "EltwiseMaxNext", count, MaxNextKernel, bottom[i]->gpu_data(), static_cast<int>(i),
                    top_data, max_idx);
      }
      break;
    }
  }
}

void EltwiseLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    if (op_ != caffe::EltwiseParameter::MAX) {
      BackwardSumProd(GpuMath(device()), top, bottom, i);
      continue;
    }
    gpu::Launch(device(), "EltwiseMaxBackward", top[0]->count(), MaxBackwardKernel, top[0]->gpu_diff(),
                static_cast<const int*>(max_idx_->gpu_data()), static_cast<int>(i), bottom[i]->mutable_gpu_diff());
  }
}

}  // namespace nereus

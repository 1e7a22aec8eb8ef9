// ConcatLayer's and EltwiseLayer's GPU code: Concat copies one element a
// thread to its place in the top (ops::ConcatIndex; Slice uses the same
// copy), Eltwise runs concat_eltwise_layers.cc's steps on the device (PROD
// and SUM through the GPU math functions, MAX by the element functions of
// concat_eltwise_layers.h).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/concat_eltwise_layers.h"
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

// n = the part's count.
__global__ void ConcatCopyKernel(int n, bool to_whole, const float* from, float* to, int inner, int whole_axis,
                                 int part_axis, int offset) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int part_index = static_cast<int>(i);
    const int whole_index = ops::ConcatIndex(part_index, inner, whole_axis, part_axis, offset);
    if (to_whole) {
      to[whole_index] = from[part_index];
    } else {
      to[part_index] = from[whole_index];
    }
  }
}

}  // namespace

void ConcatCopyGpu(gpu::Device* device, bool to_whole, int part_count, const float* from, float* to, int inner,
                   int whole_axis, int part_axis, int offset) {
  gpu::Launch(device, to_whole ? "ConcatToWhole" : "ConcatFromWhole", part_count, ConcatCopyKernel, to_whole, from, to,
              inner, whole_axis, part_axis, offset);
}

// ---- Concat ----

void ConcatLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  float* top_data = top[0]->mutable_gpu_data();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    ConcatCopyGpu(device(), true, b->count(), b->gpu_data(), top_data, concat_input_size_, top_concat_axis,
                  bottom_concat_axis, offset);
  });
}

void ConcatLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  const float* top_diff = top[0]->gpu_diff();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    if (!propagate_down[i]) return;
    ConcatCopyGpu(device(), false, b->count(), top_diff, b->mutable_gpu_diff(), concat_input_size_, top_concat_axis,
                  bottom_concat_axis, offset);
  });
}

// ---- Eltwise ----

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

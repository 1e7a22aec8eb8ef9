// Scale's GPU code: the element-wise steps by the functions scale_layer.h
// shares with the CPU, the sums over a scale's entry by two cuBLAS
// matrix-vector products, as Caffe's GPU BatchNorm makes its channel sums.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/scale_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// Scale: element i of an [outer, scale_dim, inner] blob uses entry (i / inner) % scale_dim.
__global__ void ScaleForwardKernel(int n, const float* in, const float* scale, int scale_dim, int inner, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ScaleForward(in[i], scale[(static_cast<int>(i) / inner) % scale_dim]);
}
__global__ void ScaleForwardBiasKernel(int n, const float* in, const float* scale, const float* bias, int scale_dim,
                                       int inner, float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int d = (static_cast<int>(i) / inner) % scale_dim;
    out[i] = ops::ScaleForwardBias(in[i], scale[d], bias[d]);
  }
}

}  // namespace

void ScaleLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  if (bottom[0] == top[0]) {
    bottom_copy_.ReshapeLike(*bottom[0]);
    caffe_gpu_copy(device(), count, bottom[0]->gpu_data(), bottom_copy_.mutable_gpu_data());
  }
  const float* scale = bottom.size() > 1 ? bottom[1]->gpu_data() : blobs_[0]->gpu_data();
  const float* in = bottom[0]->gpu_data();
  float* out = top[0]->mutable_gpu_data();
  if (bias_term_) {
    gpu::Launch(device(), "ScaleForwardBias", count, ScaleForwardBiasKernel, in, scale, blobs_[bias_index_]->gpu_data(),
                axes_.dim, axes_.inner_dim, out);
  } else {
    gpu::Launch(device(), "ScaleForward", count, ScaleForwardKernel, in, scale, axes_.dim, axes_.inner_dim, out);
  }
}

void ScaleLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const int count = top[0]->count();
  const float* dy = top[0]->gpu_diff();
  const bool scale_is_param = bottom.size() == 1;
  // Parameter gradients first: in place, dy and the bottom diff are one buffer.
  if (bias_term_ && param_propagate_down(bias_index_)) {
    axes_.RowSumsGpu(device(), dy, 1.0f, blobs_[bias_index_]->mutable_gpu_diff());
  }
  if ((scale_is_param && param_propagate_down(0)) || (!scale_is_param && propagate_down[1])) {
    const float* x = bottom[0] == top[0] ? bottom_copy_.gpu_data() : bottom[0]->gpu_data();
    product_.ReshapeLike(*top[0]);
    float* product = product_.mutable_gpu_data();
    caffe_gpu_mul(device(), count, dy, x, product);
    // A learned scale accumulates (Backward adds to parameter diffs); a
    // bottom's gradient is written.
    float* scale_diff = scale_is_param ? blobs_[0]->mutable_gpu_diff() : bottom[1]->mutable_gpu_diff();
    axes_.RowSumsGpu(device(), product, scale_is_param ? 1.0f : 0.0f, scale_diff);
  }
  if (propagate_down[0]) {
    const float* scale = scale_is_param ? blobs_[0]->gpu_data() : bottom[1]->gpu_data();
    gpu::Launch(device(), "ScaleBackward", count, ScaleForwardKernel, dy, scale, axes_.dim, axes_.inner_dim,
                bottom[0]->mutable_gpu_diff());
  }
}

}  // namespace nereus

// LRNLayer's GPU code: one thread per element for each step of the CPU's
// Forward and Backward, each running the element function lrn_layer.h shares
// with the CPU (the window sums in the CPU's order).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/lrn_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// out = LrnScale(window sum of in) when `scale`, else the window sum itself.
__global__ void WindowSumKernel(int n, const float* in, ops::LrnGeometry g, bool scale, float offset, float coefficient,
                                float* out) {
  const int plane = g.height * g.width;
  const int image = g.channels * plane;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int num = index / image;
    const int c = (index % image) / plane;
    const int h = (index % plane) / g.width;
    const int w = index % g.width;
    const float sum = ops::LrnWindowSumAt(in + static_cast<int64_t>(num) * image, g, c, h, w);
    out[index] = scale ? ops::LrnScale(sum, offset, coefficient) : sum;
  }
}

__global__ void ForwardKernel(int n, const float* x, const float* scale, float beta, float* y) {
  NEREUS_KERNEL_LOOP(i, n) y[i] = ops::LrnForward(x[i], scale[i], beta);
}

__global__ void RatioKernel(int n, const float* dy, const float* y, const float* scale, float* ratio) {
  NEREUS_KERNEL_LOOP(i, n) ratio[i] = ops::LrnRatio(dy[i], y[i], scale[i]);
}

__global__ void LrnBackwardKernel(int n, const float* dy, const float* x, const float* scale, const float* window,
                                  float beta, float cache, float* dx) {
  NEREUS_KERNEL_LOOP(i, n) dx[i] = ops::LrnBackward(dy[i], x[i], scale[i], window[i], beta, cache);
}

}  // namespace

void LRNLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  const float* x = bottom[0]->gpu_data();
  const bool across = region_ == caffe::LRNParameter::ACROSS_CHANNELS;
  const float offset = across ? k_ : 1.0f;
  const float coefficient = across ? alpha_ / size_ : alpha_ / (size_ * size_);
  float* buffer = buffer_.mutable_gpu_data();
  float* scale = scale_.mutable_gpu_data();
  caffe_gpu_sqr(device(), count, x, buffer);
  gpu::Launch(device(), "LRNScale", count, WindowSumKernel, buffer, geometry(), true, offset, coefficient, scale);
  gpu::Launch(device(), "LRNForward", count, ForwardKernel, x, scale, beta_, top[0]->mutable_gpu_data());
}

void LRNLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const bool across = region_ == caffe::LRNParameter::ACROSS_CHANNELS;
  const float coefficient = across ? alpha_ / size_ : alpha_ / (size_ * size_);
  const float* scale = scale_.gpu_data();
  float* ratio = ratio_.mutable_gpu_data();
  float* window = buffer_.mutable_gpu_data();
  gpu::Launch(device(), "LRNRatio", count, RatioKernel, top[0]->gpu_diff(), top[0]->gpu_data(), scale, ratio);
  gpu::Launch(device(), "LRNWindowSum", count, WindowSumKernel, static_cast<const float*>(ratio), geometry(), false,
              0.0f, 0.0f, window);
  const float cache = 2.0f * coefficient * beta_;
  gpu::Launch(device(), "LRNBackward", count, LrnBackwardKernel, top[0]->gpu_diff(), bottom[0]->gpu_data(), scale,
              static_cast<const float*>(window), beta_, cache, bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

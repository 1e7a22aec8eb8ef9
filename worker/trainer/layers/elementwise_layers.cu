// The GPU code of the element-wise layers of elementwise_layers.h: one thread
// per element, each running the element function the CPU loop runs (PReLU's
// slope gradient: one thread per slope, adding its terms in the CPU's order).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/layers/elementwise_layers.h"

namespace nereus {
namespace {

__global__ void AbsValForwardKernel(int n, const float* in, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::Abs(in[i]);
}
__global__ void AbsValBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::AbsValBackward(top_diff[i], in[i]);
}
__global__ void BNLLForwardKernel(int n, const float* in, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::BNLLForward(in[i]);
}
__global__ void BNLLBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::BNLLBackward(top_diff[i], in[i]);
}
__global__ void ELUForwardKernel(int n, const float* in, float* out, float alpha) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ELUForward(in[i], alpha);
}
__global__ void ELUBackwardKernel(int n, const float* top_diff, const float* in, const float* out, float* bottom_diff,
                                  float alpha) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::ELUBackward(top_diff[i], in[i], out[i], alpha);
}
__global__ void ExpForwardKernel(int n, const float* in, float* out, float inner_scale, float outer_scale) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ExpForward(in[i], inner_scale, outer_scale);
}
__global__ void ExpBackwardKernel(int n, const float* top_diff, const float* out, float* bottom_diff,
                                  float inner_scale) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::ExpBackward(top_diff[i], out[i], inner_scale);
}
__global__ void LogForwardKernel(int n, const float* in, float* out, float scale, float shift, float base_scale) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::LogForward(in[i], scale, shift, base_scale);
}
__global__ void LogBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff, float scale,
                                  float shift, float base_scale) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::LogBackward(top_diff[i], in[i], scale, shift, base_scale);
}
__global__ void PowerForwardKernel(int n, const float* in, float* out, float power, float scale, float shift) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::PowerForward(in[i], power, scale, shift);
}
__global__ void PowerBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff, float power,
                                    float scale, float shift) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::PowerBackward(top_diff[i], in[i], power, scale, shift);
}
__global__ void ThresholdForwardKernel(int n, const float* in, float* out, float threshold) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ThresholdForward(in[i], threshold);
}
__global__ void PReLUForwardKernel(int n, const float* in, float* out, const float* slope, int channels, int dim,
                                   bool channel_shared) {
  NEREUS_KERNEL_LOOP(i, n) {
    out[i] = ops::ReLUForward(in[i], slope[ops::PReLUChannel(static_cast<int>(i), channels, dim, channel_shared)]);
  }
}
__global__ void PReLUBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff,
                                    const float* slope, int channels, int dim, bool channel_shared) {
  NEREUS_KERNEL_LOOP(i, n) {
    bottom_diff[i] = ops::ReLUBackward(top_diff[i], in[i],
                                       slope[ops::PReLUChannel(static_cast<int>(i), channels, dim, channel_shared)]);
  }
}
// n = the number of slopes.
__global__ void PReLUSlopeGradientKernel(int n, const float* top_diff, const float* in, float* slope_diff, int num,
                                         int channels, int dim, bool channel_shared) {
  NEREUS_KERNEL_LOOP(c, n) {
    const int ch = static_cast<int>(c);
    slope_diff[ch] = ops::PReLUSlopeGradient(top_diff, in, ch, num, channels, dim, channel_shared, slope_diff[ch]);
  }
}

// The input of a layer's forward, valid in backward: the bottom itself, or
// the copy the forward kept when running in place (the CPU's SavedInput).
const float* SavedGpuInput(const Blob& bottom, const Blob& top, const Blob& copy) {
  return &bottom == &top ? copy.gpu_data() : bottom.gpu_data();
}

void SaveGpuInputIfInPlace(gpu::Device* device, const Blob& bottom, const Blob& top, Blob* copy) {
  if (&bottom != &top) return;
  copy->ReshapeLike(bottom);
  caffe_gpu_copy(device, bottom.count(), bottom.gpu_data(), copy->mutable_gpu_data());
}

}  // namespace

// ---- AbsVal ----

void AbsValLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "AbsValForward", bottom[0]->count(), AbsValForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data());
}

void AbsValLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "AbsValBackward", bottom[0]->count(), AbsValBackwardKernel, top[0]->gpu_diff(),
              bottom[0]->gpu_data(), bottom[0]->mutable_gpu_diff());
}

// ---- BNLL ----

void BNLLLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveGpuInputIfInPlace(device(), *bottom[0], *top[0], &bottom_copy_);
  gpu::Launch(device(), "BNLLForward", bottom[0]->count(), BNLLForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data());
}

void BNLLLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "BNLLBackward", bottom[0]->count(), BNLLBackwardKernel, top[0]->gpu_diff(),
              SavedGpuInput(*bottom[0], *top[0], bottom_copy_), bottom[0]->mutable_gpu_diff());
}

// ---- ELU ----

void ELULayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "ELUForward", bottom[0]->count(), ELUForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), layer_param_.elu_param().alpha());
}

void ELULayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "ELUBackward", bottom[0]->count(), ELUBackwardKernel, top[0]->gpu_diff(), bottom[0]->gpu_data(),
              top[0]->gpu_data(), bottom[0]->mutable_gpu_diff(), layer_param_.elu_param().alpha());
}

// ---- Exp ----

void ExpLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "ExpForward", bottom[0]->count(), ExpForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), inner_scale_, outer_scale_);
}

void ExpLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "ExpBackward", bottom[0]->count(), ExpBackwardKernel, top[0]->gpu_diff(), top[0]->gpu_data(),
              bottom[0]->mutable_gpu_diff(), inner_scale_);
}

// ---- Log ----

void LogLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveGpuInputIfInPlace(device(), *bottom[0], *top[0], &bottom_copy_);
  gpu::Launch(device(), "LogForward", bottom[0]->count(), LogForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), input_scale_, input_shift_, base_scale_);
}

void LogLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "LogBackward", bottom[0]->count(), LogBackwardKernel, top[0]->gpu_diff(),
              SavedGpuInput(*bottom[0], *top[0], bottom_copy_), bottom[0]->mutable_gpu_diff(), input_scale_,
              input_shift_, base_scale_);
}

// ---- Power ----

void PowerLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveGpuInputIfInPlace(device(), *bottom[0], *top[0], &bottom_copy_);
  const int count = bottom[0]->count();
  if (scale_ * power_ == 0.0f) {
    caffe_gpu_set(device(), count, ConstantOutput(), top[0]->mutable_gpu_data());
    return;
  }
  gpu::Launch(device(), "PowerForward", count, PowerForwardKernel, bottom[0]->gpu_data(), top[0]->mutable_gpu_data(),
              power_, scale_, shift_);
}

void PowerLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "PowerBackward", bottom[0]->count(), PowerBackwardKernel, top[0]->gpu_diff(),
              SavedGpuInput(*bottom[0], *top[0], bottom_copy_), bottom[0]->mutable_gpu_diff(), power_, scale_, shift_);
}

// ---- Threshold ----

void ThresholdLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "ThresholdForward", bottom[0]->count(), ThresholdForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), layer_param_.threshold_param().threshold());
}

void ThresholdLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  Backward_cpu(top, propagate_down, bottom);  // touches no data: refuses a gradient
}

// ---- PReLU ----

void PReLULayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveGpuInputIfInPlace(device(), *bottom[0], *top[0], &bottom_copy_);
  gpu::Launch(device(), "PReLUForward", bottom[0]->count(), PReLUForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), blobs_[0]->gpu_data(), bottom[0]->shape(1), bottom[0]->count(2),
              channel_shared_);
}

void PReLULayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* in = SavedGpuInput(*bottom[0], *top[0], bottom_copy_);
  const float* top_diff = top[0]->gpu_diff();
  const int channels = bottom[0]->shape(1);
  const int dim = bottom[0]->count(2);
  if (param_propagate_down(0)) {
    gpu::Launch(device(), "PReLUSlopeGradient", blobs_[0]->count(), PReLUSlopeGradientKernel, top_diff, in,
                blobs_[0]->mutable_gpu_diff(), bottom[0]->shape(0), channels, dim, channel_shared_);
  }
  if (propagate_down[0]) {
    gpu::Launch(device(), "PReLUBackward", bottom[0]->count(), PReLUBackwardKernel, top_diff, in,
                bottom[0]->mutable_gpu_diff(), blobs_[0]->gpu_data(), channels, dim, channel_shared_);
  }
}

}  // namespace nereus

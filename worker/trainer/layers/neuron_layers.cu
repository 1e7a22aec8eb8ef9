// The neuron layers' GPU code: one thread per element, each running the
// element function neuron_layers.h shares with the CPU loops.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/layers/neuron_layers.h"

namespace nereus {
namespace {

__global__ void ReLUForwardKernel(int n, const float* in, float* out, float slope) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ReLUForward(in[i], slope);
}
__global__ void ReLUBackwardKernel(int n, const float* top_diff, const float* in, float* bottom_diff, float slope) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::ReLUBackward(top_diff[i], in[i], slope);
}
__global__ void SigmoidForwardKernel(int n, const float* in, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::SigmoidForward(in[i]);
}
__global__ void SigmoidBackwardKernel(int n, const float* top_diff, const float* out, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::SigmoidBackward(top_diff[i], out[i]);
}
__global__ void TanHForwardKernel(int n, const float* in, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = ops::Tanh(in[i]);
}
__global__ void TanHBackwardKernel(int n, const float* top_diff, const float* out, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::TanHBackward(top_diff[i], out[i]);
}
// `mask` holds the raw draws on entry and the 0/1 mask on exit.
__global__ void DropoutForwardKernel(int n, const float* in, unsigned int* mask, uint32_t threshold, float scale,
                                     float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    const unsigned int keep = ops::DropoutKeep(mask[i], threshold);
    mask[i] = keep;
    out[i] = ops::DropoutApply(in[i], keep, scale);
  }
}
__global__ void DropoutBackwardKernel(int n, const float* top_diff, const unsigned int* mask, float scale,
                                      float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = ops::DropoutApply(top_diff[i], mask[i], scale);
}

}  // namespace

void ReLULayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "ReLUForward", bottom[0]->count(), ReLUForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), layer_param_.relu_param().negative_slope());
}

void ReLULayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "ReLUBackward", bottom[0]->count(), ReLUBackwardKernel, top[0]->gpu_diff(),
              bottom[0]->gpu_data(), bottom[0]->mutable_gpu_diff(), layer_param_.relu_param().negative_slope());
}

void SigmoidLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "SigmoidForward", bottom[0]->count(), SigmoidForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data());
}

void SigmoidLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "SigmoidBackward", bottom[0]->count(), SigmoidBackwardKernel, top[0]->gpu_diff(),
              top[0]->gpu_data(), bottom[0]->mutable_gpu_diff());
}

void TanHLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "TanHForward", bottom[0]->count(), TanHForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data());
}

void TanHLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "TanHBackward", bottom[0]->count(), TanHBackwardKernel, top[0]->gpu_diff(), top[0]->gpu_data(),
              bottom[0]->mutable_gpu_diff());
}

void DropoutLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  const float* in = bottom[0]->gpu_data();
  float* out = top[0]->mutable_gpu_data();
  if (phase_ == caffe::TRAIN) {
    auto* mask = static_cast<unsigned int*>(mask_->mutable_gpu_data());
    caffe_gpu_rng_uint(device(), count, mask);
    gpu::Launch(device(), "DropoutForward", count, DropoutForwardKernel, in, mask, uint_threshold_,
                scale_train_ ? scale_ : 1.0f, out);
  } else {
    caffe_gpu_copy(device(), count, in, out);
    if (!scale_train_) caffe_gpu_scal(device(), count, 1.0f / scale_, out);
  }
}

void DropoutLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const float* top_diff = top[0]->gpu_diff();
  float* bottom_diff = bottom[0]->mutable_gpu_diff();
  if (phase_ == caffe::TRAIN) {
    gpu::Launch(device(), "DropoutBackward", count, DropoutBackwardKernel, top_diff,
                static_cast<const unsigned int*>(mask_->gpu_data()), scale_train_ ? scale_ : 1.0f, bottom_diff);
  } else {
    caffe_gpu_copy(device(), count, top_diff, bottom_diff);
    if (!scale_train_) caffe_gpu_scal(device(), count, 1.0f / scale_, bottom_diff);
  }
}

}  // namespace nereus

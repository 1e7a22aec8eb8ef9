// Crop's GPU code: one thread per top element, each finding its bottom
// element by the function crop_layer.h shares with the CPU loops (a copy:
// the same bits); backward clears the bottom's gradient, then scatters the
// top's into it (each top element has its own bottom element).
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/crop_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

__global__ void CropForwardKernel(int n, const float* in, ops::CropGeometry g, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = in[ops::CropSource(static_cast<int>(i), g)];
}

__global__ void CropBackwardKernel(int n, const float* top_diff, ops::CropGeometry g, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[ops::CropSource(static_cast<int>(i), g)] = top_diff[i];
}

}  // namespace

void CropLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "CropForward", top[0]->count(), CropForwardKernel, bottom[0]->gpu_data(), geometry_,
              top[0]->mutable_gpu_data());
}

void CropLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (propagate_down[1]) caffe_gpu_set(device(), bottom[1]->count(), 0.0f, bottom[1]->mutable_gpu_diff());
  if (!propagate_down[0]) return;
  float* bottom_diff = bottom[0]->mutable_gpu_diff();
  caffe_gpu_set(device(), bottom[0]->count(), 0.0f, bottom_diff);
  gpu::Launch(device(), "CropBackward", top[0]->count(), CropBackwardKernel, top[0]->gpu_diff(), geometry_,
              bottom_diff);
}

}  // namespace nereus

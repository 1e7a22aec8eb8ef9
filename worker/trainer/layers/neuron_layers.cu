// The neuron layers' GPU code: one thread per element, each running the
// element function neuron_layers.h shares with the CPU loops (every
// ElementLayer, Dropout and PReLU); PReLU's slope gradient one thread per
// slope, adding its terms in the CPU's order.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// The ElementLayers' kernels: their Op on each element.
template <class Op>
__global__ void ElementForwardKernel(int n, const float* in, float* out, Op op) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = op.Forward(in[i]);
}
template <class Op>
__global__ void ElementBackwardKernel(int n, const float* top_diff, const float* x, const float* y, float* bottom_diff,
                                      Op op) {
  NEREUS_KERNEL_LOOP(i, n) bottom_diff[i] = op.Backward(top_diff[i], x[i], y[i]);
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

}  // namespace

template <class Op>
void ElementLayer<Op>::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (Op::kSavesInput) SaveInputIfInPlace(GpuMath(device()), *bottom[0], *top[0], &bottom_copy_);
  const int count = bottom[0]->count();
  float constant = 0.0f;
  if (op_.Constant(&constant)) {
    caffe_gpu_set(device(), count, constant, top[0]->mutable_gpu_data());
    return;
  }
  gpu::Launch(device(), (std::string(Op::kType) + "Forward").c_str(), count, ElementForwardKernel<Op>,
              bottom[0]->gpu_data(), top[0]->mutable_gpu_data(), op_);
}

template <class Op>
void ElementLayer<Op>::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  if (!WantsGradient(propagate_down)) return;
  gpu::Launch(device(), (std::string(Op::kType) + "Backward").c_str(), bottom[0]->count(), ElementBackwardKernel<Op>,
              top[0]->gpu_diff(), Input(*bottom[0], *top[0]).gpu_data(), top[0]->gpu_data(),
              bottom[0]->mutable_gpu_diff(), op_);
}

// Every ElementLayer.
template class ElementLayer<ops::ReLUOp>;
template class ElementLayer<ops::SigmoidOp>;
template class ElementLayer<ops::TanHOp>;
template class ElementLayer<ops::AbsValOp>;
template class ElementLayer<ops::BNLLOp>;
template class ElementLayer<ops::ELUOp>;
template class ElementLayer<ops::ExpOp>;
template class ElementLayer<ops::LogOp>;
template class ElementLayer<ops::PowerOp>;
template class ElementLayer<ops::ThresholdOp>;
template class ElementLayer<ops::ClipOp>;
template class ElementLayer<ops::SwishOp>;

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

// ---- PReLU ----

void PReLULayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  SaveInputIfInPlace(GpuMath(device()), *bottom[0], *top[0], &bottom_copy_);
  gpu::Launch(device(), "PReLUForward", bottom[0]->count(), PReLUForwardKernel, bottom[0]->gpu_data(),
              top[0]->mutable_gpu_data(), blobs_[0]->gpu_data(), bottom[0]->shape(1), bottom[0]->count(2),
              channel_shared_);
}

void PReLULayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  const float* in = SavedInput(*bottom[0], *top[0], bottom_copy_).gpu_data();
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

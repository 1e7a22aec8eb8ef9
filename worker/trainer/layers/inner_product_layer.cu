// InnerProductLayer's GPU code: inner_product_layer.cc's GEMMs through
// cuBLAS.
#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/layers/inner_product_layer.h"

namespace nereus {

void InnerProductLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* bottom_data = bottom[0]->gpu_data();
  float* top_data = top[0]->mutable_gpu_data();
  const float* weight = blobs_[0]->gpu_data();
  caffe_gpu_gemm(device(), CblasNoTrans, transpose_ ? CblasNoTrans : CblasTrans, M_, N_, K_, 1.0f, bottom_data, weight,
                 0.0f, top_data);
  if (bias_term_) {
    caffe_gpu_gemm(device(), CblasNoTrans, CblasNoTrans, M_, N_, 1, 1.0f, bias_multiplier_.gpu_data(),
                   blobs_[1]->gpu_data(), 1.0f, top_data);
  }
}

void InnerProductLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                     const std::vector<Blob*>& bottom) {
  const float* top_diff = top[0]->gpu_diff();
  if (param_propagate_down(0)) {
    const float* bottom_data = bottom[0]->gpu_data();
    if (transpose_) {
      caffe_gpu_gemm(device(), CblasTrans, CblasNoTrans, K_, N_, M_, 1.0f, bottom_data, top_diff, 1.0f,
                     blobs_[0]->mutable_gpu_diff());
    } else {
      caffe_gpu_gemm(device(), CblasTrans, CblasNoTrans, N_, K_, M_, 1.0f, top_diff, bottom_data, 1.0f,
                     blobs_[0]->mutable_gpu_diff());
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    caffe_gpu_gemv(device(), CblasTrans, M_, N_, 1.0f, top_diff, bias_multiplier_.gpu_data(), 1.0f,
                   blobs_[1]->mutable_gpu_diff());
  }
  if (propagate_down[0]) {
    caffe_gpu_gemm(device(), CblasNoTrans, transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_, 1.0f, top_diff,
                   blobs_[0]->gpu_data(), 0.0f, bottom[0]->mutable_gpu_diff());
  }
}

}  // namespace nereus

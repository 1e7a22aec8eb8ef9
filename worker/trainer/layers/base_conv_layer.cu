// BaseConvolutionLayer's GEMM helpers on the GPU, over a batch of images
// (base_conv_layer.h says how they differ from the CPU's one-image helpers;
// base_conv_layer.cc has those and says what each product is).
#include <algorithm>

#include "worker/trainer/gpu/math_functions.h"
#include "worker/trainer/layers/base_conv_layer.h"

namespace nereus {

bool BaseConvolutionLayer::is_1x1() const {
  return geometry_.kernel_h == 1 && geometry_.kernel_w == 1 && geometry_.stride_h == 1 && geometry_.stride_w == 1 &&
         geometry_.pad_h == 0 && geometry_.pad_w == 0;
}

int BaseConvolutionLayer::GpuChunk(int num) const {
  if (is_1x1()) return num;
  const size_t per_image = sizeof(float) * static_cast<size_t>(kernel_dim_) * group_ * conv_out_spatial_dim_;
  const size_t fit = per_image == 0 ? static_cast<size_t>(num) : kGpuColumnBytes / per_image;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(fit, static_cast<size_t>(num))));
}

void BaseConvolutionLayer::ForwardGemmGpu(const float* input, const float* weights, float* output, int num) {
  const int in_dim = conv_in_channels_ * geometry_.height * geometry_.width;
  const int out_dim = conv_out_channels_ * conv_out_spatial_dim_;
  const int col_size = kernel_dim_ * group_ * conv_out_spatial_dim_;
  const int out_per_group = conv_out_channels_ / group_;
  const int weight_offset = out_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * conv_out_spatial_dim_;
  const int output_offset = out_per_group * conv_out_spatial_dim_;
  const int chunk = GpuChunk(num);
  for (int n0 = 0; n0 < num; n0 += chunk) {
    const int k = std::min(chunk, num - n0);
    const float* in = input + static_cast<int64_t>(n0) * in_dim;
    const float* col = in;
    long long col_stride = in_dim;
    if (!is_1x1()) {
      gpu_columns_.Reshape({k * col_size});
      float* columns = gpu_columns_.mutable_gpu_data();
      layers::Im2ColGpu(device(), in, geometry_, columns, k);
      col = columns;
      col_stride = col_size;
    }
    for (int g = 0; g < group_; ++g) {
      caffe_gpu_gemm_strided_batched(device(), CblasNoTrans, CblasNoTrans, out_per_group, conv_out_spatial_dim_,
                                     kernel_dim_, 1.0f, weights + weight_offset * g, 0, col + col_offset * g,
                                     col_stride, 0.0f, output + static_cast<int64_t>(n0) * out_dim + output_offset * g,
                                     out_dim, k);
    }
  }
}

void BaseConvolutionLayer::ForwardBiasGpu(float* output, const float* bias, int num) {
  // Every image's output (num_output_ x out_spatial_dim_) += bias * 1^T.
  caffe_gpu_gemm_strided_batched(device(), CblasNoTrans, CblasNoTrans, num_output_, out_spatial_dim_, 1, 1.0f, bias, 0,
                                 bias_multiplier_.gpu_data(), 0, 1.0f, output, num_output_ * out_spatial_dim_, num);
}

void BaseConvolutionLayer::BackwardGemmGpu(const float* output, const float* weights, float* input, int num) {
  const int in_dim = conv_in_channels_ * geometry_.height * geometry_.width;
  const int out_dim = conv_out_channels_ * conv_out_spatial_dim_;
  const int col_size = kernel_dim_ * group_ * conv_out_spatial_dim_;
  const int out_per_group = conv_out_channels_ / group_;
  const int weight_offset = out_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * conv_out_spatial_dim_;
  const int output_offset = out_per_group * conv_out_spatial_dim_;
  const int chunk = GpuChunk(num);
  for (int n0 = 0; n0 < num; n0 += chunk) {
    const int k = std::min(chunk, num - n0);
    float* in = input + static_cast<int64_t>(n0) * in_dim;
    float* col = in;  // 1x1: col2im is the identity.
    long long col_stride = in_dim;
    if (!is_1x1()) {
      gpu_columns_.Reshape({k * col_size});
      col = gpu_columns_.mutable_gpu_data();
      col_stride = col_size;
    }
    for (int g = 0; g < group_; ++g) {
      caffe_gpu_gemm_strided_batched(device(), CblasTrans, CblasNoTrans, kernel_dim_, conv_out_spatial_dim_,
                                     out_per_group, 1.0f, weights + weight_offset * g, 0,
                                     output + static_cast<int64_t>(n0) * out_dim + output_offset * g, out_dim, 0.0f,
                                     col + col_offset * g, col_stride, k);
    }
    if (!is_1x1()) layers::Col2ImGpu(device(), col, geometry_, in, k);
  }
}

void BaseConvolutionLayer::WeightGemmGpu(const float* input, const float* output, float* weights, int num) {
  const int in_dim = conv_in_channels_ * geometry_.height * geometry_.width;
  const int out_dim = conv_out_channels_ * conv_out_spatial_dim_;
  const int col_size = kernel_dim_ * group_ * conv_out_spatial_dim_;
  const int out_per_group = conv_out_channels_ / group_;
  const int weight_offset = out_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * conv_out_spatial_dim_;
  const int output_offset = out_per_group * conv_out_spatial_dim_;
  const int chunk = GpuChunk(num);
  for (int n0 = 0; n0 < num; n0 += chunk) {
    const int k = std::min(chunk, num - n0);
    const float* in = input + static_cast<int64_t>(n0) * in_dim;
    const float* col = in;
    int64_t col_stride = in_dim;
    if (!is_1x1()) {
      gpu_columns_.Reshape({k * col_size});
      float* columns = gpu_columns_.mutable_gpu_data();
      layers::Im2ColGpu(device(), in, geometry_, columns, k);
      col = columns;
      col_stride = col_size;
    }
    for (int n = 0; n < k; ++n) {
      const float* out = output + static_cast<int64_t>(n0 + n) * out_dim;
      for (int g = 0; g < group_; ++g) {
        caffe_gpu_gemm(device(), CblasNoTrans, CblasTrans, out_per_group, kernel_dim_, conv_out_spatial_dim_, 1.0f,
                       out + output_offset * g, col + n * col_stride + col_offset * g, 1.0f,
                       weights + weight_offset * g);
      }
    }
  }
}

void BaseConvolutionLayer::BackwardBiasGpu(float* bias, const float* output, int num) {
  // Per image and channel, the sum over the spatial positions; then bias +=
  // the sum over the images (two matrix-vector products, as Caffe's
  // BatchNorm sums).
  gpu_bias_sums_.Reshape({num * num_output_});
  if (gpu_batch_ones_.count() != num) {
    gpu_batch_ones_.Reshape({num});
    caffe_set(num, 1.0f, gpu_batch_ones_.mutable_cpu_data());
  }
  float* sums = gpu_bias_sums_.mutable_gpu_data();
  caffe_gpu_gemv(device(), CblasNoTrans, num * num_output_, out_spatial_dim_, 1.0f, output, bias_multiplier_.gpu_data(),
                 0.0f, sums);
  caffe_gpu_gemv(device(), CblasTrans, num, num_output_, 1.0f, sums, gpu_batch_ones_.gpu_data(), 1.0f, bias);
}

}  // namespace nereus

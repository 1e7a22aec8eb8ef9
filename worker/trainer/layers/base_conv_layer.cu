// BaseConvolutionLayer's GEMM helpers on the GPU, over a batch of images
// (base_conv_layer.h says how they differ from the CPU's one-image helpers;
// base_conv_layer.cc has those and says what each product is).
#include <algorithm>

#include "worker/trainer/layers/base_conv_layer.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {

bool BaseConvolutionLayer::is_1x1() const {
  return geometry_.kernel_h == 1 && geometry_.kernel_w == 1 && geometry_.stride_h == 1 && geometry_.stride_w == 1 &&
         geometry_.pad_h == 0 && geometry_.pad_w == 0;
}

int BaseConvolutionLayer::GpuChunk(int num, size_t floats_per_image) const {
  const size_t per_image = sizeof(float) * floats_per_image;
  const size_t budget = device()->options().conv_workspace_bytes;
  const size_t fit = per_image == 0 ? static_cast<size_t>(num) : budget / per_image;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(fit, static_cast<size_t>(num))));
}

size_t BaseConvolutionLayer::ColumnFloats() const {
  return is_1x1() ? 0 : static_cast<size_t>(kernel_dim_) * group_ * conv_out_spatial_dim_;
}

float* BaseConvolutionLayer::WorkspaceGpu(size_t floats) {
  auto ws = device()->Workspace(floats * sizeof(float));
  if (!ws.ok()) {
    device()->RecordError(ws.status().Annotate("layer " + layer_param_.name() + ": the convolution's workspace"));
    return nullptr;
  }
  return static_cast<float*>(*ws);
}

BaseConvolutionLayer::ImageSizes BaseConvolutionLayer::image_sizes() const {
  return {conv_in_channels_ * geometry_.height * geometry_.width, conv_out_channels_ * conv_out_spatial_dim_};
}

float* BaseConvolutionLayer::ColumnsGpu(int k, long long* stride) {
  *stride = static_cast<long long>(kernel_dim_) * group_ * conv_out_spatial_dim_;
  return WorkspaceGpu(static_cast<size_t>(k) * *stride);
}

const float* BaseConvolutionLayer::Im2ColGpu(const float* images, int k, long long* stride) {
  if (is_1x1()) {
    *stride = image_sizes().in;
    return images;
  }
  float* columns = ColumnsGpu(k, stride);
  layers::Im2ColGpu(device(), images, geometry_, columns, k);
  return columns;
}

// The passes: base_conv_layer.cc's, over each bottom's whole batch at once.
void BaseConvolutionLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
#ifdef NEREUS_HAVE_CUDNN
  if (cudnn_) return ForwardCudnn(bottom, top);
#endif
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    float* top_data = top[i]->mutable_gpu_data();
    const int num = bottom[i]->shape(0);
    if (reverse_dimensions()) {
      BackwardGemmGpu(bottom[i]->gpu_data(), weight, top_data, num);
    } else {
      ForwardGemmGpu(bottom[i]->gpu_data(), weight, top_data, num);
    }
    if (bias_term_) ForwardBiasGpu(top_data, blobs_[1]->gpu_data(), num);
  }
}

void BaseConvolutionLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
#ifdef NEREUS_HAVE_CUDNN
  if (cudnn_) return BackwardCudnn(top, propagate_down, bottom);
#endif
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->gpu_diff();
    const int num = top[i]->shape(0);
    if (bias_term_ && param_propagate_down(1)) BackwardBiasGpu(blobs_[1]->mutable_gpu_diff(), top_diff, num);
    const float* bottom_data = bottom[i]->gpu_data();
    if (!reverse_dimensions()) {
      // dW += dy * im2col(x)^T; dx = col2im(W^T * dy).
      if (param_propagate_down(0)) WeightGemmGpu(bottom_data, top_diff, blobs_[0]->mutable_gpu_diff(), num);
      if (propagate_down[i]) BackwardGemmGpu(top_diff, weight, bottom[i]->mutable_gpu_diff(), num);
    } else {
      // dW += x * im2col(dy)^T; dx = W * im2col(dy).
      if (param_propagate_down(0)) WeightGemmGpu(top_diff, bottom_data, blobs_[0]->mutable_gpu_diff(), num);
      if (propagate_down[i]) ForwardGemmGpu(top_diff, weight, bottom[i]->mutable_gpu_diff(), num);
    }
  }
}

#ifdef NEREUS_HAVE_CUDNN
// cuDNN runs the convolution from its input to its output: Convolution's
// bottom to its top, Deconvolution's top to its bottom (so its forward is
// cuDNN's backward-data pass, and its backward's bottom diff the forward).
void BaseConvolutionLayer::ForwardCudnn(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < bottom.size() && device()->ok(); ++i) {
    float* top_data = top[i]->mutable_gpu_data();
    const float* bottom_data = bottom[i]->gpu_data();
    Status st = reverse_dimensions() ? cudnn_->BackwardData(bottom_data, weight, top_data)
                                     : cudnn_->Forward(bottom_data, weight, top_data);
    if (st.ok() && bias_term_) st = cudnn_->AddBias(blobs_[1]->gpu_data(), top_data);
    device()->RecordError(st);
  }
}

void BaseConvolutionLayer::BackwardCudnn(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                         const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->gpu_data();
  for (size_t i = 0; i < top.size() && device()->ok(); ++i) {
    const float* top_diff = top[i]->gpu_diff();
    const float* bottom_data = bottom[i]->gpu_data();
    Status st;
    if (bias_term_ && param_propagate_down(1)) st = cudnn_->BackwardBias(top_diff, blobs_[1]->mutable_gpu_diff());
    if (!reverse_dimensions()) {
      if (st.ok() && param_propagate_down(0))
        st = cudnn_->BackwardFilter(bottom_data, top_diff, blobs_[0]->mutable_gpu_diff());
      if (st.ok() && propagate_down[i]) st = cudnn_->BackwardData(top_diff, weight, bottom[i]->mutable_gpu_diff());
    } else {
      if (st.ok() && param_propagate_down(0))
        st = cudnn_->BackwardFilter(top_diff, bottom_data, blobs_[0]->mutable_gpu_diff());
      if (st.ok() && propagate_down[i]) st = cudnn_->Forward(top_diff, weight, bottom[i]->mutable_gpu_diff());
    }
    device()->RecordError(st);
  }
}
#endif

template <typename F>
void BaseConvolutionLayer::ForEachChunkGpu(int num, F f) {
  const int chunk = GpuChunk(num, ColumnFloats());
  for (int n0 = 0; n0 < num && device()->ok(); n0 += chunk) f(n0, std::min(chunk, num - n0));
}

template <typename F>
void BaseConvolutionLayer::ForEachColumnChunkGpu(const float* input, int num, F f) {
  const int in_dim = image_sizes().in;
  ForEachChunkGpu(num, [&](int n0, int k) {
    long long col_stride = 0;
    const float* col = Im2ColGpu(input + static_cast<int64_t>(n0) * in_dim, k, &col_stride);
    f(n0, k, col, col_stride);
  });
}

void BaseConvolutionLayer::ForwardGemmGpu(const float* input, const float* weights, float* output, int num) {
  const int out_dim = image_sizes().out;
  const GroupOffsets o = group_offsets();
  ForEachColumnChunkGpu(input, num, [&](int n0, int k, const float* col, long long col_stride) {
    for (int g = 0; g < group_; ++g) {
      caffe_gpu_gemm_strided_batched(device(), CblasNoTrans, CblasNoTrans, o.out_per_group, conv_out_spatial_dim_,
                                     kernel_dim_, 1.0f, weights + o.weight * g, 0, col + o.col * g, col_stride, 0.0f,
                                     output + static_cast<int64_t>(n0) * out_dim + o.output * g, out_dim, k);
    }
  });
}

void BaseConvolutionLayer::ForwardBiasGpu(float* output, const float* bias, int num) {
  // Every image's output (num_output_ x out_spatial_dim_) += bias * 1^T.
  caffe_gpu_gemm_strided_batched(device(), CblasNoTrans, CblasNoTrans, num_output_, out_spatial_dim_, 1, 1.0f, bias, 0,
                                 bias_multiplier_.gpu_data(), 0, 1.0f, output, num_output_ * out_spatial_dim_, num);
}

void BaseConvolutionLayer::BackwardGemmGpu(const float* output, const float* weights, float* input, int num) {
  const ImageSizes size = image_sizes();
  const GroupOffsets o = group_offsets();
  ForEachChunkGpu(num, [&](int n0, int k) {
    float* in = input + static_cast<int64_t>(n0) * size.in;
    long long col_stride = size.in;
    float* col = is_1x1() ? in : ColumnsGpu(k, &col_stride);  // 1x1: col2im is the identity.
    for (int g = 0; g < group_; ++g) {
      caffe_gpu_gemm_strided_batched(device(), CblasTrans, CblasNoTrans, kernel_dim_, conv_out_spatial_dim_,
                                     o.out_per_group, 1.0f, weights + o.weight * g, 0,
                                     output + static_cast<int64_t>(n0) * size.out + o.output * g, size.out, 0.0f,
                                     col + o.col * g, col_stride, k);
    }
    if (!is_1x1()) layers::Col2ImGpu(device(), col, geometry_, in, k);
  });
}

void BaseConvolutionLayer::WeightGemmGpu(const float* input, const float* output, float* weights, int num) {
  // One GEMM per group and chunk of images, over the chunk's columns side by
  // side (im2col.h: image-major columns, and the outputs brought into rows
  // to match): dW += rows(dY)[M, k S] * columns(X)[K, k S]^T.
  const ImageSizes size = image_sizes();
  const GroupOffsets o = group_offsets();
  const int spatial = conv_out_spatial_dim_;
  const int column_rows = kernel_dim_ * group_;
  const int chunk = GpuChunk(num, static_cast<size_t>(column_rows + conv_out_channels_) * spatial);
  for (int n0 = 0; n0 < num && device()->ok(); n0 += chunk) {
    const int k = std::min(chunk, num - n0);
    const long long width = static_cast<long long>(k) * spatial;  // Columns of the chunk's GEMM.
    float* columns = WorkspaceGpu(static_cast<size_t>(column_rows + conv_out_channels_) * width);
    if (columns == nullptr) return;
    float* rows = columns + column_rows * width;
    const float* in = input + static_cast<int64_t>(n0) * size.in;
    if (is_1x1()) {
      layers::ImagesToRowsGpu(device(), in, k, conv_in_channels_, spatial, columns);
    } else {
      layers::Im2ColImageMajorGpu(device(), in, geometry_, k, columns);
    }
    layers::ImagesToRowsGpu(device(), output + static_cast<int64_t>(n0) * size.out, k, conv_out_channels_, spatial,
                            rows);
    for (int g = 0; g < group_; ++g) {
      caffe_gpu_gemm(device(), CblasNoTrans, CblasTrans, o.out_per_group, kernel_dim_, static_cast<int>(width), 1.0f,
                     rows + o.out_per_group * g * width, columns + kernel_dim_ * g * width, 1.0f,
                     weights + o.weight * g);
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

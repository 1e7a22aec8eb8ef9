#include "worker/trainer/layers/deconv_layer.h"

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math_functions.h"

namespace nereus {

// The column transform works on the top (the larger image): geometry_
// describes the top, and Im2Col of the top has the bottom's spatial size as
// its number of columns.
void DeconvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->num_axes() == 4) << "bottom must be [N, C, H, W], got " << bottom[0]->shape_string();
  LAYER_CHECK(bottom[0]->shape(1) == blobs_[0]->shape(0))
      << "bottom has " << bottom[0]->shape(1) << " channels, the weights expect " << blobs_[0]->shape(0);
  for (size_t i = 1; i < bottom.size(); ++i) {
    LAYER_CHECK(bottom[i]->shape() == bottom[0]->shape())
        << "all bottoms must have the same shape: bottom 0 is " << bottom[0]->shape_string() << ", bottom " << i
        << " is " << bottom[i]->shape_string();
  }
  in_channels_ = bottom[0]->shape(1);
  const int in_h = bottom[0]->shape(2);
  const int in_w = bottom[0]->shape(3);
  out_h_ = geometry_.stride_h * (in_h - 1) + geometry_.dilation_h * (geometry_.kernel_h - 1) + 1 - 2 * geometry_.pad_h;
  out_w_ = geometry_.stride_w * (in_w - 1) + geometry_.dilation_w * (geometry_.kernel_w - 1) + 1 - 2 * geometry_.pad_w;
  LAYER_CHECK(out_h_ > 0 && out_w_ > 0) << "the padding is larger than the output of input "
                                        << bottom[0]->shape_string();
  geometry_.channels = num_output_;
  geometry_.height = out_h_;
  geometry_.width = out_w_;
  LAYER_CHECK(geometry_.output_h() == in_h && geometry_.output_w() == in_w)
      << "internal: the transposed geometry does not map back to the input";
  for (Blob* t : top) t->Reshape({bottom[0]->shape(0), num_output_, out_h_, out_w_});
  kernel_dim_ = (num_output_ / group_) * geometry_.kernel_h * geometry_.kernel_w;
  in_spatial_dim_ = in_h * in_w;
  out_spatial_dim_ = out_h_ * out_w_;
  col_buffer_.resize(static_cast<size_t>(kernel_dim_) * group_ * in_spatial_dim_);
  bias_multiplier_.assign(out_spatial_dim_, 1.0f);
}

void DeconvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->cpu_data();
  const int in_per_group = in_channels_ / group_;
  const int weight_offset = in_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * in_spatial_dim_;
  const int input_offset = in_per_group * in_spatial_dim_;
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  float* col = col_buffer_.data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* bottom_data = bottom[i]->cpu_data();
    float* top_data = top[i]->mutable_cpu_data();
    for (int n = 0; n < bottom[i]->shape(0); ++n) {
      const float* input = bottom_data + n * bottom_dim;
      // col = W^T * x per group, then scatter onto the output with col2im.
      for (int g = 0; g < group_; ++g) {
        caffe_cpu_gemm(CblasTrans, CblasNoTrans, kernel_dim_, in_spatial_dim_, in_per_group, 1.0f,
                       weight + weight_offset * g, input + input_offset * g, 0.0f, col + col_offset * g);
      }
      float* output = top_data + n * top_dim;
      layers::Col2Im(col, geometry_, output);
      if (bias_term_) {
        caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, num_output_, out_spatial_dim_, 1, 1.0f, blobs_[1]->cpu_data(),
                       bias_multiplier_.data(), 1.0f, output);
      }
    }
  }
}

void DeconvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                      const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->cpu_data();
  float* weight_diff = blobs_[0]->mutable_cpu_diff();
  const int in_per_group = in_channels_ / group_;
  const int weight_offset = in_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * in_spatial_dim_;
  const int input_offset = in_per_group * in_spatial_dim_;
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  float* col = col_buffer_.data();
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->cpu_diff();
    if (bias_term_ && param_propagate_down(1)) {
      float* bias_diff = blobs_[1]->mutable_cpu_diff();
      for (int n = 0; n < top[i]->shape(0); ++n) {
        caffe_cpu_gemv(CblasNoTrans, num_output_, out_spatial_dim_, 1.0f, top_diff + n * top_dim,
                       bias_multiplier_.data(), 1.0f, bias_diff);
      }
    }
    const bool weight_grad = param_propagate_down(0);
    if (!weight_grad && !propagate_down[i]) continue;
    const float* bottom_data = bottom[i]->cpu_data();
    float* bottom_diff = propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr;
    for (int n = 0; n < top[i]->shape(0); ++n) {
      // The output gradient as columns: im2col of the top diff.
      layers::Im2Col(top_diff + n * top_dim, geometry_, col);
      if (weight_grad) {
        // dW += x * col^T, per group.
        for (int g = 0; g < group_; ++g) {
          caffe_cpu_gemm(CblasNoTrans, CblasTrans, in_per_group, kernel_dim_, in_spatial_dim_, 1.0f,
                         bottom_data + n * bottom_dim + input_offset * g, col + col_offset * g, 1.0f,
                         weight_diff + weight_offset * g);
        }
      }
      if (bottom_diff != nullptr) {
        // dx = W * col, per group (a forward convolution of the top diff).
        for (int g = 0; g < group_; ++g) {
          caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, in_per_group, in_spatial_dim_, kernel_dim_, 1.0f,
                         weight + weight_offset * g, col + col_offset * g, 0.0f,
                         bottom_diff + n * bottom_dim + input_offset * g);
        }
      }
    }
  }
}

}  // namespace nereus

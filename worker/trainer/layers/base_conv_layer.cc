#include "worker/trainer/layers/base_conv_layer.h"

#include <string>

#include "worker/trainer/gpu/device.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {
namespace {

// Reads a repeated spatial field (kernel_size, pad, stride, dilation) given
// once for both axes or once per axis, or the explicit _h/_w pair.
Status ReadSpatial(const char* name, const google::protobuf::RepeatedField<uint32_t>& values, bool has_h, uint32_t h,
                   bool has_w, uint32_t w, int default_value, int* out_h, int* out_w) {
  const std::string field(name);
  if (has_h || has_w) {
    if (!(has_h && has_w)) {
      return InvalidArgumentError(field + "_h and " + field + "_w must be given together");
    }
    if (values.size() != 0) {
      return InvalidArgumentError("either " + field + " or " + field + "_h/" + field + "_w may be given, not both");
    }
    *out_h = static_cast<int>(h);
    *out_w = static_cast<int>(w);
    return Status::OK();
  }
  switch (values.size()) {
    case 0:
      if (default_value < 0) {
        return InvalidArgumentError(field + " (or " + field + "_h and " + field + "_w) must be given");
      }
      *out_h = *out_w = default_value;
      return Status::OK();
    case 1:
      *out_h = *out_w = static_cast<int>(values.Get(0));
      return Status::OK();
    case 2:
      *out_h = static_cast<int>(values.Get(0));
      *out_w = static_cast<int>(values.Get(1));
      return Status::OK();
    default:
      return InvalidArgumentError(field + " must be given once or once per spatial axis (2), got " +
                                  std::to_string(values.size()) + " values");
  }
}

}  // namespace

Status ParseConvKernel(const caffe::ConvolutionParameter& p, layers::ConvGeometry* g) {
  RETURN_IF_ERROR(ReadSpatial("kernel", p.kernel_size(), p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(), p.kernel_w(),
                              -1, &g->kernel_h, &g->kernel_w));
  RETURN_IF_ERROR(
      ReadSpatial("pad", p.pad(), p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), 0, &g->pad_h, &g->pad_w));
  RETURN_IF_ERROR(ReadSpatial("stride", p.stride(), p.has_stride_h(), p.stride_h(), p.has_stride_w(), p.stride_w(), 1,
                              &g->stride_h, &g->stride_w));
  RETURN_IF_ERROR(ReadSpatial("dilation", p.dilation(), false, 0, false, 0, 1, &g->dilation_h, &g->dilation_w));
  if (g->kernel_h <= 0 || g->kernel_w <= 0) {
    return InvalidArgumentError("kernel size must be > 0, got kernel_h=" + std::to_string(g->kernel_h) +
                                " kernel_w=" + std::to_string(g->kernel_w));
  }
  if (g->stride_h <= 0 || g->stride_w <= 0) {
    return InvalidArgumentError("stride must be > 0, got stride_h=" + std::to_string(g->stride_h) +
                                " stride_w=" + std::to_string(g->stride_w));
  }
  if (g->dilation_h <= 0 || g->dilation_w <= 0) {
    return InvalidArgumentError("dilation must be > 0");
  }
  return Status::OK();
}

Status BaseConvolutionLayer::ParseGeometry(const Blob& bottom) {
  const caffe::ConvolutionParameter& p = layer_param_.convolution_param();
  const int num_axes = bottom.num_axes();
  if (p.axis() < -num_axes || p.axis() >= num_axes) {
    return LayerError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                      bottom.shape_string());
  }
  const int channel_axis = bottom.CanonicalAxisIndex(p.axis());
  if (channel_axis != 1 || num_axes != 4) {
    return LayerError(
        "only 2-D convolution of [N, C, H, W] bottoms with axis 1 is supported; got "
        "bottom shape " +
        bottom.shape_string() + " and axis " + std::to_string(p.axis()));
  }
  if (p.force_nd_im2col()) return LayerError("force_nd_im2col is not supported");
  const Status parsed = ParseConvKernel(p, &geometry_);
  if (!parsed.ok()) return LayerError(parsed.message());
  return Status::OK();
}

Status BaseConvolutionLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ConvolutionParameter& p = layer_param_.convolution_param();
  if (!layer_param_.has_convolution_param() || !p.has_num_output() || p.num_output() == 0) {
    return LayerError("convolution_param.num_output must be given and > 0");
  }
  RETURN_IF_ERROR(ParseGeometry(*bottom[0]));
  num_output_ = static_cast<int>(p.num_output());
  group_ = static_cast<int>(p.group());
  bias_term_ = p.bias_term();
  const int channels = bottom[0]->shape(1);
  if (group_ <= 0) return LayerError("group must be > 0");
  if (channels % group_ != 0) {
    return LayerError("the number of input channels (" + std::to_string(channels) + ") must be divisible by group (" +
                      std::to_string(group_) + ")");
  }
  if (num_output_ % group_ != 0) {
    return LayerError("num_output (" + std::to_string(num_output_) + ") must be divisible by group (" +
                      std::to_string(group_) + ")");
  }
  for (size_t i = 1; i < bottom.size(); ++i) {
    if (bottom[i]->shape() != bottom[0]->shape()) {
      return LayerError("all bottoms must have the same shape: bottom 0 is " + bottom[0]->shape_string() + ", bottom " +
                        std::to_string(i) + " is " + bottom[i]->shape_string());
    }
  }
  const int out_h = (bottom[0]->shape(2) + 2 * geometry_.pad_h - (geometry_.dilation_h * (geometry_.kernel_h - 1) + 1));
  const int out_w = (bottom[0]->shape(3) + 2 * geometry_.pad_w - (geometry_.dilation_w * (geometry_.kernel_w - 1) + 1));
  if (!reverse_dimensions() && (out_h < 0 || out_w < 0)) {
    return LayerError("the (dilated) kernel is larger than the padded input " + bottom[0]->shape_string());
  }

  const std::vector<int> weight_shape =
      reverse_dimensions() ? std::vector<int>{channels, num_output_ / group_, geometry_.kernel_h, geometry_.kernel_w}
                           : std::vector<int>{num_output_, channels / group_, geometry_.kernel_h, geometry_.kernel_w};
  RETURN_IF_ERROR(SetUpWeightAndBias(weight_shape, p.weight_filler(), bias_term_, num_output_, p.bias_filler()));
  if (device() != nullptr) {
    ASSIGN_OR_RETURN(engine_, gpu::ChooseConvEngine(p.engine(), device()->cudnn_availability(), layer_param_.name()));
#ifdef NEREUS_HAVE_CUDNN
    if (engine_ == gpu::ConvEngine::kCudnn)
      cudnn_ = std::make_unique<CudnnConvolution>(device()->cudnn(), layer_param_.name());
#endif
  }
  return Status::OK();
}

void BaseConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->num_axes() == 4) << "bottom must be [N, C, H, W], got " << bottom[0]->shape_string();
  const int expected_channels = reverse_dimensions() ? blobs_[0]->shape(0) : blobs_[0]->shape(1) * group_;
  LAYER_CHECK(bottom[0]->shape(1) == expected_channels)
      << "bottom has " << bottom[0]->shape(1) << " channels, the weights expect " << expected_channels;
  for (size_t i = 1; i < bottom.size(); ++i) {
    LAYER_CHECK(bottom[i]->shape() == bottom[0]->shape())
        << "all bottoms must have the same shape: bottom 0 is " << bottom[0]->shape_string() << ", bottom " << i
        << " is " << bottom[i]->shape_string();
  }
  const int channels = bottom[0]->shape(1);
  const int in_h = bottom[0]->shape(2);
  const int in_w = bottom[0]->shape(3);
  ComputeOutputShape(in_h, in_w);
  LAYER_CHECK(out_h_ > 0 && out_w_ > 0) << (reverse_dimensions()
                                                ? "the padding is larger than the output of input "
                                                : "the (dilated) kernel is larger than the padded input ")
                                        << bottom[0]->shape_string();
  for (Blob* t : top) t->Reshape({bottom[0]->shape(0), num_output_, out_h_, out_w_});
  out_spatial_dim_ = out_h_ * out_w_;
  // The convolution's input image: the bottom, or the top when reversed.
  if (reverse_dimensions()) {
    conv_in_channels_ = num_output_;
    conv_out_channels_ = channels;
    geometry_.channels = num_output_;
    geometry_.height = out_h_;
    geometry_.width = out_w_;
    LAYER_CHECK(geometry_.output_h() == in_h && geometry_.output_w() == in_w)
        << "internal: the transposed geometry does not map back to the input";
    conv_out_spatial_dim_ = in_h * in_w;
  } else {
    conv_in_channels_ = channels;
    conv_out_channels_ = num_output_;
    geometry_.channels = channels;
    geometry_.height = in_h;
    geometry_.width = in_w;
    conv_out_spatial_dim_ = out_spatial_dim_;
  }
  kernel_dim_ = (conv_in_channels_ / group_) * geometry_.kernel_h * geometry_.kernel_w;
#ifdef NEREUS_HAVE_CUDNN
  if (cudnn_) {
    const int conv_out_h = reverse_dimensions() ? in_h : out_h_;
    const int conv_out_w = reverse_dimensions() ? in_w : out_w_;
    Status st = cudnn_->Reshape(bottom[0]->shape(0), geometry_, conv_out_channels_, conv_out_h, conv_out_w, group_,
                                reverse_dimensions());
    if (!st.ok()) device()->RecordError(st);
  }
#endif
  col_buffer_.Reshape({kernel_dim_ * group_, conv_out_spatial_dim_});
  // Refilled only when the size changes: on a GPU, a host write here would
  // mean a copy to the device (and a wait for it) at every forward.
  if (bias_term_ && bias_multiplier_.count() != out_spatial_dim_) {
    bias_multiplier_.Reshape({out_spatial_dim_});
    caffe_set(out_spatial_dim_, 1.0f, bias_multiplier_.mutable_cpu_data());
  }
}

void BaseConvolutionLayer::ComputeOutputShape(int in_h, int in_w) {
  const layers::ConvGeometry& k = geometry_;
  if (reverse_dimensions()) {
    out_h_ = k.stride_h * (in_h - 1) + k.dilation_h * (k.kernel_h - 1) + 1 - 2 * k.pad_h;
    out_w_ = k.stride_w * (in_w - 1) + k.dilation_w * (k.kernel_w - 1) + 1 - 2 * k.pad_w;
  } else {
    layers::ConvGeometry g = geometry_;
    g.height = in_h;
    g.width = in_w;
    out_h_ = g.output_h();
    out_w_ = g.output_w();
  }
}

BaseConvolutionLayer::GroupOffsets BaseConvolutionLayer::group_offsets() const {
  const int out_per_group = conv_out_channels_ / group_;
  return {out_per_group, out_per_group * kernel_dim_, kernel_dim_ * conv_out_spatial_dim_,
          out_per_group * conv_out_spatial_dim_};
}

void BaseConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->cpu_data();
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* bottom_data = bottom[i]->cpu_data();
    float* top_data = top[i]->mutable_cpu_data();
    for (int n = 0; n < bottom[i]->shape(0); ++n) {
      if (reverse_dimensions()) {
        BackwardGemm(bottom_data + n * bottom_dim, weight, top_data + n * top_dim);
      } else {
        ForwardGemm(bottom_data + n * bottom_dim, weight, top_data + n * top_dim);
      }
      if (bias_term_) ForwardBias(top_data + n * top_dim, blobs_[1]->cpu_data());
    }
  }
}

void BaseConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                        const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->cpu_data();
  float* weight_diff = blobs_[0]->mutable_cpu_diff();
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  for (size_t i = 0; i < top.size(); ++i) {
    const float* top_diff = top[i]->cpu_diff();
    if (bias_term_ && param_propagate_down(1)) {
      float* bias_diff = blobs_[1]->mutable_cpu_diff();
      for (int n = 0; n < top[i]->shape(0); ++n) BackwardBias(bias_diff, top_diff + n * top_dim);
    }
    const bool weight_grad = param_propagate_down(0);
    if (!weight_grad && !propagate_down[i]) continue;
    const float* bottom_data = bottom[i]->cpu_data();
    float* bottom_diff = propagate_down[i] ? bottom[i]->mutable_cpu_diff() : nullptr;
    for (int n = 0; n < top[i]->shape(0); ++n) {
      const float* x = bottom_data + n * bottom_dim;
      const float* dy = top_diff + n * top_dim;
      float* dx = bottom_diff == nullptr ? nullptr : bottom_diff + n * bottom_dim;
      if (!reverse_dimensions()) {
        // dW += dy * im2col(x)^T; dx = col2im(W^T * dy).
        if (weight_grad) WeightGemm(x, dy, weight_diff);
        if (dx != nullptr) BackwardGemm(dy, weight, dx);
      } else {
        // dW += x * im2col(dy)^T; dx = W * im2col(dy), reusing the columns
        // WeightGemm made.
        if (weight_grad) WeightGemm(dy, x, weight_diff);
        if (dx != nullptr) ForwardGemm(dy, weight, dx, /*skip_im2col=*/weight_grad);
      }
    }
  }
}

void BaseConvolutionLayer::ForwardGemm(const float* input, const float* weights, float* output, bool skip_im2col) {
  float* col = col_buffer_.mutable_cpu_data();
  if (!skip_im2col) layers::Im2Col(input, geometry_, col);
  const auto [out_per_group, weight_offset, col_offset, output_offset] = group_offsets();
  for (int g = 0; g < group_; ++g) {
    caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, out_per_group, conv_out_spatial_dim_, kernel_dim_, 1.0f,
                   weights + weight_offset * g, col + col_offset * g, 0.0f, output + output_offset * g);
  }
}

void BaseConvolutionLayer::ForwardBias(float* output, const float* bias) {
  caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, num_output_, out_spatial_dim_, 1, 1.0f, bias, bias_multiplier_.cpu_data(),
                 1.0f, output);
}

void BaseConvolutionLayer::BackwardGemm(const float* output, const float* weights, float* input) {
  float* col = col_buffer_.mutable_cpu_data();
  const auto [out_per_group, weight_offset, col_offset, output_offset] = group_offsets();
  for (int g = 0; g < group_; ++g) {
    caffe_cpu_gemm(CblasTrans, CblasNoTrans, kernel_dim_, conv_out_spatial_dim_, out_per_group, 1.0f,
                   weights + weight_offset * g, output + output_offset * g, 0.0f, col + col_offset * g);
  }
  layers::Col2Im(col, geometry_, input);
}

void BaseConvolutionLayer::WeightGemm(const float* input, const float* output, float* weights) {
  float* col = col_buffer_.mutable_cpu_data();
  layers::Im2Col(input, geometry_, col);
  const auto [out_per_group, weight_offset, col_offset, output_offset] = group_offsets();
  for (int g = 0; g < group_; ++g) {
    caffe_cpu_gemm(CblasNoTrans, CblasTrans, out_per_group, kernel_dim_, conv_out_spatial_dim_, 1.0f,
                   output + output_offset * g, col + col_offset * g, 1.0f, weights + weight_offset * g);
  }
}

void BaseConvolutionLayer::BackwardBias(float* bias, const float* output) {
  caffe_cpu_gemv(CblasNoTrans, num_output_, out_spatial_dim_, 1.0f, output, bias_multiplier_.cpu_data(), 1.0f, bias);
}

}  // namespace nereus

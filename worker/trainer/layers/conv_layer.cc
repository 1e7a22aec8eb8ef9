#include "worker/trainer/layers/conv_layer.h"

#include <string>

#include "worker/trainer/filler.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math_functions.h"

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

Status ConvolutionLayer::ParseGeometry(const Blob& bottom) {
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
  auto with_name = [this](const Status& s) { return s.ok() ? s : LayerError(s.message()); };
  RETURN_IF_ERROR(with_name(ReadSpatial("kernel", p.kernel_size(), p.has_kernel_h(), p.kernel_h(), p.has_kernel_w(),
                                        p.kernel_w(), -1, &geometry_.kernel_h, &geometry_.kernel_w)));
  RETURN_IF_ERROR(with_name(ReadSpatial("pad", p.pad(), p.has_pad_h(), p.pad_h(), p.has_pad_w(), p.pad_w(), 0,
                                        &geometry_.pad_h, &geometry_.pad_w)));
  RETURN_IF_ERROR(with_name(ReadSpatial("stride", p.stride(), p.has_stride_h(), p.stride_h(), p.has_stride_w(),
                                        p.stride_w(), 1, &geometry_.stride_h, &geometry_.stride_w)));
  RETURN_IF_ERROR(with_name(
      ReadSpatial("dilation", p.dilation(), false, 0, false, 0, 1, &geometry_.dilation_h, &geometry_.dilation_w)));
  if (geometry_.kernel_h <= 0 || geometry_.kernel_w <= 0) {
    return LayerError("kernel size must be > 0, got kernel_h=" + std::to_string(geometry_.kernel_h) +
                      " kernel_w=" + std::to_string(geometry_.kernel_w));
  }
  if (geometry_.stride_h <= 0 || geometry_.stride_w <= 0) {
    return LayerError("stride must be > 0, got stride_h=" + std::to_string(geometry_.stride_h) +
                      " stride_w=" + std::to_string(geometry_.stride_w));
  }
  if (geometry_.dilation_h <= 0 || geometry_.dilation_w <= 0) {
    return LayerError("dilation must be > 0");
  }
  return Status::OK();
}

Status ConvolutionLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
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
  if (!blobs_.empty()) {
    // Parameters already present (shared or loaded): keep them, check shape.
    if (blobs_[0]->shape() != weight_shape) {
      return LayerError("existing weight blob has shape " + blobs_[0]->shape_string() + ", expected " +
                        Blob(weight_shape).shape_string());
    }
  } else {
    blobs_.push_back(std::make_shared<Blob>(weight_shape));
    Status filled = FillBlob(p.weight_filler(), blobs_[0].get(), rng());
    if (!filled.ok()) return LayerError("weight_filler: " + filled.message());
    if (bias_term_) {
      blobs_.push_back(std::make_shared<Blob>(std::vector<int>{num_output_}));
      filled = FillBlob(p.bias_filler(), blobs_[1].get(), rng());
      if (!filled.ok()) return LayerError("bias_filler: " + filled.message());
    }
  }
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

void ConvolutionLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->num_axes() == 4) << "bottom must be [N, C, H, W], got " << bottom[0]->shape_string();
  LAYER_CHECK(bottom[0]->shape(1) == static_cast<int>(blobs_[0]->shape(1)) * group_)
      << "bottom has " << bottom[0]->shape(1) << " channels, the weights expect " << blobs_[0]->shape(1) * group_;
  for (size_t i = 1; i < bottom.size(); ++i) {
    LAYER_CHECK(bottom[i]->shape() == bottom[0]->shape())
        << "all bottoms must have the same shape: bottom 0 is " << bottom[0]->shape_string() << ", bottom " << i
        << " is " << bottom[i]->shape_string();
  }
  geometry_.channels = bottom[0]->shape(1);
  geometry_.height = bottom[0]->shape(2);
  geometry_.width = bottom[0]->shape(3);
  out_h_ = geometry_.output_h();
  out_w_ = geometry_.output_w();
  LAYER_CHECK(out_h_ > 0 && out_w_ > 0) << "the (dilated) kernel is larger than the padded input "
                                        << bottom[0]->shape_string();
  for (size_t i = 0; i < top.size(); ++i) {
    top[i]->Reshape({bottom[0]->shape(0), num_output_, out_h_, out_w_});
  }
  kernel_dim_ = (geometry_.channels / group_) * geometry_.kernel_h * geometry_.kernel_w;
  out_spatial_dim_ = out_h_ * out_w_;
  col_buffer_.resize(static_cast<size_t>(kernel_dim_) * group_ * out_spatial_dim_);
  bias_multiplier_.assign(out_spatial_dim_, 1.0f);
}

void ConvolutionLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* weight = blobs_[0]->cpu_data();
  const int out_per_group = num_output_ / group_;
  const int weight_offset = out_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * out_spatial_dim_;
  const int output_offset = out_per_group * out_spatial_dim_;
  const int bottom_dim = bottom[0]->count(1);
  const int top_dim = top[0]->count(1);
  float* col = col_buffer_.data();
  for (size_t i = 0; i < bottom.size(); ++i) {
    const float* bottom_data = bottom[i]->cpu_data();
    float* top_data = top[i]->mutable_cpu_data();
    for (int n = 0; n < bottom[i]->shape(0); ++n) {
      layers::Im2Col(bottom_data + n * bottom_dim, geometry_, col);
      float* output = top_data + n * top_dim;
      for (int g = 0; g < group_; ++g) {
        caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, out_per_group, out_spatial_dim_, kernel_dim_, 1.0f,
                       weight + weight_offset * g, col + col_offset * g, 0.0f, output + output_offset * g);
      }
      if (bias_term_) {
        caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, num_output_, out_spatial_dim_, 1, 1.0f, blobs_[1]->cpu_data(),
                       bias_multiplier_.data(), 1.0f, output);
      }
    }
  }
}

void ConvolutionLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                    const std::vector<Blob*>& bottom) {
  const float* weight = blobs_[0]->cpu_data();
  float* weight_diff = blobs_[0]->mutable_cpu_diff();
  const int out_per_group = num_output_ / group_;
  const int weight_offset = out_per_group * kernel_dim_;
  const int col_offset = kernel_dim_ * out_spatial_dim_;
  const int output_offset = out_per_group * out_spatial_dim_;
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
      const float* output_diff = top_diff + n * top_dim;
      if (weight_grad) {
        // dW += top_diff * col^T, per group.
        layers::Im2Col(bottom_data + n * bottom_dim, geometry_, col);
        for (int g = 0; g < group_; ++g) {
          caffe_cpu_gemm(CblasNoTrans, CblasTrans, out_per_group, kernel_dim_, out_spatial_dim_, 1.0f,
                         output_diff + output_offset * g, col + col_offset * g, 1.0f, weight_diff + weight_offset * g);
        }
      }
      if (bottom_diff != nullptr) {
        // col = W^T * top_diff, per group; then scatter back with col2im.
        for (int g = 0; g < group_; ++g) {
          caffe_cpu_gemm(CblasTrans, CblasNoTrans, kernel_dim_, out_spatial_dim_, out_per_group, 1.0f,
                         weight + weight_offset * g, output_diff + output_offset * g, 0.0f, col + col_offset * g);
        }
        layers::Col2Im(col, geometry_, bottom_diff + n * bottom_dim);
      }
    }
  }
}

}  // namespace nereus

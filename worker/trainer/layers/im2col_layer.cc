#include "worker/trainer/layers/im2col_layer.h"

#include <string>

#include "worker/trainer/layers/base_conv_layer.h"
#include "worker/trainer/layers/layer_check.h"

namespace nereus {

StatusOr<int> Im2colLayer::ChannelAxis(const Blob& bottom) const {
  const int axis = layer_param_.convolution_param().axis();
  const int num_axes = bottom.num_axes();
  if (axis < -num_axes || axis >= num_axes) {
    return InvalidArgumentError("convolution_param.axis " + std::to_string(axis) +
                                " is out of range for bottom shape " + bottom.shape_string());
  }
  const int channel_axis = bottom.CanonicalAxisIndex(axis);
  if (num_axes - channel_axis - 1 != 2) {
    return InvalidArgumentError(
        "only 2 spatial axes after the channel axis are supported (Caffe's N-d im2col is "
        "not); bottom " +
        bottom.shape_string() + " has " + std::to_string(num_axes - channel_axis - 1) + " after axis " +
        std::to_string(channel_axis));
  }
  return channel_axis;
}

Status Im2colLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const StatusOr<int> axis = ChannelAxis(*bottom[0]);
  if (!axis.ok()) return LayerError(axis.status().message());
  const Status parsed = ParseConvKernel(layer_param_.convolution_param(), &geometry_);
  if (!parsed.ok()) return LayerError(parsed.message());
  geometry_.height = bottom[0]->shape(*axis + 1);
  geometry_.width = bottom[0]->shape(*axis + 2);
  if (geometry_.output_h() <= 0 || geometry_.output_w() <= 0) {
    return LayerError("the (dilated) kernel is larger than the padded input " + bottom[0]->shape_string());
  }
  return Status::OK();
}

void Im2colLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const StatusOr<int> axis = ChannelAxis(*bottom[0]);
  LAYER_CHECK(axis.ok()) << axis.status().message();
  const int c = *axis;
  geometry_.channels = bottom[0]->shape(c);
  geometry_.height = bottom[0]->shape(c + 1);
  geometry_.width = bottom[0]->shape(c + 2);
  LAYER_CHECK(geometry_.output_h() > 0 && geometry_.output_w() > 0)
      << "the (dilated) kernel is larger than the padded input " << bottom[0]->shape_string();
  std::vector<int> shape = bottom[0]->shape();
  shape[c] *= geometry_.kernel_h * geometry_.kernel_w;
  shape[c + 1] = geometry_.output_h();
  shape[c + 2] = geometry_.output_w();
  top[0]->Reshape(shape);
  num_ = bottom[0]->count(0, c);
  bottom_dim_ = bottom[0]->count(c);
  top_dim_ = top[0]->count(c);
}

void Im2colLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  for (int n = 0; n < num_; ++n) {
    layers::Im2Col(in + static_cast<long>(n) * bottom_dim_, geometry_, out + static_cast<long>(n) * top_dim_);
  }
}

void Im2colLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  for (int n = 0; n < num_; ++n) {
    layers::Col2Im(top_diff + static_cast<long>(n) * top_dim_, geometry_,
                   bottom_diff + static_cast<long>(n) * bottom_dim_);
  }
}

}  // namespace nereus

#include "worker/trainer/layers/lrn_layer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

Status LRNLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::LRNParameter& p = layer_param_.lrn_param();
  size_ = static_cast<int>(p.local_size());
  if (size_ <= 0 || size_ % 2 == 0) {
    return LayerError("local_size must be odd and > 0, got " + std::to_string(size_));
  }
  const Status four_axes = ReadFourAxes(*bottom[0], &channels_, &height_, &width_);
  if (!four_axes.ok()) return LayerError(four_axes.message());
  pre_pad_ = (size_ - 1) / 2;
  alpha_ = p.alpha();
  beta_ = p.beta();
  k_ = p.k();
  region_ = p.norm_region();
  return Status::OK();
}

void LRNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Status four_axes = ReadFourAxes(*bottom[0], &channels_, &height_, &width_);
  LAYER_CHECK(four_axes.ok()) << four_axes.message();
  top[0]->ReshapeLike(*bottom[0]);
  scale_.ReshapeLike(*bottom[0]);
  buffer_.ReshapeLike(*bottom[0]);
  ratio_.ReshapeLike(*bottom[0]);
}

ops::LrnGeometry LRNLayer::geometry() const {
  ops::LrnGeometry g;
  g.channels = channels_;
  g.height = height_;
  g.width = width_;
  g.size = size_;
  g.pre_pad = pre_pad_;
  g.across = region_ == caffe::LRNParameter::ACROSS_CHANNELS;
  return g;
}

void LRNLayer::WindowSum(const float* in, int num, float* out) const {
  const int plane = height_ * width_;
  if (region_ == caffe::LRNParameter::ACROSS_CHANNELS) {
    for (int n = 0; n < num; ++n) {
      const float* src = in + n * channels_ * plane;
      float* dst = out + n * channels_ * plane;
      for (int c = 0; c < channels_; ++c) {
        const int c_lo = std::max(c - pre_pad_, 0);
        const int c_hi = std::min(c - pre_pad_ + size_, channels_);
        float* d = dst + c * plane;
        std::fill(d, d + plane, 0.0f);
        for (int cc = c_lo; cc < c_hi; ++cc) {
          const float* s = src + cc * plane;
          for (int i = 0; i < plane; ++i) d[i] += s[i];
        }
      }
    }
    return;
  }
  // WITHIN_CHANNEL: a size_ x size_ square centred on each position.
  for (int p = 0; p < num * channels_; ++p) {
    const float* src = in + p * plane;
    float* dst = out + p * plane;
    for (int h = 0; h < height_; ++h) {
      const int h_lo = std::max(h - pre_pad_, 0);
      const int h_hi = std::min(h - pre_pad_ + size_, height_);
      for (int w = 0; w < width_; ++w) {
        const int w_lo = std::max(w - pre_pad_, 0);
        const int w_hi = std::min(w - pre_pad_ + size_, width_);
        float sum = 0.0f;
        for (int hh = h_lo; hh < h_hi; ++hh) {
          for (int ww = w_lo; ww < w_hi; ++ww) sum += src[hh * width_ + ww];
        }
        dst[h * width_ + w] = sum;
      }
    }
  }
}

void LRNLayer::ComputeScale(const float* x, int num) {
  const int count = num * channels_ * height_ * width_;
  float* buffer = buffer_.mutable_cpu_data();
  float* scale = scale_.mutable_cpu_data();
  for (int i = 0; i < count; ++i) buffer[i] = ops::Sqr(x[i]);
  WindowSum(buffer, num, scale);
  const bool across = region_ == caffe::LRNParameter::ACROSS_CHANNELS;
  const float offset = across ? k_ : 1.0f;
  const float coefficient = across ? alpha_ / size_ : alpha_ / (size_ * size_);
  for (int i = 0; i < count; ++i) scale[i] = ops::LrnScale(scale[i], offset, coefficient);
}

void LRNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* x = bottom[0]->cpu_data();
  float* y = top[0]->mutable_cpu_data();
  ComputeScale(x, bottom[0]->shape(0));
  const float* scale = scale_.cpu_data();
  const int count = bottom[0]->count();
  for (int i = 0; i < count; ++i) y[i] = ops::LrnForward(x[i], scale[i], beta_);
}

void LRNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  // dx_i = dy_i * scale_i^-beta
  //        - 2 * alpha' * beta * x_i * sum_{j: i in window(j)} dy_j * y_j / scale_j
  // with alpha' the coefficient of the window sum.
  const float* x = bottom[0]->cpu_data();
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  float* dx = bottom[0]->mutable_cpu_diff();
  const int count = bottom[0]->count();
  const bool across = region_ == caffe::LRNParameter::ACROSS_CHANNELS;
  const float coefficient = across ? alpha_ / size_ : alpha_ / (size_ * size_);
  const float* scale = scale_.cpu_data();
  float* ratio = ratio_.mutable_cpu_data();
  float* buffer = buffer_.mutable_cpu_data();
  for (int i = 0; i < count; ++i) ratio[i] = ops::LrnRatio(dy[i], y[i], scale[i]);
  WindowSum(ratio, bottom[0]->shape(0), buffer);
  const float cache = 2.0f * coefficient * beta_;
  for (int i = 0; i < count; ++i) dx[i] = ops::LrnBackward(dy[i], x[i], scale[i], buffer[i], beta_, cache);
}

}  // namespace nereus

#include "worker/trainer/layers/batch_norm_layer.h"

#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

// ---- BatchNorm ----

Status BatchNormLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::BatchNormParameter& p = layer_param_.batch_norm_param();
  use_global_stats_ = p.has_use_global_stats() ? p.use_global_stats() : phase_ == caffe::TEST;
  moving_average_fraction_ = p.moving_average_fraction();
  eps_ = p.eps();
  if (bottom[0]->num_axes() == 0) return LayerError("the bottom must have at least one axis");
  channels_ = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
  const std::vector<std::vector<int>> shapes = {{channels_}, {channels_}, {1}};
  if (!blobs_.empty()) {
    for (int i = 0; i < 3; ++i) {
      RETURN_IF_ERROR(CheckExistingShape(*blobs_[i], shapes[i], "blob " + std::to_string(i)));
    }
  } else {
    for (const auto& shape : shapes) {
      blobs_.push_back(std::make_shared<Blob>(shape));
      caffe_set(blobs_.back()->count(), 0.0f, blobs_.back()->mutable_cpu_data());
    }
  }
  // The statistics are not learned: lr_mult 0 (added when the prototxt gives
  // no param spec for them, as Caffe does; a non-zero one is an error).
  for (int i = 0; i < 3; ++i) {
    if (layer_param_.param_size() == i) {
      layer_param_.add_param()->set_lr_mult(0.0f);
    } else if (layer_param_.param(i).lr_mult() != 0.0f) {
      return LayerError(
          "cannot configure batch normalization statistics as layer parameters "
          "(param " +
          std::to_string(i) + " has lr_mult " + std::to_string(layer_param_.param(i).lr_mult()) + "; it must be 0)");
    }
  }
  param_propagate_down_.assign(3, false);
  return Status::OK();
}

void BatchNormLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int channels = bottom[0]->num_axes() == 1 ? 1 : bottom[0]->shape(1);
  LAYER_CHECK(channels == channels_) << "the bottom has " << channels << " channels, the layer " << channels_;
  if (top[0] != bottom[0]) top[0]->ReshapeLike(*bottom[0]);
  num_ = bottom[0]->shape(0);
  spatial_ = bottom[0]->count() / (num_ * channels_ == 0 ? 1 : num_ * channels_);
  mean_.Reshape({channels_});
  variance_.Reshape({channels_});
  x_norm_.ReshapeLike(*bottom[0]);
}

void BatchNormLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  if (bottom[0] != top[0]) caffe_copy(count, bottom[0]->cpu_data(), top[0]->mutable_cpu_data());
  float* y = top[0]->mutable_cpu_data();
  float* mean = mean_.mutable_cpu_data();
  float* variance = variance_.mutable_cpu_data();
  const int m = num_ * spatial_;
  const float inv_m = 1.0f / static_cast<float>(m);
  // Per-channel sum of f(y) / m, summed per (n, c) row first, as Caffe's two
  // matrix-vector products do.
  auto channel_mean = [&](bool squared, float* out) {
    for (int c = 0; c < channels_; ++c) out[c] = 0.0f;
    for (int n = 0; n < num_; ++n) {
      for (int c = 0; c < channels_; ++c) {
        const float* row = y + (n * channels_ + c) * spatial_;
        float sum = 0.0f;
        for (int s = 0; s < spatial_; ++s) sum += squared ? ops::Sqr(row[s]) : row[s];
        out[c] += sum * inv_m;
      }
    }
  };
  if (use_global_stats_) {
    const float stored = blobs_[2]->cpu_data()[0];
    const float factor = stored == 0.0f ? 0.0f : 1.0f / stored;
    caffe_cpu_scale(channels_, factor, blobs_[0]->cpu_data(), mean);
    caffe_cpu_scale(channels_, factor, blobs_[1]->cpu_data(), variance);
  } else {
    channel_mean(false, mean);
  }
  for (int n = 0; n < num_; ++n) {
    for (int c = 0; c < channels_; ++c) {
      float* row = y + (n * channels_ + c) * spatial_;
      for (int s = 0; s < spatial_; ++s) row[s] = ops::BnCenter(row[s], mean[c]);
    }
  }
  if (!use_global_stats_) {
    channel_mean(true, variance);
    float* stats_count = blobs_[2]->mutable_cpu_data();
    stats_count[0] = ops::BnStatsCount(stats_count[0], moving_average_fraction_);
    caffe_cpu_axpby(channels_, 1.0f, mean, moving_average_fraction_, blobs_[0]->mutable_cpu_data());
    const float bias_correction = m > 1 ? static_cast<float>(m) / (m - 1) : 1.0f;
    caffe_cpu_axpby(channels_, bias_correction, variance, moving_average_fraction_, blobs_[1]->mutable_cpu_data());
  }
  for (int c = 0; c < channels_; ++c) variance[c] = ops::BnStd(variance[c], eps_);
  for (int n = 0; n < num_; ++n) {
    for (int c = 0; c < channels_; ++c) {
      float* row = y + (n * channels_ + c) * spatial_;
      for (int s = 0; s < spatial_; ++s) row[s] = ops::BnNormalize(row[s], variance[c]);
    }
  }
  caffe_copy(count, y, x_norm_.mutable_cpu_data());
}

void BatchNormLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const float* dy = top[0]->cpu_diff();
  if (bottom[0] == top[0]) {
    x_norm_diff_.ReshapeLike(*top[0]);
    caffe_copy(count, dy, x_norm_diff_.mutable_cpu_data());
    dy = x_norm_diff_.cpu_data();
  }
  float* dx = bottom[0]->mutable_cpu_diff();
  const float* std_dev = variance_.cpu_data();
  auto for_each = [&](auto f) {
    for (int n = 0; n < num_; ++n) {
      for (int c = 0; c < channels_; ++c) {
        const int base = (n * channels_ + c) * spatial_;
        for (int s = 0; s < spatial_; ++s) f(base + s, c);
      }
    }
  };
  if (use_global_stats_) {
    for_each([&](int i, int c) { dx[i] = ops::BnNormalize(dy[i], std_dev[c]); });
    return;
  }
  // With y = (x - mean) / sqrt(var + eps):
  // dE/dx = (dE/dy - mean(dE/dy) - mean(dE/dy * y) * y) / sqrt(var + eps),
  // the means over each channel's m values.
  const float* y = x_norm_.cpu_data();
  std::vector<float> sum_dy_y(channels_, 0.0f);
  std::vector<float> sum_dy(channels_, 0.0f);
  for (int n = 0; n < num_; ++n) {
    for (int c = 0; c < channels_; ++c) {
      const int base = (n * channels_ + c) * spatial_;
      float a = 0.0f, b = 0.0f;
      for (int s = 0; s < spatial_; ++s) {
        a += dy[base + s] * y[base + s];
        b += dy[base + s];
      }
      sum_dy_y[c] += a;
      sum_dy[c] += b;
    }
  }
  const float inv_m = 1.0f / static_cast<float>(num_ * spatial_);
  for_each([&](int i, int c) { dx[i] = ops::BnBackward(dy[i], y[i], sum_dy_y[c], sum_dy[c], inv_m, std_dev[c]); });
}

}  // namespace nereus

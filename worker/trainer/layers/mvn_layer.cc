#include "worker/trainer/layers/mvn_layer.h"

#include <algorithm>
#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

Status MVNLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::MVNParameter& p = layer_param_.mvn_param();
  normalize_variance_ = p.normalize_variance();
  across_channels_ = p.across_channels();
  eps_ = p.eps();
  if (normalize_variance_ && !(eps_ >= 0.0f)) {
    return LayerError("mvn_param.eps must be non-negative, got " + std::to_string(eps_));
  }
  return Status::OK();
}

void MVNLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Blob& in = *bottom[0];
  groups_ = in.count(0, std::min(across_channels_ ? 1 : 2, in.num_axes()));
  LAYER_CHECK(groups_ > 0) << "the bottom " << in.shape_string() << " has no groups to normalize";
  dim_ = in.count() / groups_;
  LAYER_CHECK(dim_ > 0) << "the bottom " << in.shape_string() << " has empty groups";
  if (top[0] != bottom[0]) top[0]->ReshapeLike(in);
  mean_.Reshape({groups_});
  divisor_.Reshape({groups_});
  sums_.Reshape({2 * groups_});
}

void MVNLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  float* mean = mean_.mutable_cpu_data();
  float* divisor = divisor_.mutable_cpu_data();
  for (int g = 0; g < groups_; ++g) {
    const long base = static_cast<long>(g) * dim_;
    ops::MVNGroupStats(in + base, dim_, normalize_variance_, eps_, &mean[g], &divisor[g]);
    for (int j = 0; j < dim_; ++j) {
      out[base + j] = ops::MVNForward(in[base + j], mean[g], divisor[g], normalize_variance_);
    }
  }
}

void MVNLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* y = top[0]->cpu_data();
  const float* dy = top[0]->cpu_diff();
  const float* divisor = divisor_.cpu_data();
  float* dx = bottom[0]->mutable_cpu_diff();
  for (int g = 0; g < groups_; ++g) {
    const long base = static_cast<long>(g) * dim_;
    float sum_dy, sum_y_dy;
    ops::MVNGroupGradientSums(y + base, dy + base, dim_, &sum_dy, &sum_y_dy);
    // In place dx is dy: each group's sums are taken before it is written.
    for (int j = 0; j < dim_; ++j) {
      dx[base + j] =
          ops::MVNBackward(dy[base + j], y[base + j], sum_dy, sum_y_dy, dim_, divisor[g], normalize_variance_);
    }
  }
}

}  // namespace nereus

#include "worker/trainer/layers/spp_layer.h"

#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

caffe::PoolingParameter SPPLayer::LevelParameter(int level, int height, int width,
                                                 caffe::SPPParameter::PoolMethod pool) {
  const int bins = 1 << level;
  const int kernel_h = (height + bins - 1) / bins;  // ceil(height / bins)
  const int kernel_w = (width + bins - 1) / bins;
  caffe::PoolingParameter p;
  p.set_kernel_h(kernel_h);
  p.set_kernel_w(kernel_w);
  p.set_stride_h(kernel_h);
  p.set_stride_w(kernel_w);
  p.set_pad_h((kernel_h * bins - height + 1) / 2);
  p.set_pad_w((kernel_w * bins - width + 1) / 2);
  p.set_pool(pool == caffe::SPPParameter::AVE          ? caffe::PoolingParameter::AVE
             : pool == caffe::SPPParameter::STOCHASTIC ? caffe::PoolingParameter::STOCHASTIC
                                                       : caffe::PoolingParameter::MAX);
  return p;
}

Status SPPLayer::BuildLevels(Blob* bottom) {
  const caffe::SPPParameter& p = layer_param_.spp_param();
  height_ = bottom->shape(2);
  width_ = bottom->shape(3);
  levels_.clear();
  pooled_.clear();
  for (int l = 0; l < static_cast<int>(p.pyramid_height()); ++l) {
    caffe::LayerParameter level;
    level.set_name(layer_param_.name() + "_level" + std::to_string(l));
    level.set_type("Pooling");
    *level.mutable_pooling_param() = LevelParameter(l, height_, width_, p.pool());
    levels_.push_back(std::make_unique<PoolingLayer>(level));
    levels_.back()->set_device(device());
    pooled_.push_back(std::make_unique<Blob>());
    const Status s = levels_.back()->SetUp({bottom}, {pooled_.back().get()});
    if (!s.ok()) return Status(s.code(), "pyramid level " + std::to_string(l) + ": " + s.message());
  }
  return Status::OK();
}

Status SPPLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::SPPParameter& p = layer_param_.spp_param();
  if (!p.has_pyramid_height() || p.pyramid_height() == 0) return LayerError("spp_param.pyramid_height must be > 0");
  // 2^l bins a side: beyond 2^15 the count of bins overflows.
  if (p.pyramid_height() > 16) {
    return LayerError("spp_param.pyramid_height " + std::to_string(p.pyramid_height()) + " is too large (at most 16)");
  }
  if (bottom[0]->num_axes() != 4) {
    return LayerError("the bottom must be [N, C, H, W], got " + bottom[0]->shape_string());
  }
  if (bottom[0]->shape(2) <= 0 || bottom[0]->shape(3) <= 0) {
    return LayerError("the bottom's height and width must be positive, got " + bottom[0]->shape_string());
  }
  const Status s = BuildLevels(bottom[0]);
  return s.ok() ? s : LayerError(s.message());
}

void SPPLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(bottom[0]->num_axes() == 4) << "the bottom must be [N, C, H, W], got " << bottom[0]->shape_string();
  if (bottom[0]->shape(2) != height_ || bottom[0]->shape(3) != width_) {
    const Status s = BuildLevels(bottom[0]);
    LAYER_CHECK(s.ok()) << s.message();
  }
  int dim = 0;
  for (size_t l = 0; l < levels_.size(); ++l) {
    levels_[l]->Reshape(bottom, {pooled_[l].get()});
    dim += pooled_[l]->count(1);
  }
  if (levels_.size() == 1) {
    top[0]->ReshapeLike(*pooled_[0]);
  } else {
    top[0]->Reshape({bottom[0]->shape(0), dim});
  }
}

void SPPLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  ForwardWith(CpuMath(), bottom, top);
}

void SPPLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) BackwardWith(CpuMath(), top, bottom);
}

}  // namespace nereus

// SPP (spatial pyramid pooling), as Caffe's: pyramid_height levels of
// pooling (spp_param.pool: MAX or AVE; STOCHASTIC is refused, as Pooling
// refuses it) of an [N, C, H, W] bottom, level l into 2^l x 2^l bins: a
// Pooling of kernel k = ceil(H / 2^l) (and likewise for W), stride k and pad
// (k * 2^l - H + 1) / 2. The top is [N, C * sum_l 4^l]: each item's level 0
// (C values), then level 1 (C * 4, channel by channel), and so on; with
// pyramid_height 1 it is level 0 as Pooling gives it, [N, C, 1, 1]. The
// levels are Pooling layers of this layer's own, rebuilt when the bottom's
// height or width changes; a level Pooling refuses (a pad not below the
// kernel: an input smaller than 2^l - 1 pixels or so, as in Caffe) is an
// error naming this layer and the level. Backward: the sum of the levels'
// gradients, level 0's first (Caffe's Split order).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_SPP_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_SPP_LAYER_H_

#include <memory>
#include <vector>

#include "worker/trainer/layer.h"
#include "worker/trainer/layers/pooling_layer.h"
#include "worker/trainer/math/blob_math.h"

namespace nereus {

class SPPLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "SPP"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  // The Pooling parameter of level `level` for an H x W bottom (Caffe's
  // GetPoolingParam).
  static caffe::PoolingParameter LevelParameter(int level, int height, int width, caffe::SPPParameter::PoolMethod pool);

 protected:
  // On a GPU the levels' Poolings run on the device, the copies too.
  NEREUS_LAYER_PASSES;

 private:
  // (Re)builds the levels for the bottom's height and width.
  Status BuildLevels(Blob* bottom);
  template <class Math>
  void ForwardWith(const Math& math, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  template <class Math>
  void BackwardWith(const Math& math, const std::vector<Blob*>& top, const std::vector<Blob*>& bottom);

  int height_ = 0;
  int width_ = 0;
  std::vector<std::unique_ptr<PoolingLayer>> levels_;
  std::vector<std::unique_ptr<Blob>> pooled_;  // Each level's output.
  Blob bottom_diff_sum_;                       // Backward's sum over the levels.
};

template <class Math>
void SPPLayer::ForwardWith(const Math& math, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int num = bottom[0]->shape(0);
  const int top_dim = top[0]->count(1);
  float* out = math.mutable_data(top[0]);
  int offset = 0;
  for (size_t l = 0; l < levels_.size(); ++l) {
    Blob* pooled = pooled_[l].get();
    levels_[l]->Forward(bottom, {pooled});
    const int dim = pooled->count(1);
    const float* in = math.data(*pooled);
    for (int n = 0; n < num; ++n) {
      math.copy(dim, in + static_cast<long>(n) * dim, out + static_cast<long>(n) * top_dim + offset);
    }
    offset += dim;
  }
}

template <class Math>
void SPPLayer::BackwardWith(const Math& math, const std::vector<Blob*>& top, const std::vector<Blob*>& bottom) {
  const int num = bottom[0]->shape(0);
  const int top_dim = top[0]->count(1);
  const float* top_diff = math.diff(*top[0]);
  const int count = bottom[0]->count();
  bottom_diff_sum_.ReshapeLike(*bottom[0]);
  int offset = 0;
  for (size_t l = 0; l < levels_.size(); ++l) {
    Blob* pooled = pooled_[l].get();
    const int dim = pooled->count(1);
    float* pooled_diff = math.mutable_diff(pooled);
    for (int n = 0; n < num; ++n) {
      math.copy(dim, top_diff + static_cast<long>(n) * top_dim + offset, pooled_diff + static_cast<long>(n) * dim);
    }
    offset += dim;
    levels_[l]->Backward({pooled}, {true}, bottom);  // writes the bottom's diff
    if (levels_.size() == 1) return;
    if (l == 0) {
      math.copy(count, math.diff(*bottom[0]), math.mutable_diff(&bottom_diff_sum_));
    } else {
      math.axpy(count, 1.0f, math.diff(*bottom[0]), math.mutable_diff(&bottom_diff_sum_));
    }
  }
  math.copy(count, math.diff(bottom_diff_sum_), math.mutable_diff(bottom[0]));
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SPP_LAYER_H_

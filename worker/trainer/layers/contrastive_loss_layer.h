// ContrastiveLoss, as Caffe's (Hadsell, Chopra and LeCun 2006): two
// features a and b (N x C, any axes after the second of size 1) and a
// similarity y (N, nonzero: similar; read as an int, as Caffe does), with
// d = ||a_i - b_i||:
//   E = sum_i (y_i ? d^2 : max(margin - d, 0)^2) / (2 N),
// or, with contrastive_loss_param.legacy_version, max(margin - d^2, 0) for
// the dissimilar pairs (Caffe's first version, for its old models).
// margin defaults to 1. Both features get gradients:
//   dE/da_i = +-(top_diff / N) * (a_i - b_i) * k_i (minus for b), with k_i
//   1 for a similar pair, and for a dissimilar one -1 (legacy, while
//   margin - d^2 > 0) or -(margin - d) / (d + 1e-4) (while margin - d > 0;
//   Caffe's 1e-4 keeps d = 0 finite), else 0.
// The similarity gets no gradient: asking for it is fatal, naming the layer,
// as in Caffe, and a Net never asks (AllowForceBackward). The layer holds no
// state across iterations. As the siamese example shows, the two features
// usually come from two branches that share their weights (param { name: });
// the Net sums both branches' gradients into the one shared blob.
//
// GPU code (contrastive_loss_layer.cu): one thread per pair for the squared
// distance (summed in the CPU's order) and the pair's loss, one block summing
// the pairs in double (the CPU sums them in double, in order), one thread per
// element for the gradients; all through the functions below.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CONTRASTIVE_LOSS_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CONTRASTIVE_LOSS_LAYER_H_

#include <string>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layers/loss_layers.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// One pair's squared distance from its c differences (in order).
NEREUS_HOST_DEVICE inline float ContrastiveDistSq(const float* diff, int c) {
  float sum = 0.0f;
  for (int k = 0; k < c; ++k) sum += diff[k] * diff[k];
  return sum;
}
// One pair's term of the loss (before the division by 2 N).
NEREUS_HOST_DEVICE inline float ContrastivePairLoss(float dist_sq, bool similar, float margin, bool legacy) {
  if (similar) return dist_sq;
  if (legacy) return Max(margin - dist_sq, 0.0f);
  const float m = Max(margin - Sqrt(dist_sq), 0.0f);
  return m * m;
}
// The factor of (a - b) in one pair's gradient, alpha = +-top_diff / N
// (Caffe's axpby coefficients).
NEREUS_HOST_DEVICE inline float ContrastiveGradFactor(float dist_sq, bool similar, float margin, bool legacy,
                                                      float alpha) {
  if (similar) return alpha;
  if (legacy) return margin - dist_sq > 0.0f ? -alpha : 0.0f;
  const float dist = Sqrt(dist_sq);
  const float mdist = margin - dist;
  return mdist > 0.0f ? -alpha * mdist / (dist + 1e-4f) : 0.0f;
}

}  // namespace ops

class ContrastiveLossLayer : public LossLayer {
 public:
  using LossLayer::LossLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "ContrastiveLoss"; }
  int ExactNumBottomBlobs() const override { return 3; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 2; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The error, if any, of bottoms of these shapes (empty: none).
  std::string ShapeError(const std::vector<Blob*>& bottom) const;

  float margin_ = 1.0f;
  bool legacy_ = false;
  int num_ = 0;
  int channels_ = 0;
  Blob diff_;       // a - b of the last forward
  Blob dist_sq_;    // [N]: ||a_i - b_i||^2 of the last forward
  Blob pair_loss_;  // [N]: each pair's term (the GPU's, summed by one block)
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CONTRASTIVE_LOSS_LAYER_H_

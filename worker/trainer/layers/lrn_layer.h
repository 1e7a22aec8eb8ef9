// LRN: Caffe's local response normalisation on [N, C, H, W] bottoms.
//
// ACROSS_CHANNELS: scale(n,c,h,w) = k + alpha/local_size * sum of x^2 over
//   channels c - (local_size-1)/2 .. c + (local_size-1)/2 (zero outside).
// WITHIN_CHANNEL:  scale(n,c,h,w) = 1 + alpha/local_size^2 * sum of x^2 over
//   the local_size x local_size square centred on (h, w) (zero outside;
//   Caffe builds this from pooling and power layers with shift 1, so k is
//   not used).
// Both: y = x * scale^-beta. local_size must be odd.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LRN_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_LRN_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class LRNLayer : public Layer {
 public:
  explicit LRNLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "LRN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Sum of x^2 over the neighbourhood of every element, into scale_, then
  // scale_ = offset + coefficient * sum.
  void ComputeScale(const float* x, int num);
  // For every element i, out[i] = sum of in[j] over the j whose
  // neighbourhood contains i (the neighbourhoods are symmetric, so this is
  // the same window sum as in ComputeScale).
  void WindowSum(const float* in, int num, float* out) const;

  caffe::LRNParameter::NormRegion region_ = caffe::LRNParameter::ACROSS_CHANNELS;
  int size_ = 5;
  int pre_pad_ = 2;
  float alpha_ = 1.0f;
  float beta_ = 0.75f;
  float k_ = 1.0f;
  int channels_ = 0, height_ = 0, width_ = 0;
  std::vector<float> scale_;
  std::vector<float> buffer_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LRN_LAYER_H_

// BatchNorm and Scale, as Caffe's (a ResNet's "BatchNorm + Scale" pair).
//
// BatchNorm normalises each channel (axis 1) of its bottom to zero mean and
// unit variance: y = (x - mean) / sqrt(var + eps). In training (unless
// use_global_stats) mean and var are the mini-batch's, and the layer keeps
// Caffe's running sums in its three blobs: blobs[2] = s = maf * s + 1,
// blobs[0] = maf * blobs[0] + mean, blobs[1] = maf * blobs[1] + m/(m-1) var
// (m values per channel; maf = moving_average_fraction). With
// use_global_stats (the default in TEST) it uses blobs[0]/s and blobs[1]/s.
// The three blobs carry lr_mult 0 (given or added, as in Caffe) and are local
// state (Layer::IsLocalState): they change in Forward, never by a gradient.
// No learned scale or shift: a Scale layer with bias_term follows.
//
// Scale multiplies bottom 0 by a scale broadcast along axes
// [axis, axis + num_axes) -- a learned blob, or bottom 1 -- and, with
// bias_term, adds a learned bias of the same shape. The learned scale starts
// at 1 (filler), the bias at 0 (bias_filler).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_BATCH_NORM_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_BATCH_NORM_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class BatchNormLayer : public Layer {
 public:
  explicit BatchNormLayer(const caffe::LayerParameter& param) : Layer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "BatchNorm"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool IsLocalState(int blob_id) const override { return true; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  bool use_global_stats_ = false;
  float moving_average_fraction_ = 0.999f;
  float eps_ = 1e-5f;
  int channels_ = 0;
  int num_ = 0;
  int spatial_ = 0;
  std::vector<float> mean_;         // [channels]
  std::vector<float> variance_;     // [channels]: var, then sqrt(var + eps)
  std::vector<float> x_norm_;       // the output, kept for backward (valid in place)
  std::vector<float> x_norm_diff_;  // the top diff, copied when in place
};

class ScaleLayer : public Layer {
 public:
  explicit ScaleLayer(const caffe::LayerParameter& param) : Layer(param) {}
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "Scale"; }
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  // Checks that `scale` fits bottom's axes from axis_; returns the error.
  Status CheckScaleShape(const Blob& bottom, const Blob& scale) const;

  int axis_ = 1;
  bool bias_term_ = false;
  int bias_index_ = -1;  // index of the bias in blobs()
  int outer_dim_ = 0;
  int scale_dim_ = 0;
  int inner_dim_ = 0;
  std::vector<float> bottom_copy_;  // the input, kept for backward when in place
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BATCH_NORM_LAYER_H_

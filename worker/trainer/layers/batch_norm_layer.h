// BatchNorm, as Caffe's (a ResNet's "BatchNorm + Scale" pair; Scale is
// scale_layer.h).
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
#ifndef NEREUS_WORKER_TRAINER_LAYERS_BATCH_NORM_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_BATCH_NORM_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of BatchNorm, shared by the CPU loops
// (batch_norm_layer.cc) and the GPU kernels (batch_norm_layer.cu). The sums
// over a channel are not here: the CPU adds each (n, c) row in order, the
// GPU with two cuBLAS matrix-vector products (Caffe's GPU BatchNorm), so they
// differ in rounding.
NEREUS_HOST_DEVICE inline float BnCenter(float x, float mean) { return x - mean; }
NEREUS_HOST_DEVICE inline float BnStd(float variance, float eps) { return Sqrt(variance + eps); }
NEREUS_HOST_DEVICE inline float BnNormalize(float centered, float std_dev) { return centered / std_dev; }
NEREUS_HOST_DEVICE inline float BnStatsCount(float count, float moving_average_fraction) {
  return count * moving_average_fraction + 1.0f;
}
// dE/dx from dE/dy, y, the channel's sums of dE/dy * y and dE/dy, 1/m and
// sqrt(var + eps).
NEREUS_HOST_DEVICE inline float BnBackward(float dy, float y, float sum_dy_y, float sum_dy, float inv_m,
                                           float std_dev) {
  return (dy - inv_m * (y * sum_dy_y + sum_dy)) / std_dev;
}

}  // namespace ops

class BatchNormLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "BatchNorm"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool IsLocalState(int blob_id) const override { return true; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  bool use_global_stats_ = false;
  float moving_average_fraction_ = 0.999f;
  float eps_ = 1e-5f;
  int channels_ = 0;
  int num_ = 0;
  int spatial_ = 0;
  Blob mean_;         // [channels]
  Blob variance_;     // [channels]: var, then sqrt(var + eps)
  Blob x_norm_;       // the output, kept for backward (valid in place)
  Blob x_norm_diff_;  // the top diff, copied when in place
#ifdef NEREUS_HAVE_CUDA
  // The GPU's channel sums (two matrix-vector products over these): per
  // (n, c) row, then per channel.
  void ChannelSumsGpu(const float* x, float alpha, float* out);
  Blob num_by_chans_;  // [num, channels]
  Blob spatial_ones_;  // [spatial]
  Blob batch_ones_;    // [num]
  Blob temp_;          // [count]
  Blob sum_dy_y_;      // [channels]
  Blob sum_dy_;        // [channels]
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BATCH_NORM_LAYER_H_

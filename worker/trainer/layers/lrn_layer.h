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

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace ops {

struct LrnGeometry {
  int channels = 0, height = 0, width = 0;
  int size = 5;     // local_size
  int pre_pad = 2;  // (size - 1) / 2
  bool across = true;
};

// Per-element arithmetic, shared by the CPU loops (lrn_layer.cc) and the GPU
// kernels (lrn_layer.cu).

// The window sum at (c, h, w) of one image `in` ([channels, height, width]):
// over channels c - pre_pad .. c - pre_pad + size - 1 (ACROSS_CHANNELS) or
// the size x size square centred on (h, w) (WITHIN_CHANNEL), zero outside,
// summed from 0 in increasing order (LRNLayer::WindowSum's order).
NEREUS_HOST_DEVICE inline float LrnWindowSumAt(const float* in, const LrnGeometry& g, int c, int h, int w) {
  const int plane = g.height * g.width;
  float sum = 0.0f;
  if (g.across) {
    const int c_lo = MaxInt(c - g.pre_pad, 0);
    const int c_hi = MinInt(c - g.pre_pad + g.size, g.channels);
    for (int cc = c_lo; cc < c_hi; ++cc) sum += in[cc * plane + h * g.width + w];
    return sum;
  }
  const float* src = in + c * plane;
  const int h_lo = MaxInt(h - g.pre_pad, 0);
  const int h_hi = MinInt(h - g.pre_pad + g.size, g.height);
  const int w_lo = MaxInt(w - g.pre_pad, 0);
  const int w_hi = MinInt(w - g.pre_pad + g.size, g.width);
  for (int hh = h_lo; hh < h_hi; ++hh) {
    for (int ww = w_lo; ww < w_hi; ++ww) sum += src[hh * g.width + ww];
  }
  return sum;
}
NEREUS_HOST_DEVICE inline float LrnScale(float window_sum, float offset, float coefficient) {
  return offset + coefficient * window_sum;
}
NEREUS_HOST_DEVICE inline float LrnForward(float x, float scale, float beta) { return x * Pow(scale, -beta); }
NEREUS_HOST_DEVICE inline float LrnRatio(float top_diff, float y, float scale) { return top_diff * y / scale; }
// cache = 2 * coefficient * beta; window = the window sum of the ratios.
NEREUS_HOST_DEVICE inline float LrnBackward(float top_diff, float x, float scale, float window, float beta,
                                            float cache) {
  return top_diff * Pow(scale, -beta) - cache * x * window;
}

}  // namespace ops

class LRNLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "LRN"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // Sum of x^2 over the neighbourhood of every element, into scale_, then
  // scale_ = offset + coefficient * sum.
  void ComputeScale(const float* x, int num);
  // For every element i, out[i] = sum of in[j] over the j whose
  // neighbourhood contains i (the neighbourhoods are symmetric, so this is
  // the same window sum as in ComputeScale).
  void WindowSum(const float* in, int num, float* out) const;

  ops::LrnGeometry geometry() const;

  caffe::LRNParameter::NormRegion region_ = caffe::LRNParameter::ACROSS_CHANNELS;
  int size_ = 5;
  int pre_pad_ = 2;
  float alpha_ = 1.0f;
  float beta_ = 0.75f;
  float k_ = 1.0f;
  int channels_ = 0, height_ = 0, width_ = 0;
  Blob scale_;   // per element: offset + coefficient * window sum of x^2
  Blob buffer_;  // x^2, then (backward) the window sums of the ratios
  Blob ratio_;   // backward: dy * y / scale
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LRN_LAYER_H_

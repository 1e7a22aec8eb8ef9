// Pooling: Caffe's PoolingLayer (MAX and AVE) on [N, C, H, W] bottoms.
//
// Output size follows Caffe, not the floor convention:
//   pooled_h = ceil((H + 2*pad_h - kernel_h) / stride_h) + 1,
// minus one when padding is used and the last window would start inside the
// bottom/right padding. E.g. a 6x6 input with kernel 3, stride 2 gives 3x3.
// AVE divides by the window size clipped to the padded input (padding counts,
// the part of a window beyond the padding does not). MAX writes the argmax
// (flat index within the H x W plane) to an optional second top, otherwise to
// an internal buffer. global_pooling pools each whole plane to 1x1.
// Backward: the CPU scatters each output's gradient into its window; the GPU
// gathers, per input element, the outputs whose windows hold it, adding them
// in the same order (so both give the same bits).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_POOLING_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_POOLING_LAYER_H_

#include <cfloat>
#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/math/math_ops.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// One plane's pooling geometry (what Reshape derives).
struct PoolGeometry {
  int height = 0, width = 0;
  int pooled_h = 0, pooled_w = 0;
  int kernel_h = 0, kernel_w = 0;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
};

// Per-element arithmetic, shared by the CPU loops (pooling_layer.cc) and the
// GPU kernels (pooling_layer.cu), each output or input element on its own.

// MAX of the window of output (ph, pw) over `plane`; *argmax receives the
// first position (flat in the plane) of the maximum, -1 when nothing in the
// window exceeds -FLT_MAX.
NEREUS_HOST_DEVICE inline float MaxPoolAt(const float* plane, const PoolGeometry& g, int ph, int pw, int* argmax) {
  const int hstart = MaxInt(ph * g.stride_h - g.pad_h, 0);
  const int wstart = MaxInt(pw * g.stride_w - g.pad_w, 0);
  const int hend = MinInt(ph * g.stride_h - g.pad_h + g.kernel_h, g.height);
  const int wend = MinInt(pw * g.stride_w - g.pad_w + g.kernel_w, g.width);
  float best = -FLT_MAX;
  int best_index = -1;
  for (int h = hstart; h < hend; ++h) {
    for (int w = wstart; w < wend; ++w) {
      const int index = h * g.width + w;
      if (plane[index] > best) {
        best = plane[index];
        best_index = index;
      }
    }
  }
  *argmax = best_index;
  return best;
}

// AVE's window of output (ph, pw): rows [hstart, hend) and columns
// [wstart, wend) of the input, and `size`, the window's size clipped to the
// padded input (what AVE divides by).
struct AvePoolWindow {
  int hstart, wstart, hend, wend, size;
};
NEREUS_HOST_DEVICE inline AvePoolWindow AveWindow(const PoolGeometry& g, int ph, int pw) {
  const int hstart = ph * g.stride_h - g.pad_h;
  const int wstart = pw * g.stride_w - g.pad_w;
  const int hend = MinInt(hstart + g.kernel_h, g.height + g.pad_h);
  const int wend = MinInt(wstart + g.kernel_w, g.width + g.pad_w);
  return {MaxInt(hstart, 0), MaxInt(wstart, 0), MinInt(hend, g.height), MinInt(wend, g.width),
          (hend - hstart) * (wend - wstart)};
}

// AVE: the window's sum divided by its size clipped to the padded input.
NEREUS_HOST_DEVICE inline float AvePoolAt(const float* plane, const PoolGeometry& g, int ph, int pw) {
  const AvePoolWindow window = AveWindow(g, ph, pw);
  float sum = 0.0f;
  for (int h = window.hstart; h < window.hend; ++h) {
    for (int w = window.wstart; w < window.wend; ++w) sum += plane[h * g.width + w];
  }
  return sum / window.size;
}

// The outputs whose windows hold input row h (and likewise columns):
// [*start, *end).
NEREUS_HOST_DEVICE inline void PoolOutputsCovering(int h, int pad, int kernel, int stride, int pooled, int* start,
                                                   int* end) {
  const int hp = h + pad;
  *start = hp < kernel ? 0 : (hp - kernel) / stride + 1;
  *end = MinInt(hp / stride + 1, pooled);
}

// MAX backward, gathered: the gradient of input (h, w) is the sum, from 0, of
// the top gradients of the windows whose argmax it is, in the order of the
// outputs (the CPU's scatter adds them in that order too). `mask` holds the
// argmax of each output (int, or float when it is the second top).
template <class Mask>
NEREUS_HOST_DEVICE inline float MaxPoolBackwardAt(const float* top_diff, const Mask* mask, const PoolGeometry& g, int h,
                                                  int w) {
  int phstart, phend, pwstart, pwend;
  PoolOutputsCovering(h, g.pad_h, g.kernel_h, g.stride_h, g.pooled_h, &phstart, &phend);
  PoolOutputsCovering(w, g.pad_w, g.kernel_w, g.stride_w, g.pooled_w, &pwstart, &pwend);
  const int index = h * g.width + w;
  float gradient = 0.0f;
  for (int ph = phstart; ph < phend; ++ph) {
    for (int pw = pwstart; pw < pwend; ++pw) {
      const int o = ph * g.pooled_w + pw;
      if (static_cast<int>(mask[o]) == index) gradient += top_diff[o];
    }
  }
  return gradient;
}

// AVE backward, gathered: the sum, from 0, of top_diff / pool_size over the
// windows holding input (h, w), in the order of the outputs.
NEREUS_HOST_DEVICE inline float AvePoolBackwardAt(const float* top_diff, const PoolGeometry& g, int h, int w) {
  int phstart, phend, pwstart, pwend;
  PoolOutputsCovering(h, g.pad_h, g.kernel_h, g.stride_h, g.pooled_h, &phstart, &phend);
  PoolOutputsCovering(w, g.pad_w, g.kernel_w, g.stride_w, g.pooled_w, &pwstart, &pwend);
  float gradient = 0.0f;
  for (int ph = phstart; ph < phend; ++ph) {
    for (int pw = pwstart; pw < pwend; ++pw) gradient += top_diff[ph * g.pooled_w + pw] / AveWindow(g, ph, pw).size;
  }
  return gradient;
}

}  // namespace ops

class PoolingLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Pooling"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // MAX can output its argmax as a second top.
  int MaxTopBlobs() const override {
    return layer_param_.pooling_param().pool() == caffe::PoolingParameter::MAX ? 2 : 1;
  }

  // Caffe's pooled output length for one spatial axis; any_pad says whether
  // either axis is padded (Caffe clips a padding-only last window only then).
  static int PooledSize(int input, int kernel, int pad, int stride, bool any_pad);
  // The geometry of the last Reshape.
  const ops::PoolGeometry& geometry() const { return geometry_; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  caffe::PoolingParameter::PoolMethod method_ = caffe::PoolingParameter::MAX;
  bool global_pooling_ = false;
  int kernel_h_ = 0, kernel_w_ = 0;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int channels_ = 0, height_ = 0, width_ = 0;
  int pooled_h_ = 0, pooled_w_ = 0;
  ops::PoolGeometry geometry_;
  // MAX with a single top: the argmax per output (ints), on the host or the
  // device.
  std::shared_ptr<SyncedMemory> max_idx_;
  int max_idx_count_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_POOLING_LAYER_H_

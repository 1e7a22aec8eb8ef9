// CudnnConvolution: one convolution layer's passes through cuDNN (a CUDA
// build with cuDNN; base_conv_layer.h chooses it per layer, gpu/cudnn.h
// says how). The convolution runs from its input (Convolution's bottom,
// Deconvolution's top) to its output; a group is one cuDNN call
// (cudnnSetConvolutionGroupCount). Its algorithms are timed once per shape
// and cached on the device (gpu/cudnn_library.h), within the device's
// workspace budget; where no algorithm fits the budget, the one that needs
// no workspace runs, and the log says so.
//
// Every call is queued on the device's compute stream; none waits for the
// device, except the first of each shape (the timing). An error names the
// layer and the cuDNN call.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CUDNN_CONV_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CUDNN_CONV_H_

#include <memory>
#include <string>

#include "common/base/status.h"
#include "worker/trainer/gpu/cudnn.h"
#include "worker/trainer/layers/im2col.h"

namespace nereus {
namespace gpu {
class CudnnContext;
}  // namespace gpu

// No cuDNN type in this header (cudnn_conv.cc holds the descriptors): the
// layers that include it compile without cuDNN's deprecation warnings.
class CudnnConvolution {
 public:
  // `context` (not owned) outlives this.
  CudnnConvolution(gpu::CudnnContext* context, std::string layer);
  ~CudnnConvolution();
  CudnnConvolution(const CudnnConvolution&) = delete;
  CudnnConvolution& operator=(const CudnnConvolution&) = delete;

  // `num` images of the convolution's input `g` (channels, height, width,
  // kernel, padding, stride, dilation) to `out_channels` channels of
  // out_h x out_w, in `group` groups. `reversed`: the layer's top is the
  // convolution's input (Deconvolution), so its bias is per input channel.
  Status Reshape(int num, const layers::ConvGeometry& g, int out_channels, int out_h, int out_w, int group,
                 bool reversed);

  // y = conv(x, w).
  Status Forward(const float* x, const float* w, float* y);
  // dx = conv^T(dy, w) (written, not added).
  Status BackwardData(const float* dy, const float* w, float* dx);
  // dw += dx-free weight gradient of conv(x, .) at dy.
  Status BackwardFilter(const float* x, const float* dy, float* dw);
  // The layer's top (the convolution's output, or its input when reversed)
  // += bias per channel; db += the sum of the top's diff per channel.
  Status AddBias(const float* bias, float* top);
  Status BackwardBias(const float* top_diff, float* db);

 private:
  // The key of this shape for `pass`.
  gpu::ConvAlgoKey Key(int pass) const;
  // The algorithm of `pass` (timed on first use, with the buffers given).
  StatusOr<gpu::ConvAlgoChoice> Choose(int pass, const void* a, const void* b, void* out);
  Status Check(int status, const std::string& call) const;

  struct Descriptors;  // cuDNN's, in cudnn_conv.cc.
  gpu::CudnnContext* const context_;
  const std::string layer_;
  std::unique_ptr<Descriptors> d_;
  int num_ = 0, out_channels_ = 0, out_h_ = 0, out_w_ = 0, group_ = 1;
  bool reversed_ = false;
  layers::ConvGeometry g_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CUDNN_CONV_H_

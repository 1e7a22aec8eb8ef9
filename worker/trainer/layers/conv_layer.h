// Convolution: Caffe's ConvolutionLayer for 2-D spatial input, computed as
// im2col followed by one sgemm per group (BaseConvolutionLayer's helpers).
//
// Bottom i: [N, C, H, W]; top i: [N, num_output, H_out, W_out] with
//   H_out = (H + 2*pad_h - (dilation_h*(kernel_h-1)+1)) / stride_h + 1.
// All bottoms share the weights and must have the same shape.
// Parameters: blobs()[0] weights [num_output, C/group, kernel_h, kernel_w],
// blobs()[1] bias [num_output] when bias_term.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CONV_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CONV_LAYER_H_

#include <vector>

#include "worker/trainer/layers/base_conv_layer.h"

namespace nereus {

class ConvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;

  const char* type() const override { return "Convolution"; }

 protected:
  bool reverse_dimensions() const override { return false; }
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CONV_LAYER_H_

// Deconvolution: Caffe's DeconvolutionLayer, the transpose of Convolution
// (its forward is Convolution's backward with respect to the input), for
// 2-D [N, C, H, W] bottoms. Same convolution_param; the output is
//   H_out = stride_h * (H - 1) + dilation_h * (kernel_h - 1) + 1 - 2 * pad_h.
// Parameters: blobs()[0] weights [C, num_output/group, kernel_h, kernel_w],
// blobs()[1] bias [num_output] when bias_term.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_DECONV_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_DECONV_LAYER_H_

#include <vector>

#include "worker/trainer/layers/base_conv_layer.h"

namespace nereus {

class DeconvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;

  const char* type() const override { return "Deconvolution"; }

 protected:
  bool reverse_dimensions() const override { return true; }
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_DECONV_LAYER_H_

// Im2col, as Caffe's: the convolution's column buffer of each image as the
// top. convolution_param gives the kernel, pad, stride and dilation (as for
// Convolution; num_output, group, bias and fillers are not read) and `axis`,
// the channel axis (default 1): the axes before it are images, the two after
// it the image's height and width. Top: the bottom's shape with channels C
// turned into C * kernel_h * kernel_w and height and width into the
// convolution's output size; row (c * kernel_h + kh) * kernel_w + kw of an
// image's top holds tap (kh, kw) of channel c at every output position
// (im2col.h's layout). Backward is col2im: each bottom element gets the sum
// of the top gradients of the taps that read it.
// Only two spatial axes (Caffe's N-d im2col, 1-D or 3-D, is refused).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_IM2COL_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_IM2COL_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"
#include "worker/trainer/layers/im2col.h"

namespace nereus {

class Im2colLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Im2col"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  // On a GPU, im2col.h's kernels over every image at once.
  NEREUS_LAYER_PASSES;

 private:
  // The channel axis for `bottom`, or an error (not 2 spatial axes after it).
  StatusOr<int> ChannelAxis(const Blob& bottom) const;

  layers::ConvGeometry geometry_;  // One image's (channels, height, width set by Reshape).
  int num_ = 0;                    // Images: the bottom's count before the channel axis.
  int bottom_dim_ = 0;             // One image's count in the bottom, and in the top.
  int top_dim_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_IM2COL_LAYER_H_

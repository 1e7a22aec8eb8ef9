// im2col / col2im for 2-D convolution, laid out exactly as Caffe's
// util/im2col.cpp: the column buffer has shape
// [channels * kernel_h * kernel_w, out_h * out_w], row-major, where the row
// index is (c * kernel_h + kh) * kernel_w + kw.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_IM2COL_H_
#define NEREUS_WORKER_TRAINER_LAYERS_IM2COL_H_

namespace nereus {
namespace layers {

// Geometry of one 2-D convolution (or its column transform).
struct ConvGeometry {
  int channels = 0;
  int height = 0;
  int width = 0;
  int kernel_h = 0;
  int kernel_w = 0;
  int pad_h = 0;
  int pad_w = 0;
  int stride_h = 1;
  int stride_w = 1;
  int dilation_h = 1;
  int dilation_w = 1;

  // Caffe's output size: floor((in + 2*pad - dilated_kernel) / stride) + 1.
  int output_h() const { return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1; }
  int output_w() const { return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1; }
};

// Writes the column buffer for one image `data_im` ([channels, height, width]).
// `data_col` must hold channels*kernel_h*kernel_w*output_h()*output_w() floats.
void Im2Col(const float* data_im, const ConvGeometry& g, float* data_col);

// The adjoint of Im2Col: overwrites `data_im` with the sum of every column
// entry that Im2Col would have read from each image position.
void Col2Im(const float* data_col, const ConvGeometry& g, float* data_im);

}  // namespace layers
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_IM2COL_H_

// im2col / col2im for 2-D convolution, laid out exactly as Caffe's
// util/im2col.cpp: the column buffer has shape
// [channels * kernel_h * kernel_w, out_h * out_w], row-major, where the row
// index is (c * kernel_h + kh) * kernel_w + kw.
//
// The GPU versions (im2col.cu) run one thread per output column position
// (Im2ColColumn) and one per image element (Col2ImAt), Caffe's kernels; both
// only move values or add them in the CPU loops' order (kernel taps in (kh,
// kw) order), so they give the CPU's bits (im2col_test checks the element
// functions against Im2Col and Col2Im exactly).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_IM2COL_H_
#define NEREUS_WORKER_TRAINER_LAYERS_IM2COL_H_

#include "common/base/host_device.h"

namespace nereus {
namespace gpu {
class Device;
}  // namespace gpu
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
  NEREUS_HOST_DEVICE int output_h() const {
    return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1;
  }
  NEREUS_HOST_DEVICE int output_w() const {
    return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1;
  }
};

// One output position's column of channel c: writes the kernel_h *
// kernel_w taps that Im2Col writes for (c, h_out, w_out), each
// output_h() * output_w() floats apart in `data_col` (which points at the
// buffer's start).
NEREUS_HOST_DEVICE inline void Im2ColColumnStrided(const float* data_im, const ConvGeometry& g, int c, int h_out,
                                                   int w_out, float* data_col, long long row_stride) {
  const int out_w = g.output_w();
  const float* im = data_im + c * g.height * g.width;
  float* col = data_col + c * g.kernel_h * g.kernel_w * row_stride + h_out * out_w + w_out;
  for (int kh = 0; kh < g.kernel_h; ++kh) {
    for (int kw = 0; kw < g.kernel_w; ++kw) {
      const int h = -g.pad_h + kh * g.dilation_h + h_out * g.stride_h;
      const int w = -g.pad_w + kw * g.dilation_w + w_out * g.stride_w;
      *col = (h >= 0 && w >= 0 && h < g.height && w < g.width) ? im[h * g.width + w] : 0.0f;
      col += row_stride;
    }
  }
}
NEREUS_HOST_DEVICE inline void Im2ColColumn(const float* data_im, const ConvGeometry& g, int c, int h_out, int w_out,
                                            float* data_col) {
  Im2ColColumnStrided(data_im, g, c, h_out, w_out, data_col, static_cast<long long>(g.output_h()) * g.output_w());
}

// Image-major columns of `num` images (the chunked weight gradient's
// layout): row r of image b's columns at data_col + r * num * S + b * S,
// S = output_h() * output_w(), so that one GEMM over num * S columns adds
// up every image's product. Image b's element function: its columns start
// at data_col + b * S with rows num * S apart.
NEREUS_HOST_DEVICE inline long long ImageMajorRowStride(const ConvGeometry& g, int num) {
  return static_cast<long long>(num) * g.output_h() * g.output_w();
}

// [num][rows][cols] to [rows][num * cols]: the source index of destination
// element (r, b, s), s < cols.
NEREUS_HOST_DEVICE inline long long ImagesToRowsSource(int r, int b, int s, int rows, int cols) {
  return (static_cast<long long>(b) * rows + r) * cols + s;
}

// Col2Im's value of image element (c, h, w): the sum, from 0, of every
// column entry Im2Col read from it, in (kh, kw) order as Col2Im adds them.
NEREUS_HOST_DEVICE inline float Col2ImAt(const float* data_col, const ConvGeometry& g, int c, int h, int w) {
  const int out_h = g.output_h();
  const int out_w = g.output_w();
  float sum = 0.0f;
  for (int kh = 0; kh < g.kernel_h; ++kh) {
    const int h_span = h + g.pad_h - kh * g.dilation_h;  // h_out * stride_h when this tap read (h, w)
    if (h_span < 0 || h_span % g.stride_h != 0) continue;
    const int h_out = h_span / g.stride_h;
    if (h_out >= out_h) continue;
    for (int kw = 0; kw < g.kernel_w; ++kw) {
      const int w_span = w + g.pad_w - kw * g.dilation_w;
      if (w_span < 0 || w_span % g.stride_w != 0) continue;
      const int w_out = w_span / g.stride_w;
      if (w_out >= out_w) continue;
      const int row = (c * g.kernel_h + kh) * g.kernel_w + kw;
      sum += data_col[(row * out_h + h_out) * out_w + w_out];
    }
  }
  return sum;
}

// Writes the column buffer for one image `data_im` ([channels, height, width]).
// `data_col` must hold channels*kernel_h*kernel_w*output_h()*output_w() floats.
void Im2Col(const float* data_im, const ConvGeometry& g, float* data_col);

// The adjoint of Im2Col: overwrites `data_im` with the sum of every column
// entry that Im2Col would have read from each image position.
void Col2Im(const float* data_col, const ConvGeometry& g, float* data_im);

// Image-major columns of `num` images (see ImageMajorRowStride), and the
// [num][rows][cols] -> [rows][num * cols] permutation that brings a batch of
// convolution outputs (or 1x1 inputs) into the same layout: with both, the
// weight gradient of `num` images is one GEMM,
//   dW[M, K] += rows(dY)[M, num * S] * columns(X)[K, num * S]^T,
// instead of one GEMM of inner size S per image (a different order of the
// same sums: within a float rounding bound of it, base_conv_layer.h).
void Im2ColImageMajor(const float* data_im, const ConvGeometry& g, int num, float* data_col);
void ImagesToRows(const float* images, int num, int rows, int cols, float* out);

#ifdef NEREUS_HAVE_CUDA
void Im2ColImageMajorGpu(gpu::Device* device, const float* data_im, const ConvGeometry& g, int num, float* data_col);
void ImagesToRowsGpu(gpu::Device* device, const float* images, int num, int rows, int cols, float* out);
// The same on device memory for `num` images, queued on the device's compute
// stream: image n at data_im + n * channels * height * width, its columns at
// data_col + n * channels * kernel_h * kernel_w * output_h() * output_w().
void Im2ColGpu(gpu::Device* device, const float* data_im, const ConvGeometry& g, float* data_col, int num = 1);
void Col2ImGpu(gpu::Device* device, const float* data_col, const ConvGeometry& g, float* data_im, int num = 1);
#endif

}  // namespace layers
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_IM2COL_H_

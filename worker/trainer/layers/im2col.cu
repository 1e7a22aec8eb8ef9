// im2col / col2im on the GPU: one thread per output column position, one per
// image element (Caffe's im2col_gpu_kernel and col2im_gpu_kernel), over a
// batch of images, each thread running the element function im2col.h shares
// with the CPU tests.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/im2col.h"

namespace nereus {
namespace layers {
namespace {

// n = num * channels * output_h * output_w.
__global__ void Im2ColKernel(int n, const float* data_im, ConvGeometry g, float* data_col) {
  const int out_h = g.output_h();
  const int out_w = g.output_w();
  const int per_image = g.channels * out_h * out_w;
  const int im_size = g.channels * g.height * g.width;
  const int col_size = per_image * g.kernel_h * g.kernel_w;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int image = index / per_image;
    const int rest = index % per_image;
    const int w_out = rest % out_w;
    const int h_out = (rest / out_w) % out_h;
    const int c = rest / (out_w * out_h);
    Im2ColColumn(data_im + static_cast<int64_t>(image) * im_size, g, c, h_out, w_out,
                 data_col + static_cast<int64_t>(image) * col_size);
  }
}

// n = num * channels * height * width.
__global__ void Col2ImKernel(int n, const float* data_col, ConvGeometry g, float* data_im) {
  const int per_image = g.channels * g.height * g.width;
  const int col_size = g.channels * g.kernel_h * g.kernel_w * g.output_h() * g.output_w();
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int image = index / per_image;
    const int rest = index % per_image;
    const int w = rest % g.width;
    const int h = (rest / g.width) % g.height;
    const int c = rest / (g.width * g.height);
    data_im[index] = Col2ImAt(data_col + static_cast<int64_t>(image) * col_size, g, c, h, w);
  }
}

// n = num * channels * output_h * output_w; image b's columns start at
// data_col + b * S, rows `stride` apart.
__global__ void Im2ColImageMajorKernel(int n, const float* data_im, ConvGeometry g, long long stride, float* data_col) {
  const int spatial = g.output_h() * g.output_w();
  const int per_image = g.channels * spatial;
  const int im_size = g.channels * g.height * g.width;
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int image = index / per_image;
    const int rest = index % per_image;
    const int w_out = rest % g.output_w();
    const int h_out = (rest / g.output_w()) % g.output_h();
    const int c = rest / spatial;
    Im2ColColumnStrided(data_im + static_cast<int64_t>(image) * im_size, g, c, h_out, w_out,
                        data_col + static_cast<int64_t>(image) * spatial, stride);
  }
}

// n = rows * num * cols, one thread per destination element.
__global__ void ImagesToRowsKernel(int n, const float* images, int num, int rows, int cols, float* out) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int index = static_cast<int>(i);
    const int s = index % cols;
    const int b = (index / cols) % num;
    const int r = index / (cols * num);
    out[index] = images[ImagesToRowsSource(r, b, s, rows, cols)];
  }
}

}  // namespace

void Im2ColImageMajorGpu(gpu::Device* device, const float* data_im, const ConvGeometry& g, int num, float* data_col) {
  gpu::Launch(device, "Im2ColImageMajor", num * g.channels * g.output_h() * g.output_w(), Im2ColImageMajorKernel,
              data_im, g, ImageMajorRowStride(g, num), data_col);
}

void ImagesToRowsGpu(gpu::Device* device, const float* images, int num, int rows, int cols, float* out) {
  gpu::Launch(device, "ImagesToRows", rows * num * cols, ImagesToRowsKernel, images, num, rows, cols, out);
}

void Im2ColGpu(gpu::Device* device, const float* data_im, const ConvGeometry& g, float* data_col, int num) {
  gpu::Launch(device, "Im2Col", num * g.channels * g.output_h() * g.output_w(), Im2ColKernel, data_im, g, data_col);
}

void Col2ImGpu(gpu::Device* device, const float* data_col, const ConvGeometry& g, float* data_im, int num) {
  gpu::Launch(device, "Col2Im", num * g.channels * g.height * g.width, Col2ImKernel, data_col, g, data_im);
}

}  // namespace layers
}  // namespace nereus

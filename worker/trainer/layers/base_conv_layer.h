// BaseConvolutionLayer: what Convolution and Deconvolution share, as Caffe's
// BaseConvolutionLayer: reading convolution_param, creating and filling the
// weights, sizing the column buffer, and the four GEMM helpers both layers are
// written with.
//
// The helpers speak of the *convolution's* input and output. For
// Convolution those are the bottom and the top; for Deconvolution (the
// transpose) the top and the bottom. `geometry_` always describes the
// convolution's input image, so Im2Col of it has conv_out_spatial_dim_
// columns:
//   ForwardGemm:  output = W * im2col(input), per group
//   BackwardGemm: input  = col2im(W^T * output), per group
//   WeightGemm:   W     += output * im2col(input)^T, per group
//   ForwardBias:  output += bias * 1^T;  BackwardBias: bias += output * 1
// Each works on one image of the batch. Each has a GPU twin (the name with
// Gpu, base_conv_layer.cu) that the layers' Forward_gpu/Backward_gpu use.
//
// Bottoms are 2-D [N, C, H, W] with axis 1 (Caffe's N-d im2col is not
// supported); all bottoms share the weights and must have the same shape.
// Parameters: blobs()[0] the weights ([num_output, C/group, kh, kw] for
// Convolution, [C, num_output/group, kh, kw] for Deconvolution), blobs()[1]
// the bias [num_output] when bias_term.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_BASE_CONV_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_BASE_CONV_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"
#include "worker/trainer/layers/im2col.h"

namespace nereus {

class BaseConvolutionLayer : public Layer {
 public:
  explicit BaseConvolutionLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }
  bool HasGpuCode() const override { return true; }

 protected:
  // Deconvolution swaps the roles of input and output: its weights are
  // [C, num_output/group, kernel_h, kernel_w] and its output is larger.
  virtual bool reverse_dimensions() const = 0;
  // Sets out_h_ and out_w_ (the top's spatial size) from the bottom's and
  // the kernel's size, padding, stride and dilation in `kernel`.
  virtual void ComputeOutputShape(const layers::ConvGeometry& kernel, int in_h, int in_w) = 0;

  void ForwardGemm(const float* input, const float* weights, float* output, bool skip_im2col = false);
  void ForwardBias(float* output, const float* bias);
  void BackwardGemm(const float* output, const float* weights, float* input);
  void WeightGemm(const float* input, const float* output, float* weights);
  void BackwardBias(float* bias, const float* output);
#ifdef NEREUS_HAVE_CUDA
  // Their GPU twins (base_conv_layer.cu): the same products through cuBLAS
  // on device memory, im2col/col2im by im2col.cu's kernels, but over `num`
  // images at once: the columns of several images are made by one launch and
  // multiplied by one strided-batched GEMM per group (at most
  // kGpuColumnBytes of columns at a time), and a 1x1 convolution with
  // stride 1 and no padding multiplies the images themselves, as Caffe's
  // is_1x1_ does. `input`, `output` and `weights` point at the first image
  // (the weights are shared). WeightGemmGpu adds each image's product in
  // turn, as the CPU loop does.
  static constexpr size_t kGpuColumnBytes = size_t{256} << 20;
  void ForwardGemmGpu(const float* input, const float* weights, float* output, int num);
  void ForwardBiasGpu(float* output, const float* bias, int num);
  void BackwardGemmGpu(const float* output, const float* weights, float* input, int num);
  void WeightGemmGpu(const float* input, const float* output, float* weights, int num);
  void BackwardBiasGpu(float* bias, const float* output, int num);
#endif

  int num_output_ = 0;
  int group_ = 1;
  bool bias_term_ = true;
  int out_h_ = 0;  // The top's spatial size.
  int out_w_ = 0;
  int out_spatial_dim_ = 0;  // out_h_ * out_w_: the bias's columns.

 private:
  // Reads kernel/pad/stride/dilation from convolution_param.
  Status ParseGeometry(const Blob& bottom);

  layers::ConvGeometry geometry_;  // The convolution input's image (channels/height/width set by Reshape).
  int conv_in_channels_ = 0;       // Channels of the convolution's input (bottom, or top when reversed).
  int conv_out_channels_ = 0;      // Channels of its output.
  int conv_out_spatial_dim_ = 0;   // Spatial size of its output: the column buffer's columns.
  int kernel_dim_ = 0;             // (conv_in_channels_ / group) * kernel_h * kernel_w: its rows per group.
  Blob col_buffer_;                // [kernel_dim_ * group_, conv_out_spatial_dim_]
  Blob bias_multiplier_;           // out_spatial_dim_ ones
#ifdef NEREUS_HAVE_CUDA
  // Whether the columns are the image itself (1x1 kernel, stride 1, pad 0).
  bool is_1x1() const;
  // Images whose columns fit in kGpuColumnBytes (at least 1, at most num).
  int GpuChunk(int num) const;
  Blob gpu_columns_;     // The columns of a chunk of images.
  Blob gpu_bias_sums_;   // BackwardBiasGpu: per image and channel.
  Blob gpu_batch_ones_;  // BackwardBiasGpu: num ones.
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BASE_CONV_LAYER_H_

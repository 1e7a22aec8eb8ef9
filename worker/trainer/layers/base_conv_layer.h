// ConvolutionLayer and DeconvolutionLayer (at the end of this file), and
// BaseConvolutionLayer: what the two share, as Caffe's
// BaseConvolutionLayer: reading convolution_param, creating and filling the
// weights, sizing the column buffer, the GEMM helpers below, and the passes
// written with them (on the CPU and the GPU), which differ between the two
// layers only in which way the convolution runs (reverse_dimensions()).
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
// Gpu, base_conv_layer.cu) that Forward_gpu/Backward_gpu use.
//
// Convolution's forward is ForwardGemm (bottom to top), its backward
// WeightGemm(bottom, top diff) and BackwardGemm to the bottom's diff. For
// Deconvolution the convolution runs from the top to the bottom: its forward
// is BackwardGemm, its backward WeightGemm(top diff, bottom) and ForwardGemm
// to the bottom's diff (reusing the columns WeightGemm made).
//
// Bottoms are 2-D [N, C, H, W] with axis 1 (Caffe's N-d im2col is not
// supported); all bottoms share the weights and must have the same shape.
// Parameters: blobs()[0] the weights ([num_output, C/group, kh, kw] for
// Convolution, [C, num_output/group, kh, kw] for Deconvolution), blobs()[1]
// the bias [num_output] when bias_term.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_BASE_CONV_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_BASE_CONV_LAYER_H_

#include <memory>
#include <vector>

#include "worker/trainer/gpu/cudnn.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layers/im2col.h"
#ifdef NEREUS_HAVE_CUDNN
#include "worker/trainer/layers/cudnn_conv.h"
#endif

namespace nereus {

// Reads kernel, pad, stride and dilation from `p` into `g` (each given once,
// once per spatial axis, or as its _h/_w pair; pad 0, stride 1, dilation 1
// by default) and checks that kernel, stride and dilation are positive; the
// error names the field. Convolution, Deconvolution and Im2col share it.
Status ParseConvKernel(const caffe::ConvolutionParameter& p, layers::ConvGeometry* g);

class BaseConvolutionLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }
  // On a GPU: im2col + cuBLAS, or cuDNN (convolution_param.engine and
  // what the device has: gpu/cudnn.h). The CPU always runs im2col.
  gpu::ConvEngine engine() const { return engine_; }

 protected:
  // Deconvolution swaps the roles of input and output: its weights are
  // [C, num_output/group, kernel_h, kernel_w] and its output is larger.
  virtual bool reverse_dimensions() const = 0;

  NEREUS_LAYER_PASSES;

  void ForwardGemm(const float* input, const float* weights, float* output, bool skip_im2col = false);
  void ForwardBias(float* output, const float* bias);
  void BackwardGemm(const float* output, const float* weights, float* input);
  void WeightGemm(const float* input, const float* output, float* weights);
  void BackwardBias(float* bias, const float* output);
#ifdef NEREUS_HAVE_CUDA
  // Their GPU twins (base_conv_layer.cu): the same products through cuBLAS
  // on device memory, im2col/col2im by im2col.cu's kernels, but over `num`
  // images at once: the columns of a chunk of images are made by one launch
  // into the device's one workspace (Device::Workspace, shared by every
  // layer of the net; a chunk's columns fit in --conv_workspace_mb) and
  // multiplied by one strided-batched GEMM per group, and a 1x1 convolution
  // with stride 1 and no padding multiplies the images themselves, as
  // Caffe's is_1x1_ does. `input`, `output` and `weights` point at the first
  // image (the weights are shared). WeightGemmGpu makes a chunk's weight
  // gradient one GEMM per group over the chunk's image-major columns
  // (im2col.h) instead of one per image: the same sums in another order,
  // within float rounding of the CPU's image-by-image loop (conv_layer_test
  // checks the plan on the CPU against a bound it derives).
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
  // Sets out_h_ and out_w_ (the top's spatial size) from the bottom's and
  // the kernel's size, padding, stride and dilation: Convolution's output
  // (ConvGeometry::output_h), or for Deconvolution the size whose
  // convolution has the bottom's size,
  //   H_out = stride_h * (H - 1) + dilation_h * (kernel_h - 1) + 1 - 2 * pad_h.
  void ComputeOutputShape(int in_h, int in_w);
  // The GEMMs' per-group offsets: group g's weights, columns and output
  // start g times these further; out_per_group output channels each.
  struct GroupOffsets {
    int out_per_group, weight, col, output;
  };
  GroupOffsets group_offsets() const;

  gpu::ConvEngine engine_ = gpu::ConvEngine::kIm2col;
#ifdef NEREUS_HAVE_CUDNN
  std::unique_ptr<CudnnConvolution> cudnn_;  // With engine_ kCudnn.
  // The passes through cudnn_ (base_conv_layer.cu): an error is recorded on
  // the device, naming the layer and the call.
  void ForwardCudnn(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  void BackwardCudnn(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                     const std::vector<Blob*>& bottom);
#endif
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
  // Images whose `floats_per_image` of scratch fit in the workspace budget
  // (at least 1, at most num).
  int GpuChunk(int num, size_t floats_per_image) const;
  // Floats of one image's columns (0 for 1x1: the image is its columns).
  size_t ColumnFloats() const;
  // `floats` of the device's workspace, or null with the error recorded.
  float* WorkspaceGpu(size_t floats);
  // Floats per image of the convolution's input and of its output.
  struct ImageSizes {
    int in, out;
  };
  ImageSizes image_sizes() const;
  // The workspace sized for the columns of `k` images, `*stride` floats apart.
  float* ColumnsGpu(int k, long long* stride);
  // The columns of the `k` images at `images`, `*stride` floats apart: the
  // images themselves for a 1x1 convolution, else their im2col.
  const float* Im2ColGpu(const float* images, int k, long long* stride);
  // f(n0, k) for the chunks of images n0 .. n0 + k - 1 (GpuChunk) of `num`.
  template <typename F>
  void ForEachChunkGpu(int num, F f);
  // f(n0, k, columns, stride) for those chunks of `input` and their columns
  // (Im2ColGpu).
  template <typename F>
  void ForEachColumnChunkGpu(const float* input, int num, F f);
  Blob gpu_bias_sums_;   // BackwardBiasGpu: per image and channel.
  Blob gpu_batch_ones_;  // BackwardBiasGpu: num ones.
#endif
};

// Convolution: Caffe's ConvolutionLayer for 2-D spatial input, computed as
// im2col followed by one sgemm per group. Bottom i: [N, C, H, W]; top i:
// [N, num_output, H_out, W_out] with
//   H_out = (H + 2*pad_h - (dilation_h*(kernel_h-1)+1)) / stride_h + 1.
class ConvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;
  const char* type() const override { return "Convolution"; }

 protected:
  bool reverse_dimensions() const override { return false; }
};

// Deconvolution: Caffe's DeconvolutionLayer, the transpose of Convolution
// (its forward is Convolution's backward with respect to the input). Same
// convolution_param; the output is
//   H_out = stride_h * (H - 1) + dilation_h * (kernel_h - 1) + 1 - 2 * pad_h.
class DeconvolutionLayer : public BaseConvolutionLayer {
 public:
  using BaseConvolutionLayer::BaseConvolutionLayer;
  const char* type() const override { return "Deconvolution"; }

 protected:
  bool reverse_dimensions() const override { return true; }
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BASE_CONV_LAYER_H_

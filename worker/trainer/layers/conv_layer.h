// Convolution: Caffe's ConvolutionLayer for 2-D spatial input, computed as
// im2col followed by one sgemm per group (OpenBLAS).
//
// Bottom i: [N, C, H, W]; top i: [N, num_output, H_out, W_out] with
//   H_out = (H + 2*pad_h - (dilation_h*(kernel_h-1)+1)) / stride_h + 1.
// All bottoms share the weights and must have the same shape.
// Parameters: blobs()[0] weights [num_output, C/group, kernel_h, kernel_w],
// blobs()[1] bias [num_output] when bias_term.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CONV_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CONV_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"
#include "worker/trainer/layers/im2col.h"

namespace nereus {

class ConvolutionLayer : public Layer {
 public:
  explicit ConvolutionLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "Convolution"; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  bool EqualNumBottomTopBlobs() const override { return true; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 protected:
  // Deconvolution swaps the roles of input and output: its weights are
  // [C, num_output/group, kernel_h, kernel_w] and its output is larger.
  virtual bool reverse_dimensions() const { return false; }

  // Reads kernel/pad/stride/dilation/group from convolution_param.
  Status ParseGeometry(const Blob& bottom);

  layers::ConvGeometry geometry_;  // channels/height/width follow the bottom
  int num_output_ = 0;
  int group_ = 1;
  bool bias_term_ = true;
  int out_h_ = 0;
  int out_w_ = 0;
  // Per group: rows of the weight matrix, columns of im2col, output offsets.
  int kernel_dim_ = 0;       // (C / group) * kernel_h * kernel_w
  int out_spatial_dim_ = 0;  // out_h * out_w
  std::vector<float> col_buffer_;
  std::vector<float> bias_multiplier_;  // out_spatial_dim_ ones
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CONV_LAYER_H_

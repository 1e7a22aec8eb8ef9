// Pooling: Caffe's PoolingLayer (MAX and AVE) on [N, C, H, W] bottoms.
//
// Output size follows Caffe, not the floor convention:
//   pooled_h = ceil((H + 2*pad_h - kernel_h) / stride_h) + 1,
// minus one when padding is used and the last window would start inside the
// bottom/right padding. E.g. a 6x6 input with kernel 3, stride 2 gives 3x3.
// AVE divides by the window size clipped to the padded input (padding counts,
// the part of a window beyond the padding does not). MAX writes the argmax
// (flat index within the H x W plane) to an optional second top, otherwise to
// an internal buffer. global_pooling pools each whole plane to 1x1.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_POOLING_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_POOLING_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class PoolingLayer : public Layer {
 public:
  explicit PoolingLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "Pooling"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  // MAX can output its argmax as a second top.
  int MaxTopBlobs() const override {
    return layer_param_.pooling_param().pool() == caffe::PoolingParameter::MAX ? 2 : 1;
  }

  // Caffe's pooled output length for one spatial axis; any_pad says whether
  // either axis is padded (Caffe clips a padding-only last window only then).
  static int PooledSize(int input, int kernel, int pad, int stride, bool any_pad);

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  caffe::PoolingParameter::PoolMethod method_ = caffe::PoolingParameter::MAX;
  bool global_pooling_ = false;
  int kernel_h_ = 0, kernel_w_ = 0;
  int stride_h_ = 1, stride_w_ = 1;
  int pad_h_ = 0, pad_w_ = 0;
  int channels_ = 0, height_ = 0, width_ = 0;
  int pooled_h_ = 0, pooled_w_ = 0;
  std::vector<int> max_idx_;  // MAX with a single top: argmax per output
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_POOLING_LAYER_H_

// InnerProduct: Caffe's fully connected layer. The bottom is viewed as an
// M x K matrix, M = count(0, axis), K = count(axis); the top has shape
// bottom.shape[0:axis] + [num_output].
// blobs()[0]: weights [num_output, K], or [K, num_output] with transpose;
// blobs()[1]: bias [num_output] when bias_term.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_INNER_PRODUCT_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_INNER_PRODUCT_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class InnerProductLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "InnerProduct"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  // The weight's gradient is top_diff^T * bottom_data (M_ rows: count(0,
  // axis)), or bottom_data^T * top_diff with transpose.
  bool WeightGradientFactors(int param, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                             GradientFactors* out) const override;

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The passes, for the CPU or the GPU (`math`: CpuMath, GpuMath,
  // blob_math.h).
  template <class Math>
  void ForwardWith(const Math& math, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);
  template <class Math>
  void BackwardWith(const Math& math, const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom);

  int M_ = 0;  // rows: count(0, axis)
  int K_ = 0;  // inputs per row: count(axis)
  int N_ = 0;  // num_output
  int axis_ = 1;
  bool bias_term_ = true;
  bool transpose_ = false;
  Blob bias_multiplier_;  // M_ ones
};

template <class Math>
void InnerProductLayer::ForwardWith(const Math& math, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  float* top_data = math.mutable_data(top[0]);
  math.gemm(CblasNoTrans, transpose_ ? CblasNoTrans : CblasTrans, M_, N_, K_, 1.0f, math.data(*bottom[0]),
            math.data(*blobs_[0]), 0.0f, top_data);
  if (bias_term_) {
    math.gemm(CblasNoTrans, CblasNoTrans, M_, N_, 1, 1.0f, math.data(bias_multiplier_), math.data(*blobs_[1]), 1.0f,
              top_data);
  }
}

template <class Math>
void InnerProductLayer::BackwardWith(const Math& math, const std::vector<Blob*>& top,
                                     const std::vector<bool>& propagate_down, const std::vector<Blob*>& bottom) {
  const float* top_diff = math.diff(*top[0]);
  if (param_propagate_down(0) && !param_gradient_unused(0)) {
    const float* bottom_data = math.data(*bottom[0]);
    if (transpose_) {
      math.gemm(CblasTrans, CblasNoTrans, K_, N_, M_, 1.0f, bottom_data, top_diff, 1.0f,
                math.mutable_diff(blobs_[0].get()));
    } else {
      math.gemm(CblasTrans, CblasNoTrans, N_, K_, M_, 1.0f, top_diff, bottom_data, 1.0f,
                math.mutable_diff(blobs_[0].get()));
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    math.gemv(CblasTrans, M_, N_, 1.0f, top_diff, math.data(bias_multiplier_), 1.0f,
              math.mutable_diff(blobs_[1].get()));
  }
  if (propagate_down[0]) {
    math.gemm(CblasNoTrans, transpose_ ? CblasTrans : CblasNoTrans, M_, K_, N_, 1.0f, top_diff, math.data(*blobs_[0]),
              0.0f, math.mutable_diff(bottom[0]));
  }
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_INNER_PRODUCT_LAYER_H_

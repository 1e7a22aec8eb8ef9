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
  explicit InnerProductLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  const char* type() const override { return "InnerProduct"; }
  bool HasGpuCode() const override { return true; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

  // The weight's gradient is top_diff^T * bottom_data (M_ rows: count(0,
  // axis)), or bottom_data^T * top_diff with transpose.
  bool WeightGradientFactors(int param, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                             GradientFactors* out) const override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
#ifdef NEREUS_HAVE_CUDA
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
#endif

 private:
  int M_ = 0;  // rows: count(0, axis)
  int K_ = 0;  // inputs per row: count(axis)
  int N_ = 0;  // num_output
  int axis_ = 1;
  bool bias_term_ = true;
  bool transpose_ = false;
  Blob bias_multiplier_;  // M_ ones
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_INNER_PRODUCT_LAYER_H_

// Caffe's SplitLayer: copies its bottom to every top (the tops share the
// bottom's data) and sums the tops' gradients into the bottom's. The Net
// inserts one after every blob consumed more than once (InsertSplits); a
// prototxt may also name it ("Split"). Not in place.
#ifndef NEREUS_WORKER_TRAINER_SPLIT_LAYER_H_
#define NEREUS_WORKER_TRAINER_SPLIT_LAYER_H_

#include <vector>

#include "worker/trainer/layer.h"

namespace nereus {

class SplitLayer : public Layer {
 public:
  explicit SplitLayer(const caffe::LayerParameter& param) : Layer(param) {}
  const char* type() const override { return "Split"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  bool HasGpuCode() const override { return true; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
#ifdef NEREUS_HAVE_CUDA
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_SPLIT_LAYER_H_

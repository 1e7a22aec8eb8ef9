#include "worker/trainer/split_layer.h"

#include "worker/trainer/math/blob_math.h"

namespace nereus {

Status SplitLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (const Blob* t : top) {
    if (t == bottom[0]) return LayerError("a Split layer does not allow in-place computation");
  }
  return Status::OK();
}

void SplitLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (Blob* t : top) {
    CHECK_NE(t, bottom[0]) << "layer " << layer_param_.name() << ": a Split layer does not allow in-place computation";
    t->ReshapeLike(*bottom[0]);
    t->ShareData(*bottom[0]);
  }
}

void SplitLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (Blob* t : top) t->ShareData(*bottom[0]);
}

void SplitLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) SumTopDiffs(CpuMath(), top, bottom[0]);
}

}  // namespace nereus

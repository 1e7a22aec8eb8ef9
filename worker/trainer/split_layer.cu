// SplitLayer's GPU code: the tops share the bottom's data (as on the CPU);
// the bottom's gradient is the sum of the tops', in the same order.
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/split_layer.h"

namespace nereus {

void SplitLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  Forward_cpu(bottom, top);  // Sharing memory is the same on every device.
}

void SplitLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (propagate_down[0]) SumTopDiffs(GpuMath(device()), top, bottom[0]);
}

}  // namespace nereus

// BatchReindex, as Caffe's: bottom 0 the data (N x ...), bottom 1 indices
// (one axis, M of them, each read as an int as Caffe does); top (M x ...)
// holds row idx[m] of the data as its row m. The same row may be picked
// many times, or never. Backward sums, into each data row, the top rows that
// picked it (0 for a row never picked), in the order of m.
//
// An index below 0 or not below N is a forward error naming the layer and
// the position (Caffe CHECKs it). The indices get no gradient: asking for it
// is fatal, naming the layer, as in Caffe, and a Net never asks
// (AllowForceBackward). No state across iterations.
//
// GPU code (batch_reindex_layer.cu): the indices are checked on the host (as
// Caffe's GPU code does; they are read back once a forward), then one thread
// per top element gathers; backward, one thread per data element sums the
// top rows that picked its row, in the CPU's order (bitwise the CPU's).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_BATCH_REINDEX_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_BATCH_REINDEX_LAYER_H_

#include <string>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace ops {

// The gradient of data row `row`'s element `k` (inner elements a row): the
// sum of top_diff over the top rows m < m_count whose index is `row`.
NEREUS_HOST_DEVICE inline float BatchReindexGradAt(const float* top_diff, const float* indices, int m_count, int inner,
                                                   int row, int k) {
  float sum = 0.0f;
  for (int m = 0; m < m_count; ++m) {
    if (static_cast<int>(indices[m]) == row) sum += top_diff[m * inner + k];
  }
  return sum;
}

}  // namespace ops

class BatchReindexLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "BatchReindex"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return bottom_index == 0; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The error of the indices (empty: none): each in [0, N).
  std::string CheckIndices(const Blob& data, const Blob& indices) const;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_BATCH_REINDEX_LAYER_H_

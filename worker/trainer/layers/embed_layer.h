// Embed, as Caffe's: a lookup table. The bottom holds indices into a
// vocabulary of embed_param.input_dim entries (any shape, M values, each an
// integer in [0, input_dim)); the top (bottom's shape x num_output) holds
// row idx of the weight (input_dim x num_output, Caffe's layout, transposed
// from InnerProduct's) plus the bias (num_output; bias_term, default true).
// weight_filler and bias_filler fill them (Caffe's default: constant 0).
//
// Backward accumulates into the weight's rows the top gradients of the
// positions that looked them up (in the order of the positions) and into the
// bias their sum; rows nobody looked up get nothing. The indices get no
// gradient: asking for it is fatal, naming the layer, as in Caffe, and a Net
// never asks (AllowForceBackward). An index out of range or not an integer
// is a forward error naming the layer and the position (Caffe checks them in
// debug builds only). No state across iterations but the learned blobs.
//
// GPU code (embed_layer.cu): the indices are checked on the host and grouped
// by row there (their copy is read back once a forward); the forward is one
// thread per top element; the weight gradient one thread per element of the
// rows looked up, adding that row's positions in order, and the bias
// gradient one thread per output summing the positions in order: both
// deterministic, bitwise the CPU's (no atomics).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_EMBED_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_EMBED_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Whether an Embed input is an index of a vocabulary of k entries.
NEREUS_HOST_DEVICE inline bool EmbedIndexValid(float value, int k) {
  return value >= 0.0f && value < static_cast<float>(k) && static_cast<float>(static_cast<int>(value)) == value;
}
// Weight gradient element j of one row: `acc` plus, in order, top_diff's
// element j of the positions members[begin .. end) (n outputs a position).
NEREUS_HOST_DEVICE inline float EmbedWeightGradAt(float acc, const float* top_diff, const int* members, int begin,
                                                  int end, int n, int j) {
  for (int s = begin; s < end; ++s) acc += top_diff[static_cast<int64_t>(members[s]) * n + j];
  return acc;
}
// Bias gradient element j: the sum over the m positions, in order.
NEREUS_HOST_DEVICE inline float EmbedBiasGradAt(const float* top_diff, int m, int n, int j) {
  float sum = 0.0f;
  for (int p = 0; p < m; ++p) sum += top_diff[static_cast<int64_t>(p) * n + j];
  return sum;
}

}  // namespace ops

class EmbedLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Embed"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // The error of the indices (empty: none).
  std::string CheckIndices(const Blob& bottom) const;

  int M_ = 0;  // positions (the bottom's count)
  int K_ = 0;  // input_dim
  int N_ = 0;  // num_output
  bool bias_term_ = true;
#ifdef NEREUS_HAVE_CUDA
  // The rows looked up by the last forward, grouped on the host: rows_[d]
  // is looked up by positions members_[starts_[d] .. starts_[d + 1]), in
  // order; on the device for backward.
  std::vector<int> rows_, starts_, members_;
  std::shared_ptr<SyncedMemory> gpu_groups_;  // rows_, starts_, members_
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_EMBED_LAYER_H_

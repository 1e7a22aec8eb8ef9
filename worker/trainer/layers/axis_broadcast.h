// What Bias and Scale (bias_layer.h, scale_layer.h) share: a blob b -- the
// bias, the scale -- broadcast along bottom 0's axes from `axis`, which views
// bottom 0 as [outer, dim, inner] with dim = b.count(), and the sums over
// each of b's entries' elements (the gradients of a bias, of a scale).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_AXIS_BROADCAST_H_
#define NEREUS_WORKER_TRAINER_LAYERS_AXIS_BROADCAST_H_

#include <string>

#include "common/base/status.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace gpu {
class Device;
}  // namespace gpu

struct AxisBroadcast {
  // Checks that `b` (named `what` in the error) fits bottom's axes from
  // `axis`; returns the error.
  static Status Check(const Blob& bottom, const Blob& b, int axis, const std::string& what);
  // Sets the dims for `b` along `bottom` from `axis`.
  void Reshape(const Blob& bottom, const Blob& b, int axis);
  // sums[d] += the sum of x's elements at entry d (x: [outer, dim, inner]),
  // each (n, d) row summed in order from 0, the rows added in order of n.
  void AddRowSums(const float* x, float* sums) const;
#ifdef NEREUS_HAVE_CUDA
  // out = beta * out + the sums over each entry's elements of the device's
  // x: one GEMV per (n, d) row, one over n.
  void RowSumsGpu(gpu::Device* device, const float* x, float beta, float* out);
#endif

  int outer_dim = 0;
  int dim = 0;
  int inner_dim = 0;
#ifdef NEREUS_HAVE_CUDA
  Blob inner_ones;  // [inner_dim]
  Blob outer_ones;  // [outer_dim]
  Blob row_sums;    // [outer_dim * dim]
#endif
};

// Bias's and Scale's base: bottom 0 and, optionally, the blob as bottom 1
// (else a learned one); one top.
class AxisBroadcastLayer : public Layer {
 public:
  using Layer::Layer;
  int MinBottomBlobs() const override { return 1; }
  int MaxBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  AxisBroadcast axes_;  // The blob along bottom 0: [outer, dim, inner].
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_AXIS_BROADCAST_H_

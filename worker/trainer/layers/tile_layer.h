// Tile, as Caffe's: `tiles` copies of the bottom along `axis` (default 1),
// each copy of the block of axes [axis, end) in turn: a bottom [2, 3] tiled
// 2 times along axis 1 is [2, 6], row r = (x_r0, x_r1, x_r2, x_r0, x_r1,
// x_r2). Backward: each bottom element's gradient is the sum of its copies'
// gradients, in tile order.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_TILE_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_TILE_LAYER_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace ops {

// Per-element arithmetic of Tile, shared by the CPU loops (tile_layer.cc)
// and the GPU kernels (tile_layer.cu). `inner` is the bottom's count from the
// tiled axis on.
//
// The bottom element that top element i copies.
NEREUS_HOST_DEVICE inline int TileSource(int i, int tiles, int inner) {
  return i / (tiles * inner) * inner + i % inner;
}
// The gradient of bottom element j: its tiles' top gradients added in tile
// order (Caffe's copy, then one axpy a tile).
NEREUS_HOST_DEVICE inline float TileGradient(const float* top_diff, int j, int tiles, int inner) {
  const float* first = top_diff + j / inner * tiles * inner + j % inner;
  float sum = first[0];
  for (int t = 1; t < tiles; ++t) sum += first[t * inner];
  return sum;
}

}  // namespace ops

class TileLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Tile"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  int axis_ = 1;
  int tiles_ = 1;
  int inner_dim_ = 1;  // The bottom's count from axis_ on.
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_TILE_LAYER_H_

// Tile's GPU code: one thread per top element forward, one per bottom
// element backward (adding its tiles in the CPU's order: the same bits), each
// running the function tile_layer.h shares with the CPU loops.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/tile_layer.h"

namespace nereus {
namespace {

__global__ void TileForwardKernel(int n, const float* in, int tiles, int inner, float* out) {
  NEREUS_KERNEL_LOOP(i, n) out[i] = in[ops::TileSource(static_cast<int>(i), tiles, inner)];
}

__global__ void TileBackwardKernel(int n, const float* top_diff, int tiles, int inner, float* bottom_diff) {
  NEREUS_KERNEL_LOOP(j, n) bottom_diff[j] = ops::TileGradient(top_diff, static_cast<int>(j), tiles, inner);
}

}  // namespace

void TileLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Launch(device(), "TileForward", top[0]->count(), TileForwardKernel, bottom[0]->gpu_data(), tiles_, inner_dim_,
              top[0]->mutable_gpu_data());
}

void TileLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  gpu::Launch(device(), "TileBackward", bottom[0]->count(), TileBackwardKernel, top[0]->gpu_diff(), tiles_, inner_dim_,
              bottom[0]->mutable_gpu_diff());
}

}  // namespace nereus

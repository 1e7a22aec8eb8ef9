// The one-block reduction of the softmax and label losses' GPU code
// (loss_layers.cu, label_loss_layers.cu): the positions' losses summed in
// double (as the CPU does), the count of valid positions and the first bad
// one. Included by .cu files only.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_LOSS_REDUCE_KERNEL_CUH_
#define NEREUS_WORKER_TRAINER_LAYERS_LOSS_REDUCE_KERNEL_CUH_

#include <climits>

#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/loss_layers.h"

namespace nereus {
namespace gpu {

// One block of kThreads (LaunchOneBlock<kThreads>); state[p] is 1 where
// position p counts and < 0 where its label is bad. top = sum(loss) /
// normalizer, stats = {counted positions, first position with a bad label
// or -1}.
template <int kThreads>
__global__ void LossReduceKernel(int n, const float* loss, const int* state, int mode, int outer, int inner, float* top,
                                 int* stats) {
  __shared__ double loss_shared[kThreads];
  __shared__ int int_shared[kThreads];
  double sum = 0.0;
  int valid = 0;
  int bad = INT_MAX;
  for (int p = threadIdx.x; p < n; p += kThreads) {
    sum += static_cast<double>(loss[p]);
    if (state[p] == 1) ++valid;
    if (state[p] < 0 && p < bad) bad = p;
  }
  sum = BlockSum<kThreads>(sum, loss_shared);
  valid = BlockSum<kThreads>(valid, int_shared);
  bad = BlockMin<kThreads>(bad, int_shared);
  if (threadIdx.x == 0) {
    top[0] = static_cast<float>(sum) / ops::SoftmaxLossNormalizer(mode, outer, inner, valid);
    stats[0] = valid;
    stats[1] = bad == INT_MAX ? -1 : bad;
  }
}

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_LOSS_REDUCE_KERNEL_CUH_

// What a .cu file needs to launch its kernels: Caffe's launch shape (512
// threads a block, a grid-stride loop) and gpu::Launch, which runs a kernel
// on the device's compute stream and records a launch failure naming the
// kernel. Included by .cu files only.
//
// A kernel takes the element count first and loops with NEREUS_KERNEL_LOOP:
//
//   __global__ void ReLUForwardKernel(int n, const float* in, float* out, float slope) {
//     NEREUS_KERNEL_LOOP(i, n) out[i] = ops::ReLUForward(in[i], slope);
//   }
//   gpu::Launch(device(), "ReLUForward", count, ReLUForwardKernel, in, out, slope);
//
// Launch does nothing for n <= 0 or while the device holds an error (so a
// failed allocation does not turn into a kernel reading a null pointer).
#ifndef NEREUS_WORKER_TRAINER_GPU_KERNEL_H_
#define NEREUS_WORKER_TRAINER_GPU_KERNEL_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/base/host_device.h"
#include "worker/trainer/gpu/cuda_check.h"
#include "worker/trainer/gpu/device.h"

namespace nereus {
namespace gpu {

constexpr int kThreadsPerBlock = 512;
// Enough blocks for one element a thread, capped (the loop covers the rest).
inline unsigned BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

// Records the error of the launch just made (a bad configuration, no kernel
// image for this GPU) as "kernel <name>: ...".
inline void CheckLaunch(Device* device, const char* name) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) device->RecordError(CudaStatus(e, std::string("kernel ") + name));
}

template <typename... KernelArgs, typename... Args>
void Launch(Device* device, const char* name, int n, void (*kernel)(int, KernelArgs...), Args... args) {
  if (n <= 0 || !device->ok()) return;
  kernel<<<BlocksFor(n), kThreadsPerBlock, 0, device->compute_stream()>>>(n, args...);
  CheckLaunch(device, name);
}

// The sum of every thread's `value` over one block of kThreads threads
// (a power of two), returned to every thread. `shared` holds kThreads
// values. For the device-side reductions of loss and accuracy layers, run
// as a single block.
template <int kThreads, class T>
__device__ T BlockSum(T value, T* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

template <int kThreads>
__device__ int BlockMin(int value, int* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride && shared[threadIdx.x + stride] < shared[threadIdx.x]) {
      shared[threadIdx.x] = shared[threadIdx.x + stride];
    }
    __syncthreads();
  }
  const int least = shared[0];
  __syncthreads();
  return least;
}

// The block size of the layers' one-block reductions (losses, accuracy).
constexpr int kReduceThreads = 256;

// Launches `kernel` as one block of kThreads threads (a reduction).
template <int kThreads, typename... KernelArgs, typename... Args>
void LaunchOneBlock(Device* device, const char* name, void (*kernel)(KernelArgs...), Args... args) {
  if (!device->ok()) return;
  kernel<<<1, kThreads, 0, device->compute_stream()>>>(args...);
  CheckLaunch(device, name);
}

}  // namespace gpu
}  // namespace nereus

// for (i over [0, n)) in a grid-stride loop; i is an int64_t, so that
// i + stride cannot overflow for any int n.
#define NEREUS_KERNEL_LOOP(i, n)                                                         \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

#endif  // NEREUS_WORKER_TRAINER_GPU_KERNEL_H_

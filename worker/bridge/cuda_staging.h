// CudaStaging: DeviceStaging on a CUDA device (a CUDA build only; the CPU
// twin is HostStaging). It uses the Device's compute stream (the net's
// kernels) and copy stream:
//   StageGradients  cudaEventRecord(computed, compute stream);
//                   cudaStreamWaitEvent(copy stream, computed);
//                   cudaMemcpyAsync(device -> pinned mirror, copy stream) per
//                   parameter; cudaEventRecord(copied, copy stream); then the
//                   completion thread (owned here) waits for `copied`
//                   (cudaEventSynchronize on an event made with
//                   cudaEventBlockingSync: it sleeps, it does not spin) and
//                   runs `done`, in the order the layers were staged.
//   StageWeights    cudaMemcpyAsync(pinned mirror -> device, copy stream) per
//                   parameter; cudaEventRecord(uploaded, copy stream);
//                   cudaStreamWaitEvent(compute stream, uploaded). The calling
//                   thread never synchronises the device; the completion
//                   thread sees the upload end too (its span, its events).
// Every copy is bracketed by timed events on the copy stream, so the span
// sink gets its measured duration (ending when the completion was seen).
// A failed CUDA call is the sticky error, naming the layer and the call.
//
// Ran on an H200: cuda_staging_test, gpu_job_test, bench/results/gpu/.
#ifndef NEREUS_WORKER_BRIDGE_CUDA_STAGING_H_
#define NEREUS_WORKER_BRIDGE_CUDA_STAGING_H_

#include <memory>

#include "common/base/status.h"
#include "worker/bridge/device_staging.h"
#include "worker/trainer/gpu/device.h"

namespace nereus {

// `device` (not owned) must outlive the staging; it must be a CUDA device
// (not a stand-in). Errors: a stand-in device, or the CUDA call that failed.
// Defined in CUDA builds only (cuda_staging.cc is compiled only there).
StatusOr<std::unique_ptr<DeviceStaging>> NewCudaStaging(gpu::Device* device);

}  // namespace nereus

#endif  // NEREUS_WORKER_BRIDGE_CUDA_STAGING_H_

// The flags of a GPU that trains (nereus_worker and nereus_bench link them):
// --tf32, --cudnn, --conv_workspace_mb. Binaries only; the trainer takes
// gpu::DeviceOptions.
#ifndef NEREUS_WORKER_TRAINER_GPU_DEVICE_FLAGS_H_
#define NEREUS_WORKER_TRAINER_GPU_DEVICE_FLAGS_H_

#include "worker/trainer/gpu/device.h"

namespace nereus {
namespace gpu {

// `base` with the flags' settings.
DeviceOptions DeviceOptionsFromFlags(DeviceOptions base = DeviceOptions());

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_DEVICE_FLAGS_H_

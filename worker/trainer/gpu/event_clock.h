// A LayerClock (net_timer.h) of CUDA events: Start and Stop record an event
// on the device's compute stream (the host does not wait), Read waits for
// the pass's last event and reads each slot's elapsed time. CUDA builds only.
#ifndef NEREUS_WORKER_TRAINER_GPU_EVENT_CLOCK_H_
#define NEREUS_WORKER_TRAINER_GPU_EVENT_CLOCK_H_

#include <memory>

#include "common/base/status.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/net_timer.h"

namespace nereus {
namespace gpu {

StatusOr<std::unique_ptr<LayerClock>> NewEventClock(Device* device, int slots);

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_EVENT_CLOCK_H_

// TimeNet: Caffe's `caffe time` for a Net: each layer's average forward and
// backward time over `iterations` passes (after one pass not timed, in which
// a GPU's convolutions pick their algorithms), with the totals the sums of
// the layers' averages. On the CPU every layer is timed by the steady clock
// around its call; on a GPU by events recorded on the compute stream before
// and after it (gpu/event_clock.h), read once per pass, so the host queues a
// whole pass as in training and the times are the device's.
//
// The clock is an interface (LayerClock) so that the timing logic is tested
// on the CPU with the same calls a GPU's event clock gets.
#ifndef NEREUS_WORKER_TRAINER_NET_TIMER_H_
#define NEREUS_WORKER_TRAINER_NET_TIMER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "worker/trainer/net.h"

namespace nereus {

// Marks the start and the end of slot `slot` (0 <= slot < slots) once per
// pass; Read gives each slot's time of the pass in milliseconds (after the
// pass: a GPU clock waits for its events) and starts a new pass.
class LayerClock {
 public:
  virtual ~LayerClock() = default;
  virtual void Start(int slot) = 0;
  virtual void Stop(int slot) = 0;
  virtual StatusOr<std::vector<double>> Read() = 0;
};

// The host's steady clock; slots never marked read 0.
std::unique_ptr<LayerClock> NewHostLayerClock(int slots);

struct LayerTiming {
  std::string name;
  std::string type;
  double forward_ms = 0;   // Average per pass.
  double backward_ms = 0;  // Average per pass (0 for a layer without backward).
};

struct NetTiming {
  std::string net;
  std::string device;  // "CPU" or the GPU's description.
  int iterations = 0;
  std::vector<LayerTiming> layers;  // In the net's order.
  double forward_ms = 0;            // The layers' forward averages summed.
  double backward_ms = 0;
  double wall_ms = 0;            // Measured per pass on the host, forward and backward together.
  size_t peak_device_bytes = 0;  // The device's peak allocation (0 on the CPU).
};

// Times `net` (its parameters and data as they are: it runs Forward and
// Backward `iterations` + 1 times, changing no weight). `clock` null: the
// host clock on a CPU net, the event clock on a GPU net. Errors: the net's
// (a layer's failure names it), the clock's.
StatusOr<NetTiming> TimeNet(Net* net, int iterations, std::unique_ptr<LayerClock> clock = nullptr);

// Caffe's report: a line per layer and pass, then the totals.
std::string FormatNetTiming(const NetTiming& t);
// The same as JSON: {"net", "device", "iterations", "forward_ms",
// "backward_ms", "wall_ms", "peak_device_bytes", "layers": [{"name", "type",
// "forward_ms", "backward_ms"}, ...]}.
std::string NetTimingJson(const NetTiming& t);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_NET_TIMER_H_

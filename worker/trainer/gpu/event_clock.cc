#include "worker/trainer/gpu/event_clock.h"

#include <cuda_runtime.h>

#include <vector>

#include "worker/trainer/gpu/cuda_check.h"

namespace nereus {
namespace gpu {
namespace {

class EventClock : public LayerClock {
 public:
  explicit EventClock(Device* device) : device_(device) {}
  ~EventClock() override {
    for (auto& e : start_) cudaEventDestroy(e);
    for (auto& e : stop_) cudaEventDestroy(e);
  }

  Status Init(int slots) {
    start_.assign(slots, nullptr);
    stop_.assign(slots, nullptr);
    marked_.assign(slots, false);
    for (int s = 0; s < slots; ++s) {
      NEREUS_CUDA_RETURN_IF_ERROR(cudaEventCreate(&start_[s]));
      NEREUS_CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop_[s]));
    }
    return Status::OK();
  }

  void Start(int slot) override {
    device_->RecordError(CudaStatus(cudaEventRecord(start_[slot], device_->compute_stream()), "cudaEventRecord"));
  }
  void Stop(int slot) override {
    device_->RecordError(CudaStatus(cudaEventRecord(stop_[slot], device_->compute_stream()), "cudaEventRecord"));
    marked_[slot] = true;
  }

  StatusOr<std::vector<double>> Read() override {
    std::vector<double> ms(start_.size(), 0.0);
    NEREUS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(device_->compute_stream()));
    for (size_t s = 0; s < start_.size(); ++s) {
      if (!marked_[s]) continue;
      float elapsed = 0;
      NEREUS_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&elapsed, start_[s], stop_[s]));
      ms[s] = elapsed;
      marked_[s] = false;
    }
    return ms;
  }

 private:
  Device* const device_;
  std::vector<cudaEvent_t> start_, stop_;
  std::vector<bool> marked_;
};

}  // namespace

StatusOr<std::unique_ptr<LayerClock>> NewEventClock(Device* device, int slots) {
  auto clock = std::make_unique<EventClock>(device);
  ScopedDevice scope(device);
  RETURN_IF_ERROR(clock->Init(slots).Annotate("the event clock on " + device->description()));
  return std::unique_ptr<LayerClock>(std::move(clock));
}

}  // namespace gpu
}  // namespace nereus

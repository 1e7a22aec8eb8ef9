// HostBuffer: an array of floats in host memory that a device copies from
// without staging: page-locked by the DeviceMemory it is given (pinned once,
// at set-up: pinning is slow), else plain heap memory (no device, or pinning
// refused). The Data layer's prefetched batches live in these, so a batch
// goes to the device by DMA on the copy stream while the previous
// iteration computes. Move-only.
#ifndef NEREUS_WORKER_TRAINER_GPU_HOST_BUFFER_H_
#define NEREUS_WORKER_TRAINER_GPU_HOST_BUFFER_H_

#include <glog/logging.h>

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <utility>

#include "worker/trainer/gpu/device_memory.h"

namespace nereus {
namespace gpu {

class HostBuffer {
 public:
  HostBuffer() = default;
  // `size` floats, zero-filled; page-locked through `memory` when it is not
  // null and grants it.
  HostBuffer(size_t size, std::shared_ptr<DeviceMemory> memory) : size_(size) {
    const size_t bytes = (size > 0 ? size : 1) * sizeof(float);
    if (memory != nullptr) data_ = static_cast<float*>(memory->AllocateHost(bytes));
    if (data_ != nullptr) {
      memory_ = std::move(memory);
      for (size_t i = 0; i < size; ++i) data_[i] = 0.0f;
    } else {
      data_ = static_cast<float*>(std::calloc(bytes, 1));
      CHECK(data_ != nullptr) << "out of host memory allocating " << bytes << " bytes";
    }
  }
  ~HostBuffer() { Release(); }
  HostBuffer(HostBuffer&& other) noexcept { *this = std::move(other); }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      memory_ = std::move(other.memory_);
    }
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return memory_ != nullptr; }

 private:
  void Release() {
    if (data_ == nullptr) return;
    if (memory_ != nullptr) {
      memory_->FreeHost(data_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
  }

  float* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<DeviceMemory> memory_;  // Set when data_ is page-locked.
};

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_HOST_BUFFER_H_

// SyncedMemory: a buffer that can live on the host, on a device, or both, and
// moves data lazily between them, as Caffe's SyncedMemory does: head() says
// where the up-to-date copy is; cpu_data()/gpu_data() copy only when the other
// side holds the newer bytes; mutable_* makes its side the only valid one.
//
// Device memory comes from the current device (gpu::CurrentDevice, set by the
// Net and the Solver while they work; gpu/device.h) and is given back to it
// when this buffer goes: its DeviceMemory does the allocations and the
// (blocking) copies, on the device's compute stream. Host memory allocated
// while a device is current, or for a buffer that already has a device copy,
// is page-locked (Caffe's "pinned host memory in GPU mode"); otherwise, and
// when pinning is refused, it is plain (calloc'd) memory, as on the CPU.
//
// Errors: an allocation or copy that fails is recorded on the current device
// (Device::RecordError: the Net reports it after the layer, naming net, layer
// and the bytes asked for) and gpu_data() returns nullptr; with no current
// device it is fatal. Without CUDA and without a current device, the device
// accessors fail loudly ("built without CUDA").
//
// Not thread-safe: one SyncedMemory is used by one thread at a time.
#ifndef NEREUS_WORKER_TRAINER_SYNCEDMEM_H_
#define NEREUS_WORKER_TRAINER_SYNCEDMEM_H_

#include <cstddef>
#include <memory>

#include "common/base/status.h"

namespace nereus {
namespace gpu {
class DeviceMemory;
}  // namespace gpu

class SyncedMemory {
 public:
  // Where the up-to-date copy lives.
  enum class Head { kUninitialized, kAtCpu, kAtGpu, kSynced };

  SyncedMemory() = default;
  explicit SyncedMemory(size_t size) : size_(size) {}
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  // Host accessors: allocate (zero-filled) on first use, copy from the device
  // if the device holds the newer copy. mutable_* marks the host copy as the
  // only valid one.
  const void* cpu_data();
  void* mutable_cpu_data();
  // Uses `data` (owned by the caller, at least size() bytes) as the host copy.
  void set_cpu_data(void* data);

  // Device accessors: allocate (zero-filled) on first use, copy from the host
  // if the host holds the newer copy. nullptr after a failure (see above).
  const void* gpu_data();
  void* mutable_gpu_data();

  // The device copy was written behind this buffer's back, by an
  // asynchronous copy that the compute stream waits for before any later
  // use (the bridge's staging of fresh weights): it is now the fresh one and
  // the host copy stale (head kAtGpu). The device copy must exist.
  void MarkGpuWritten();

  Head head() const { return head_; }
  size_t size() const { return size_; }
  // Whether the host copy is page-locked memory.
  bool cpu_pinned() const { return cpu_pinned_; }
  // The DeviceMemory the device copy came from (null before the first
  // device use).
  const std::shared_ptr<gpu::DeviceMemory>& device_memory() const { return memory_; }

 private:
  void ToCpu();
  void ToGpu();
  // Host memory of size_ bytes (at least 1): page-locked when a device is
  // current or the device copy exists, else from malloc.
  void AllocateHost(bool zero);
  // The current device's memory, or CUDA's on the current CUDA device when
  // none is current; nullptr (fatal) in a CPU-only build without one.
  std::shared_ptr<gpu::DeviceMemory> PickDeviceMemory();
  // Hands a failure to the current device, or dies without one.
  void ReportError(const char* what, const Status& error);

  void* cpu_ptr_ = nullptr;
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  Head head_ = Head::kUninitialized;
  bool own_cpu_data_ = false;
  bool cpu_pinned_ = false;
  std::shared_ptr<gpu::DeviceMemory> memory_;  // Owns gpu_ptr_ and a pinned cpu_ptr_.
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_SYNCEDMEM_H_

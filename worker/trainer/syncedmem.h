// SyncedMemory: a buffer that can live on the host, on a device, or both, and
// moves data lazily between them, as Caffe's SyncedMemory does. Nereus builds
// without CUDA by default; then every device accessor fails loudly with a
// "built without CUDA" message, so a GPU path can be added later without
// changing the Blob interface.
//
// Not thread-safe: one SyncedMemory is used by one thread at a time.
#ifndef NEREUS_WORKER_TRAINER_SYNCEDMEM_H_
#define NEREUS_WORKER_TRAINER_SYNCEDMEM_H_

#include <cstddef>

namespace nereus {

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

  // Device accessors. LOG(FATAL) when built without CUDA.
  const void* gpu_data();
  void* mutable_gpu_data();

  Head head() const { return head_; }
  size_t size() const { return size_; }

 private:
  void ToCpu();
  void ToGpu();

  void* cpu_ptr_ = nullptr;
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  Head head_ = Head::kUninitialized;
  bool own_cpu_data_ = false;
  bool own_gpu_data_ = false;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_SYNCEDMEM_H_

// DeviceMemory: where SyncedMemory's device-side bytes come from and how
// they move between host and device. Two kinds:
//   - the CUDA runtime on one device (NewCudaMemory): cudaMalloc, page-locked
//     host memory from cudaMallocHost, and copies ordered on the device's
//     compute stream;
//   - a host stand-in (NewHostStandInMemory): "device" memory is host memory,
//     copies are memcpy. It exists so that the bookkeeping around devices
//     (SyncedMemory's heads, which copies happen when, running out of memory
//     while a net is built) is tested on machines without a GPU. Only memory
//     operations work on it: a layer's GPU code cannot run there.
//
// Both keep count of the bytes in use and may be given a limit; an
// allocation past the limit, or one the device refuses, is a
// ResourceExhausted error naming the bytes asked for, the bytes in use and
// the limit. Copies are synchronous with respect to the host (as Caffe's
// SyncedMemory): the Data layer's asynchronous batch copies use the device's
// copy stream directly.
//
// Thread-safe: the counters are atomic, and the CUDA runtime is.
#ifndef NEREUS_WORKER_TRAINER_GPU_DEVICE_MEMORY_H_
#define NEREUS_WORKER_TRAINER_GPU_DEVICE_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/base/status.h"

struct CUstream_st;

namespace nereus {
namespace gpu {

class DeviceMemory {
 public:
  // limit_bytes 0: no limit but the device's own.
  explicit DeviceMemory(size_t limit_bytes) : limit_bytes_(limit_bytes) {}
  virtual ~DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // `bytes` (> 0) of device memory, not initialised.
  StatusOr<void*> Allocate(size_t bytes);
  // Gives back what Allocate returned (`bytes` as asked).
  void Free(void* ptr, size_t bytes);
  // Page-locked host memory of `bytes` (> 0), not initialised; nullptr when
  // the system refuses it (logged once), and the caller then uses malloc.
  void* AllocateHost(size_t bytes);
  void FreeHost(void* ptr);

  // Blocking copies; a copy to the host comes after everything queued on the
  // device's compute stream before it.
  virtual Status CopyToDevice(void* dst, const void* src, size_t bytes) = 0;
  virtual Status CopyToHost(void* dst, const void* src, size_t bytes) = 0;
  // Sets `bytes` of device memory to zero.
  virtual Status ZeroDevice(void* dst, size_t bytes) = 0;
  // Copies from now on use the legacy default stream (the Device that owned
  // the compute stream is gone).
  virtual void DetachStream() {}

  // "CUDA device 0" or "host stand-in".
  virtual std::string name() const = 0;
  size_t limit_bytes() const { return limit_bytes_; }
  size_t bytes_in_use() const { return in_use_.load(); }
  size_t peak_bytes() const { return peak_.load(); }
  int64_t copies_to_device() const { return copies_to_device_.load(); }
  int64_t copies_to_host() const { return copies_to_host_.load(); }

 protected:
  virtual Status RawAllocate(size_t bytes, void** ptr) = 0;
  virtual void RawFree(void* ptr) = 0;
  virtual void* RawAllocateHost(size_t bytes) = 0;
  virtual void RawFreeHost(void* ptr) = 0;
  void CountCopyToDevice() { copies_to_device_.fetch_add(1); }
  void CountCopyToHost() { copies_to_host_.fetch_add(1); }

 private:
  const size_t limit_bytes_;
  std::atomic<size_t> in_use_{0};
  std::atomic<size_t> peak_{0};
  std::atomic<int64_t> copies_to_device_{0};
  std::atomic<int64_t> copies_to_host_{0};
  std::atomic<bool> warned_host_{false};
};

// Host memory standing in for a device (tests of the bookkeeping).
std::shared_ptr<DeviceMemory> NewHostStandInMemory(size_t limit_bytes = 0);

// The CUDA runtime's memory on `device_id`, copies on `stream` (null: the
// legacy default stream). Only in a CUDA build (worker/trainer/gpu/
// device_memory.cc defines it there).
std::shared_ptr<DeviceMemory> NewCudaMemory(int device_id, CUstream_st* stream, size_t limit_bytes = 0);

// "1.5 GiB (1610612736 bytes)".
std::string FormatBytes(size_t bytes);

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_DEVICE_MEMORY_H_

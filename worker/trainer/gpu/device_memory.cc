#include "worker/trainer/gpu/device_memory.h"

#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/gpu/cuda_check.h"
#endif

namespace nereus {
namespace gpu {

std::string FormatBytes(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%zu bytes", bytes);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s (%zu bytes)", v, units[u], bytes);
  }
  return buf;
}

StatusOr<void*> DeviceMemory::Allocate(size_t bytes) {
  CHECK_GT(bytes, 0u);
  const size_t before = in_use_.fetch_add(bytes);
  auto refuse = [&](const std::string& why) -> Status {
    in_use_.fetch_sub(bytes);
    return ResourceExhaustedError("out of device memory on " + name() + ": asked for " + FormatBytes(bytes) + " with " +
                                  FormatBytes(before) + " in use" + why);
  };
  if (limit_bytes_ > 0 && before + bytes > limit_bytes_) {
    return refuse(" and a limit of " + FormatBytes(limit_bytes_));
  }
  void* ptr = nullptr;
  Status s = RawAllocate(bytes, &ptr);
  if (!s.ok()) return refuse(" (" + s.message() + ")");
  size_t peak = peak_.load();
  while (before + bytes > peak && !peak_.compare_exchange_weak(peak, before + bytes)) {
  }
  return ptr;
}

void DeviceMemory::Free(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  RawFree(ptr);
  in_use_.fetch_sub(bytes);
}

void* DeviceMemory::AllocateHost(size_t bytes) {
  CHECK_GT(bytes, 0u);
  void* ptr = RawAllocateHost(bytes);
  if (ptr == nullptr && !warned_host_.exchange(true)) {
    LOG(WARNING) << name() << ": page-locked host memory refused (asked for " << FormatBytes(bytes)
                 << "); host copies of device data use pageable memory from now on, and their transfers are slower";
  }
  return ptr;
}

void DeviceMemory::FreeHost(void* ptr) {
  if (ptr != nullptr) RawFreeHost(ptr);
}

namespace {

class HostStandInMemory : public DeviceMemory {
 public:
  using DeviceMemory::DeviceMemory;
  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    CountCopyToDevice();
    std::memcpy(dst, src, bytes);
    return Status::OK();
  }
  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    CountCopyToHost();
    std::memcpy(dst, src, bytes);
    return Status::OK();
  }
  Status ZeroDevice(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::OK();
  }
  std::string name() const override { return "host stand-in"; }

 protected:
  Status RawAllocate(size_t bytes, void** ptr) override {
    *ptr = std::malloc(bytes);
    return *ptr != nullptr ? Status::OK() : ResourceExhaustedError("malloc failed");
  }
  void RawFree(void* ptr) override { std::free(ptr); }
  void* RawAllocateHost(size_t bytes) override { return std::malloc(bytes); }
  void RawFreeHost(void* ptr) override { std::free(ptr); }
};

#ifdef NEREUS_HAVE_CUDA
class CudaMemory : public DeviceMemory {
 public:
  CudaMemory(int device_id, cudaStream_t stream, size_t limit_bytes)
      : DeviceMemory(limit_bytes), device_id_(device_id), stream_(stream) {}

  Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    CountCopyToDevice();
    return CopyAndWait(dst, src, bytes, cudaMemcpyHostToDevice);
  }
  Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    CountCopyToHost();
    return CopyAndWait(dst, src, bytes, cudaMemcpyDeviceToHost);
  }
  Status ZeroDevice(void* dst, size_t bytes) override {
    NEREUS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, stream_.load()));
    return Status::OK();
  }
  void DetachStream() override { stream_.store(nullptr); }
  std::string name() const override { return "CUDA device " + std::to_string(device_id_); }

 protected:
  Status RawAllocate(size_t bytes, void** ptr) override {
    cudaError_t e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();  // cudaMalloc's failure is not sticky; clear it.
      return CudaStatus(e, "cudaMalloc");
    }
    return Status::OK();
  }
  void RawFree(void* ptr) override {
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) LOG(ERROR) << CudaStatus(e, "cudaFree").message();
  }
  void* RawAllocateHost(size_t bytes) override {
    void* ptr = nullptr;
    if (cudaMallocHost(&ptr, bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return ptr;
  }
  void RawFreeHost(void* ptr) override {
    cudaError_t e = cudaFreeHost(ptr);
    if (e != cudaSuccess) LOG(ERROR) << CudaStatus(e, "cudaFreeHost").message();
  }

 private:
  // A copy on the stream, waited for: blocking, so the host may overwrite
  // its copy at once (Caffe's SyncedMemory copies with a blocking cudaMemcpy
  // too).
  Status CopyAndWait(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    cudaStream_t stream = stream_.load();
    NEREUS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, stream));
    NEREUS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return Status::OK();
  }

  const int device_id_;
  std::atomic<cudaStream_t> stream_;
};
#endif

}  // namespace

std::shared_ptr<DeviceMemory> NewHostStandInMemory(size_t limit_bytes) {
  return std::make_shared<HostStandInMemory>(limit_bytes);
}

#ifdef NEREUS_HAVE_CUDA
std::shared_ptr<DeviceMemory> NewCudaMemory(int device_id, CUstream_st* stream, size_t limit_bytes) {
  return std::make_shared<CudaMemory>(device_id, stream, limit_bytes);
}
#endif

}  // namespace gpu
}  // namespace nereus

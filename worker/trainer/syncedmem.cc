#include "worker/trainer/syncedmem.h"

#include <glog/logging.h>

#include <cstdlib>
#include <cstring>

#include "worker/trainer/gpu/device.h"

#ifdef NEREUS_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace nereus {

SyncedMemory::~SyncedMemory() {
  if (cpu_ptr_ != nullptr && own_cpu_data_) {
    if (cpu_pinned_) {
      memory_->FreeHost(cpu_ptr_);
    } else {
      std::free(cpu_ptr_);
    }
  }
  if (gpu_ptr_ != nullptr) memory_->Free(gpu_ptr_, size_ > 0 ? size_ : 1);
}

std::shared_ptr<gpu::DeviceMemory> SyncedMemory::PickDeviceMemory() {
  if (gpu::Device* device = gpu::CurrentDevice()) return device->memory();
#ifdef NEREUS_HAVE_CUDA
  int device_id = 0;
  cudaGetDevice(&device_id);
  return gpu::NewCudaMemory(device_id, nullptr);
#else
  LOG(FATAL) << "SyncedMemory: device memory asked for, but Nereus was built without CUDA: use the CPU path "
                "(solver_mode: CPU) or rebuild with the CUDA toolkit (docs/GPU.md)";
  return nullptr;
#endif
}

void SyncedMemory::ReportError(const char* what, const Status& error) {
  gpu::Device* device = gpu::CurrentDevice();
  CHECK(device != nullptr) << "SyncedMemory: " << what << ": " << error.message();
  device->RecordError(error);
}

void SyncedMemory::AllocateHost(bool zero) {
  const size_t bytes = size_ > 0 ? size_ : 1;
  gpu::Device* device = gpu::CurrentDevice();
  if (memory_ == nullptr && device != nullptr) memory_ = device->memory();
  cpu_pinned_ = false;
  cpu_ptr_ = nullptr;
  if (memory_ != nullptr) {
    cpu_ptr_ = memory_->AllocateHost(bytes);
    if (cpu_ptr_ != nullptr) {
      cpu_pinned_ = true;
      if (zero) std::memset(cpu_ptr_, 0, bytes);
    }
  }
  if (cpu_ptr_ == nullptr) cpu_ptr_ = zero ? std::calloc(bytes, 1) : std::malloc(bytes);
  CHECK(cpu_ptr_ != nullptr) << "out of host memory allocating " << size_ << " bytes";
  own_cpu_data_ = true;
}

void SyncedMemory::ToCpu() {
  switch (head_) {
    case Head::kUninitialized:
      AllocateHost(/*zero=*/true);
      head_ = Head::kAtCpu;
      break;
    case Head::kAtGpu: {
      if (cpu_ptr_ == nullptr) AllocateHost(/*zero=*/false);
      Status s = size_ > 0 ? memory_->CopyToHost(cpu_ptr_, gpu_ptr_, size_) : Status::OK();
      if (!s.ok()) {
        ReportError("copying to the host", s.Annotate("copying " + gpu::FormatBytes(size_) + " to the host"));
        break;  // The host copy stays stale; the device's error says so.
      }
      head_ = Head::kSynced;
      break;
    }
    case Head::kAtCpu:
    case Head::kSynced:
      break;
  }
}

void SyncedMemory::ToGpu() {
  const bool uninitialized = head_ == Head::kUninitialized;
  if (head_ == Head::kAtGpu || head_ == Head::kSynced) return;
  if (gpu_ptr_ == nullptr) {
    if (memory_ == nullptr) memory_ = PickDeviceMemory();
    StatusOr<void*> ptr = memory_->Allocate(size_ > 0 ? size_ : 1);
    if (!ptr.ok()) {
      ReportError("allocating device memory", ptr.status());
      return;
    }
    gpu_ptr_ = *ptr;
  }
  Status s;
  if (uninitialized) {
    s = size_ > 0 ? memory_->ZeroDevice(gpu_ptr_, size_) : Status::OK();
    if (s.ok()) head_ = Head::kAtGpu;
  } else {
    s = size_ > 0 ? memory_->CopyToDevice(gpu_ptr_, cpu_ptr_, size_) : Status::OK();
    if (s.ok()) head_ = Head::kSynced;
  }
  if (!s.ok())
    ReportError("copying to the device", s.Annotate("copying " + gpu::FormatBytes(size_) + " to the device"));
}

const void* SyncedMemory::cpu_data() {
  ToCpu();
  return cpu_ptr_;
}

void* SyncedMemory::mutable_cpu_data() {
  ToCpu();
  head_ = Head::kAtCpu;
  return cpu_ptr_;
}

void SyncedMemory::set_cpu_data(void* data) {
  CHECK(data != nullptr);
  if (own_cpu_data_) {
    if (cpu_pinned_) {
      memory_->FreeHost(cpu_ptr_);
    } else {
      std::free(cpu_ptr_);
    }
  }
  cpu_ptr_ = data;
  head_ = Head::kAtCpu;
  own_cpu_data_ = false;
  cpu_pinned_ = false;
}

const void* SyncedMemory::gpu_data() {
  ToGpu();
  return gpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  ToGpu();
  if (gpu_ptr_ != nullptr) head_ = Head::kAtGpu;
  return gpu_ptr_;
}

void SyncedMemory::MarkGpuWritten() {
  CHECK(gpu_ptr_ != nullptr) << "SyncedMemory::MarkGpuWritten without a device copy";
  head_ = Head::kAtGpu;
}

}  // namespace nereus

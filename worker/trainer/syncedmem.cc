#include "worker/trainer/syncedmem.h"

#include <glog/logging.h>

#include <cstdlib>
#include <cstring>

#ifdef NEREUS_HAVE_CUDA
#include <cuda_runtime.h>
#define NEREUS_CUDA_CHECK(expr)                                           \
  do {                                                                    \
    cudaError_t _e = (expr);                                              \
    CHECK_EQ(_e, cudaSuccess) << #expr << ": " << cudaGetErrorString(_e); \
  } while (0)
#endif

namespace nereus {
namespace {

[[maybe_unused]] [[noreturn]] void NoGpu(const char* what) {
  LOG(FATAL) << "SyncedMemory::" << what
             << " called, but Nereus was built without CUDA: use the CPU path "
                "(solver_mode: CPU) or rebuild with the CUDA toolkit";
  std::abort();
}

}  // namespace

SyncedMemory::~SyncedMemory() {
  if (cpu_ptr_ != nullptr && own_cpu_data_) std::free(cpu_ptr_);
#ifdef NEREUS_HAVE_CUDA
  if (gpu_ptr_ != nullptr && own_gpu_data_) cudaFree(gpu_ptr_);
#endif
}

void SyncedMemory::ToCpu() {
  switch (head_) {
    case Head::kUninitialized:
      cpu_ptr_ = std::calloc(size_ > 0 ? size_ : 1, 1);
      CHECK(cpu_ptr_ != nullptr) << "out of host memory allocating " << size_ << " bytes";
      own_cpu_data_ = true;
      head_ = Head::kAtCpu;
      break;
    case Head::kAtGpu:
#ifdef NEREUS_HAVE_CUDA
      if (cpu_ptr_ == nullptr) {
        cpu_ptr_ = std::malloc(size_ > 0 ? size_ : 1);
        CHECK(cpu_ptr_ != nullptr) << "out of host memory allocating " << size_ << " bytes";
        own_cpu_data_ = true;
      }
      NEREUS_CUDA_CHECK(cudaMemcpy(cpu_ptr_, gpu_ptr_, size_, cudaMemcpyDeviceToHost));
      head_ = Head::kSynced;
#else
      NoGpu("ToCpu");
#endif
      break;
    case Head::kAtCpu:
    case Head::kSynced:
      break;
  }
}

void SyncedMemory::ToGpu() {
#ifdef NEREUS_HAVE_CUDA
  switch (head_) {
    case Head::kUninitialized:
      NEREUS_CUDA_CHECK(cudaMalloc(&gpu_ptr_, size_ > 0 ? size_ : 1));
      NEREUS_CUDA_CHECK(cudaMemset(gpu_ptr_, 0, size_));
      own_gpu_data_ = true;
      head_ = Head::kAtGpu;
      break;
    case Head::kAtCpu:
      if (gpu_ptr_ == nullptr) {
        NEREUS_CUDA_CHECK(cudaMalloc(&gpu_ptr_, size_ > 0 ? size_ : 1));
        own_gpu_data_ = true;
      }
      NEREUS_CUDA_CHECK(cudaMemcpy(gpu_ptr_, cpu_ptr_, size_, cudaMemcpyHostToDevice));
      head_ = Head::kSynced;
      break;
    case Head::kAtGpu:
    case Head::kSynced:
      break;
  }
#else
  NoGpu("ToGpu");
#endif
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
  if (own_cpu_data_) std::free(cpu_ptr_);
  cpu_ptr_ = data;
  head_ = Head::kAtCpu;
  own_cpu_data_ = false;
}

const void* SyncedMemory::gpu_data() {
  ToGpu();
  return gpu_ptr_;
}

void* SyncedMemory::mutable_gpu_data() {
  ToGpu();
  head_ = Head::kAtGpu;
  return gpu_ptr_;
}

}  // namespace nereus

#include "worker/trainer/gpu/device.h"

#include <glog/logging.h>

#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/gpu/cublas_library.h"
#include "worker/trainer/gpu/cuda_check.h"
#endif

namespace nereus {
namespace gpu {
namespace {

thread_local Device* current_device = nullptr;

}  // namespace

bool BuiltWithCuda() {
#ifdef NEREUS_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

#ifdef NEREUS_HAVE_CUDA
namespace {

// cudaGetDeviceCount's answer: the count, or why there is none.
int CountDevices(std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why != nullptr) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the CUDA runtime reports 0 devices";
  return count;
}

}  // namespace

int DeviceCount() { return CountDevices(nullptr); }

StatusOr<std::vector<std::vector<std::string>>> DescribeDevices() {
  std::string why;
  const int count = CountDevices(&why);
  if (count == 0) return FailedPreconditionError("no CUDA device (" + why + ")");
  std::vector<std::vector<std::string>> out;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp p;
    RETURN_IF_ERROR(CudaStatus(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties"));
    int clock_khz = 0, memory_clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, d);
    out.push_back(
        {"Device id: " + std::to_string(d), std::string("Name: ") + p.name,
         "Compute capability: " + std::to_string(p.major) + "." + std::to_string(p.minor),
         "Total global memory: " + std::to_string(p.totalGlobalMem) + " (" + FormatBytes(p.totalGlobalMem) + ")",
         "Shared memory per block: " + std::to_string(p.sharedMemPerBlock),
         "Registers per block: " + std::to_string(p.regsPerBlock), "Warp size: " + std::to_string(p.warpSize),
         "Maximum threads per block: " + std::to_string(p.maxThreadsPerBlock),
         "Number of multiprocessors: " + std::to_string(p.multiProcessorCount),
         "Clock rate: " + std::to_string(clock_khz) + " kHz",
         "Memory clock rate: " + std::to_string(memory_clock_khz) + " kHz",
         "Memory bus width: " + std::to_string(p.memoryBusWidth) + " bits",
         "L2 cache: " + std::to_string(p.l2CacheSize) + " bytes",
         std::string("ECC enabled: ") + (p.ECCEnabled ? "yes" : "no"),
         "PCI bus id: " + std::to_string(p.pciBusID) + ", device id: " + std::to_string(p.pciDeviceID)});
  }
  return out;
}

Status CheckDeviceId(int device_id) {
  std::string why;
  const int count = CountDevices(&why);
  if (count == 0) return FailedPreconditionError("no CUDA device (" + why + ")");
  if (device_id < 0 || device_id >= count) {
    return InvalidArgumentError("CUDA device " + std::to_string(device_id) + " does not exist: this machine has " +
                                std::to_string(count) + " (0.." + std::to_string(count - 1) + ")");
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Device>> Device::Create(const DeviceOptions& options) {
  RETURN_IF_ERROR(CheckDeviceId(options.device_id));
  std::unique_ptr<Device> d(new Device(options));
  const std::string where = "CUDA device " + std::to_string(options.device_id);
  auto fail = [&](const Status& s) { return s.Annotate("setting up " + where); };
  Status s = CudaStatus(cudaSetDevice(options.device_id), "cudaSetDevice");
  if (!s.ok()) return fail(s);
  cudaDeviceProp prop;
  s = CudaStatus(cudaGetDeviceProperties(&prop, options.device_id), "cudaGetDeviceProperties");
  if (!s.ok()) return fail(s);
  d->description_ = std::string(prop.name) + " (device " + std::to_string(options.device_id) + ", compute capability " +
                    std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " +
                    FormatBytes(prop.totalGlobalMem) + ")";
  // The compute stream blocks with the legacy default stream, so a plain
  // cudaMemcpy elsewhere (a blob read without a current device) still comes
  // after the kernels queued on it; the copy stream does not, so that batch
  // copies overlap compute.
  s = CudaStatus(cudaStreamCreateWithFlags(&d->compute_stream_, cudaStreamDefault), "cudaStreamCreate (compute)");
  if (!s.ok()) return fail(s);
  s = CudaStatus(cudaStreamCreateWithFlags(&d->copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate (copy)");
  if (!s.ok()) return fail(s);
  StatusOr<std::unique_ptr<CublasLibrary>> cublas = CublasLibrary::Load();
  if (!cublas.ok()) return fail(cublas.status());
  d->cublas_library_.reset(cublas->release());
  const CublasApi& api = d->cublas_api();
  s = CublasStatus(api.cublasCreate_v2(&d->cublas_), "cublasCreate");
  if (!s.ok()) return fail(s);
  s = CublasStatus(api.cublasSetStream_v2(d->cublas_, d->compute_stream_), "cublasSetStream");
  if (!s.ok()) return fail(s);
  int cublas_version = 0;
  s = CublasStatus(api.cublasGetVersion_v2(d->cublas_, &cublas_version), "cublasGetVersion");
  if (!s.ok()) return fail(s);
  d->arithmetic_ = std::string(prop.name) + " (compute capability " + std::to_string(prop.major) + "." +
                   std::to_string(prop.minor) + ", cuBLAS " + std::to_string(cublas_version) + ")";
  // FP32 GEMMs in FP32: no TF32 tensor-core rounding (cuBLAS's default since
  // CUDA 11, said explicitly), unless TF32 was asked for.
  s = CublasStatus(api.cublasSetMathMode(d->cublas_, options.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
                   "cublasSetMathMode");
  if (!s.ok()) return fail(s);
  s = CurandStatus(curandCreateGenerator(&d->curand_, CURAND_RNG_PSEUDO_DEFAULT), "curandCreateGenerator");
  if (!s.ok()) return fail(s);
  s = CurandStatus(curandSetPseudoRandomGeneratorSeed(d->curand_, options.seed), "curandSetPseudoRandomGeneratorSeed");
  if (!s.ok()) return fail(s);
  s = CurandStatus(curandSetStream(d->curand_, d->compute_stream_), "curandSetStream");
  if (!s.ok()) return fail(s);
  d->memory_ = NewCudaMemory(options.device_id, d->compute_stream_, options.memory_limit_bytes);
  LOG(INFO) << "GPU: " << d->description_ << "; cuBLAS " << d->cublas_library_->version() << " from "
            << d->cublas_library_->path();
  return d;
}

Device::~Device() {
  cudnn_.reset();  // Before the streams it uses.
  if (stand_in_) {
    if (workspace_ != nullptr) memory_->Free(workspace_, workspace_bytes_);
    return;
  }
  if (compute_stream_ != nullptr) cudaStreamSynchronize(compute_stream_);
  if (workspace_ != nullptr) memory_->Free(workspace_, workspace_bytes_);
  if (memory_) memory_->DetachStream();
  if (curand_ != nullptr) curandDestroyGenerator(curand_);
  if (cublas_ != nullptr) cublas_api().cublasDestroy_v2(cublas_);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  if (compute_stream_ != nullptr) cudaStreamDestroy(compute_stream_);
}

Status Device::TakeError(bool check_stream) {
  if (check_stream && !stand_in_) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) RecordError(CudaStatus(e, "a kernel or CUDA call (cudaGetLastError)"));
  }
  MutexLock lock(&mu_);
  Status s = error_;
  error_ = Status::OK();
  failed_.store(false);
  return s;
}

Status Device::Synchronize() {
  if (stand_in_) return TakeError(false);
  Status s = CudaStatus(cudaStreamSynchronize(compute_stream_), "cudaStreamSynchronize");
  if (!s.ok()) RecordError(s);
  return TakeError();
}

const CublasApi& Device::cublas_api() const {
  CHECK(cublas_library_ != nullptr) << "cuBLAS is a real device's only (" << description_ << ")";
  return cublas_library_->api();
}

void Device::CublasLibraryDeleter::operator()(CublasLibrary* c) const { delete c; }

ScopedDevice::ScopedDevice(Device* device) : previous_(current_device), active_(device != nullptr) {
  if (!active_) return;
  current_device = device;
  if (!device->is_stand_in()) {
    cudaError_t e = cudaSetDevice(device->device_id());
    if (e != cudaSuccess) device->RecordError(CudaStatus(e, "cudaSetDevice"));
  }
}

ScopedDevice::~ScopedDevice() {
  if (!active_) return;
  current_device = previous_;
  if (previous_ != nullptr && !previous_->is_stand_in()) cudaSetDevice(previous_->device_id());
}

#else  // CPU-only build.

int DeviceCount() { return 0; }

StatusOr<std::vector<std::vector<std::string>>> DescribeDevices() { return CheckDeviceId(0); }

Status CheckDeviceId(int device_id) {
  return FailedPreconditionError(
      "Nereus was built without CUDA (no GPU code in this build; rebuild where nvcc, "
      "cuBLAS and cuRAND are found, docs/GPU.md)");
}

StatusOr<std::unique_ptr<Device>> Device::Create(const DeviceOptions& options) {
  return CheckDeviceId(options.device_id);
}

Device::~Device() {
  if (workspace_ != nullptr) memory_->Free(workspace_, workspace_bytes_);
}

void Device::CublasLibraryDeleter::operator()(CublasLibrary* c) const { (void)c; }  // Never made.

Status Device::TakeError(bool check_stream) {
  MutexLock lock(&mu_);
  Status s = error_;
  error_ = Status::OK();
  failed_.store(false);
  return s;
}

Status Device::Synchronize() { return TakeError(false); }

ScopedDevice::ScopedDevice(Device* device) : previous_(current_device), active_(device != nullptr) {
  if (active_) current_device = device;
}

ScopedDevice::~ScopedDevice() {
  if (active_) current_device = previous_;
}

#endif

#ifndef NEREUS_HAVE_CUDNN
// Without cuDNN (cudnn_library.cc has these in a cuDNN build).
void Device::CudnnContextDeleter::operator()(CudnnContext* c) const { (void)c; }  // Never made.

CudnnContext* Device::cudnn() {
  if (cudnn_tried_) return nullptr;
  cudnn_tried_ = true;
  cudnn_availability_.description =
      stand_in_ ? "a host stand-in has no cuDNN"
                : "Nereus was built without cuDNN (no cudnn.h in the CUDA toolkit it was configured with)";
  if (!stand_in_) LOG(INFO) << description_ << ": " << ConvEngineLogLine(cudnn_availability_);
  return nullptr;
}
#endif

StatusOr<void*> Device::Workspace(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  if (bytes <= workspace_bytes_) return workspace_;
  if (workspace_ != nullptr) {
    // The kernels queued on the old one finish first.
#ifdef NEREUS_HAVE_CUDA
    if (!stand_in_) {
      RETURN_IF_ERROR(
          CudaStatus(cudaStreamSynchronize(compute_stream_), "cudaStreamSynchronize (growing the workspace)"));
    }
#endif
    memory_->Free(workspace_, workspace_bytes_);
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  ASSIGN_OR_RETURN(workspace_, memory_->Allocate(bytes));
  workspace_bytes_ = bytes;
  return workspace_;
}

const CudnnAvailability& Device::cudnn_availability() {
  cudnn();
  return cudnn_availability_;
}

std::unique_ptr<Device> Device::CreateStandIn(const DeviceOptions& options) {
  std::unique_ptr<Device> d(new Device(options));
  d->stand_in_ = true;
  d->description_ = "host stand-in for device " + std::to_string(options.device_id);
  d->memory_ = NewHostStandInMemory(options.memory_limit_bytes);
  return d;
}

void Device::RecordError(const Status& error) {
  if (error.ok()) return;
  MutexLock lock(&mu_);
  if (error_.ok()) error_ = error;
  failed_.store(true);
}

bool Device::ok() const { return !failed_.load(std::memory_order_relaxed); }

Device* CurrentDevice() { return current_device; }

}  // namespace gpu
}  // namespace nereus

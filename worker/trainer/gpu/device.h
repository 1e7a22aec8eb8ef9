// Device: the GPU a net computes on, and everything the net's GPU code needs
// from it: the device id, the compute stream (every kernel, cuBLAS call and
// SyncedMemory copy of the net runs on it, in order), a copy stream for
// transfers that overlap compute (the Data layer's batches), the cuBLAS
// handle bound to the compute stream, the cuRAND generator (Dropout), the
// device memory (DeviceMemory: SyncedMemory's allocations and copies, with
// an optional limit), page-locked host buffers, and the first error any of
// them met.
//
// There is no global mode (Caffe's Caffe::mode() is what this replaces):
// whoever builds a Net hands it a Device (NetOptions::device), the Solver
// owns the one its nets share, and the Net hands it to every layer
// (Layer::set_device) as it hands them the random engine. A layer with a
// device runs Forward_gpu/Backward_gpu; without one, the CPU code.
//
// Errors: GPU code cannot return a Status from inside Forward (Caffe's
// signature), so a failed allocation, launch or library call is recorded
// with RecordError (the first one wins; later GPU work of the pass is
// skipped: gpu::Launch and the caffe_gpu_* functions do nothing while an
// error is pending) and the Net collects it with TakeError after each layer,
// adding the net's and the layer's names. Kernels run asynchronously, so a
// fault inside one (an illegal address) may surface at a later layer's
// check; CUDA_LAUNCH_BLOCKING=1 makes every launch synchronous and the
// report exact.
//
// The current device: SyncedMemory has no device of its own (Caffe's
// interface: gpu_data() takes no argument), so a Device is made current on
// the calling thread (ScopedDevice, which also calls cudaSetDevice) while a
// Net builds, runs its passes or the Solver updates; SyncedMemory allocates
// and copies through the current device's memory, and reports to it. Like
// CUDA's own current device, this is per thread.
//
// A CPU-only build has the class but Create fails; CreateStandIn (host
// memory standing in for the device's, no streams) works in every build,
// for tests of the memory bookkeeping.
//
// Thread-compatible: one thread drives a Device (the net's); RecordError
// and TakeError are thread-safe.
#ifndef NEREUS_WORKER_TRAINER_GPU_DEVICE_H_
#define NEREUS_WORKER_TRAINER_GPU_DEVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "worker/trainer/gpu/cudnn.h"
#include "worker/trainer/gpu/device_memory.h"

// The CUDA libraries' handle types, declared as they do (cudaStream_t is
// CUstream_st*, cublasHandle_t is cublasContext*, curandGenerator_t is
// curandGenerator_st*), so that this header needs no CUDA include.
struct CUstream_st;
struct cublasContext;
struct curandGenerator_st;

namespace nereus {
namespace gpu {

class CudnnContext;
class CublasLibrary;
struct CublasApi;

struct DeviceOptions {
  int device_id = 0;
  // Seed of the cuRAND generator (the Solver passes its random_seed).
  uint64_t seed = 1701;
  // Device memory this device may use, 0 for all there is. Allocations past
  // it fail as if the device were full (tests; sharing a GPU).
  size_t memory_limit_bytes = 0;
  // FP32 GEMMs and convolutions may round through TF32 tensor cores
  // (--tf32; PyTorch's allow_tf32). Off: plain FP32 arithmetic.
  bool tf32 = false;
  // Whether convolutions may use cuDNN where the machine has it (--cudnn);
  // false runs every convolution on the im2col engine.
  bool cudnn = true;
  // The workspace a convolution algorithm may use, bytes
  // (--conv_workspace_mb): one workspace per device, so per net.
  size_t conv_workspace_bytes = size_t{1} << 30;
};

// CUDA devices this process can use: 0 in a CPU-only build, without a driver
// or without a device.
int DeviceCount();
// OK when `device_id` names a usable device; otherwise an error that says
// why not: "Nereus was built without CUDA", "no CUDA device (<the
// runtime's words>)", or "device N does not exist: this machine has M".
Status CheckDeviceId(int device_id);
// True when this is a CUDA build.
bool BuiltWithCuda();
// Caffe's device_query: per CUDA device, its properties as lines of
// "name: value" (device id, name, compute capability, memory, multiprocessors,
// clock rates, ...). An error says why there are none (DeviceCount's words).
StatusOr<std::vector<std::vector<std::string>>> DescribeDevices();

class Device {
 public:
  // Creates the streams, handles and generator on `options.device_id`.
  // Errors: CheckDeviceId's, or the CUDA call that failed.
  static StatusOr<std::unique_ptr<Device>> Create(const DeviceOptions& options);
  // A device whose memory is host memory (NewHostStandInMemory): memory
  // bookkeeping only, no streams, no kernels.
  static std::unique_ptr<Device> CreateStandIn(const DeviceOptions& options = DeviceOptions());
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int device_id() const { return options_.device_id; }
  const DeviceOptions& options() const { return options_; }
  bool is_stand_in() const { return stand_in_; }
  // "NVIDIA H200 (device 0, compute capability 9.0, 139.8 GiB)".
  const std::string& description() const { return description_; }
  // What decides the device's arithmetic, without which device of a host it
  // is: "NVIDIA H200 (compute capability 9.0, cuBLAS 130100)" (two devices of
  // one model compute alike; "host stand-in" for a stand-in).
  const std::string& arithmetic() const { return arithmetic_; }

  CUstream_st* compute_stream() const { return compute_stream_; }
  CUstream_st* copy_stream() const { return copy_stream_; }
  cublasContext* cublas() const { return cublas_; }
  // The cuBLAS functions (loaded at set-up, cublas_library.h); a real device's only.
  const CublasApi& cublas_api() const;
  curandGenerator_st* curand() const { return curand_; }
  const std::shared_ptr<DeviceMemory>& memory() const { return memory_; }

  // cuDNN for this device's convolutions: loaded on the first call, which
  // logs the net's one line (gpu/cudnn.h: ConvEngineLogLine); null where it
  // cannot be had, cudnn_availability() saying why. Not thread-safe (the
  // net's thread).
  CudnnContext* cudnn();
  const CudnnAvailability& cudnn_availability();

  // The device's one workspace (so its net's): at least `bytes` long, shared
  // by whatever needs scratch for the length of one call (the im2col
  // engine's columns, a cuDNN algorithm's workspace), every user being on
  // the compute stream one after the other. Grown when asked for more (the
  // old one freed once the compute stream is done with it: a wait, in a
  // net's first iteration), never shrunk. Null for 0 bytes.
  StatusOr<void*> Workspace(size_t bytes);
  size_t workspace_bytes() const { return workspace_bytes_; }

  // Records `error` unless one is pending (the first error is the cause).
  void RecordError(const Status& error) NEREUS_LOCKS_EXCLUDED(mu_);
  // Whether no error is pending.
  bool ok() const;
  // The pending error (OK if none), cleared; with `check_stream`, first
  // collects an error the CUDA runtime holds for this thread
  // (cudaGetLastError).
  Status TakeError(bool check_stream = true) NEREUS_LOCKS_EXCLUDED(mu_);
  // Waits for the compute stream; its error, if any, is returned (and
  // recorded).
  Status Synchronize() NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  explicit Device(const DeviceOptions& options) : options_(options) {}

  DeviceOptions options_;
  bool stand_in_ = false;
  std::string description_;
  std::string arithmetic_ = "host stand-in";
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool cudnn_tried_ = false;
  CudnnAvailability cudnn_availability_;
  struct CudnnContextDeleter {
    void operator()(CudnnContext* c) const;  // Complete only where cuDNN is built in (device.cc).
  };
  std::unique_ptr<CudnnContext, CudnnContextDeleter> cudnn_;
  struct CublasLibraryDeleter {
    void operator()(CublasLibrary* c) const;  // Complete only in a CUDA build (device.cc).
  };
  std::unique_ptr<CublasLibrary, CublasLibraryDeleter> cublas_library_;
  CUstream_st* compute_stream_ = nullptr;
  CUstream_st* copy_stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
  curandGenerator_st* curand_ = nullptr;
  std::shared_ptr<DeviceMemory> memory_;
  std::atomic<bool> failed_{false};  // Whether error_ holds an error (read without the lock).
  Mutex mu_;
  Status error_ NEREUS_GUARDED_BY(mu_);
};

// The device made current on this thread (ScopedDevice), or nullptr.
Device* CurrentDevice();

// Makes `device` current on this thread for its lifetime (and calls
// cudaSetDevice for a CUDA device), restoring the previous one after.
// `device` may be null (then nothing changes).
class ScopedDevice {
 public:
  explicit ScopedDevice(Device* device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  Device* previous_;
  bool active_;
};

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_DEVICE_H_

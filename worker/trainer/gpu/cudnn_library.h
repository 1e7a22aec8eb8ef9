// CudnnLibrary: cuDNN 9, loaded at run time with dlopen (a CUDA build that
// found cudnn.h compiles this; nothing links libcudnn). Every function
// Nereus calls is resolved once, by name, so that any cuDNN 9 the machine
// has will do: the toolkit's own, or PyTorch's copy on a GPU machine (found
// through LD_LIBRARY_PATH as the loader finds any library; scripts/
// gpu_check.sh sets it). Only calls that cuDNN 9.0 already had are used
// (cudnn.h: CheckCudnnVersion).
//
// CudnnContext: one device's use of it (gpu::Device owns one, made on first
// use): the handle bound to the device's compute stream, and the algorithms
// chosen per ConvAlgoKey by timing them once (cudnnFind*AlgorithmEx,
// PyTorch's benchmark mode) within the budget of the device's one workspace
// (Device::Workspace, which the im2col engine's columns share).
#ifndef NEREUS_WORKER_TRAINER_GPU_CUDNN_LIBRARY_H_
#define NEREUS_WORKER_TRAINER_GPU_CUDNN_LIBRARY_H_

#include <cudnn.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "common/base/status.h"
#include "worker/trainer/gpu/cudnn.h"

namespace nereus {
namespace gpu {

class Device;

// The functions Nereus calls, as resolved in the loaded library.
struct CudnnApi {
#define NEREUS_CUDNN_FUNCTION(name) decltype(&::name) name = nullptr;
#include "worker/trainer/gpu/cudnn_functions.inc"
#undef NEREUS_CUDNN_FUNCTION
};

class CudnnLibrary {
 public:
  // Loads libcudnn.so.9 (the loader's search, then the CUDA toolkit's lib64
  // this build was configured with), resolves every function and checks the
  // version. Errors say what was not found or why the version will not do.
  static StatusOr<std::unique_ptr<CudnnLibrary>> Load();
  ~CudnnLibrary();
  CudnnLibrary(const CudnnLibrary&) = delete;
  CudnnLibrary& operator=(const CudnnLibrary&) = delete;

  const CudnnApi& api() const { return api_; }
  size_t version() const { return version_; }
  const std::string& path() const { return path_; }  // The file dlopen took.

 private:
  CudnnLibrary() = default;
  void* handle_ = nullptr;
  CudnnApi api_;
  size_t version_ = 0;
  std::string path_;
};

// OK for CUDNN_STATUS_SUCCESS; else "<call>: <cudnnGetErrorString>".
Status CudnnStatus(const CudnnApi& api, cudnnStatus_t status, const std::string& call);

class CudnnContext {
 public:
  // The handle on `device`'s compute stream. `workspace_limit`: bytes an
  // algorithm may use (0: none). `tf32`: whether convolutions may round
  // through TF32 tensor cores (otherwise plain FP32 FMA math).
  static StatusOr<std::unique_ptr<CudnnContext>> Create(std::unique_ptr<CudnnLibrary> library, Device* device,
                                                        size_t workspace_limit, bool tf32);
  ~CudnnContext();
  CudnnContext(const CudnnContext&) = delete;
  CudnnContext& operator=(const CudnnContext&) = delete;

  const CudnnApi& api() const { return library_->api(); }
  const CudnnLibrary& library() const { return *library_; }
  cudnnHandle_t handle() const { return handle_; }
  Device* device() const { return device_; }
  size_t workspace_limit() const { return workspace_limit_; }
  bool tf32() const { return tf32_; }
  Status Check(cudnnStatus_t status, const std::string& call) const { return CudnnStatus(api(), status, call); }

  // The device's workspace, at least `bytes` long (Device::Workspace).
  StatusOr<void*> Workspace(size_t bytes);

  // The algorithm chosen for `key`, and the workspace it needs, if timed.
  using Choice = ConvAlgoChoice;
  const Choice* Find(const ConvAlgoKey& key) const;
  void Remember(const ConvAlgoKey& key, const Choice& choice) { chosen_[key] = choice; }
  size_t cached() const { return chosen_.size(); }

 private:
  CudnnContext() = default;
  std::unique_ptr<CudnnLibrary> library_;
  Device* device_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  size_t workspace_limit_ = 0;
  bool tf32_ = false;
  std::map<ConvAlgoKey, Choice> chosen_;
};

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_CUDNN_LIBRARY_H_

#include "worker/trainer/gpu/cudnn_library.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <glog/logging.h>

#include "worker/trainer/gpu/cuda_check.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/gpu/dynamic_library.h"

namespace nereus {
namespace gpu {

StatusOr<std::unique_ptr<CudnnLibrary>> CudnnLibrary::Load() {
  const std::string name = "libcudnn.so." + std::to_string(kCudnnMajor);
  std::unique_ptr<CudnnLibrary> lib(new CudnnLibrary());
  ASSIGN_OR_RETURN(lib->handle_, OpenCudaLibrary(name, &lib->path_));
#define NEREUS_CUDNN_FUNCTION(fn)                                                                                      \
  lib->api_.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib->handle_, #fn));                                          \
  if (lib->api_.fn == nullptr) {                                                                                       \
    return FailedPreconditionError(lib->path_ + " has no " #fn ": not a usable cuDNN " + std::to_string(kCudnnMajor)); \
  }
#include "worker/trainer/gpu/cudnn_functions.inc"
#undef NEREUS_CUDNN_FUNCTION
  lib->version_ = lib->api_.cudnnGetVersion();
  RETURN_IF_ERROR(CheckCudnnVersion(lib->version_).Annotate(lib->path_));
  return lib;
}

CudnnLibrary::~CudnnLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

Status CudnnStatus(const CudnnApi& api, cudnnStatus_t status, const std::string& call) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::OK();
  const char* what = api.cudnnGetErrorString != nullptr ? api.cudnnGetErrorString(status) : "?";
  const std::string message = call + ": " + what;
  return status == CUDNN_STATUS_ALLOC_FAILED ? ResourceExhaustedError(message) : InternalError(message);
}

StatusOr<std::unique_ptr<CudnnContext>> CudnnContext::Create(std::unique_ptr<CudnnLibrary> library, Device* device,
                                                             size_t workspace_limit, bool tf32) {
  std::unique_ptr<CudnnContext> c(new CudnnContext());
  c->library_ = std::move(library);
  c->device_ = device;
  c->workspace_limit_ = workspace_limit;
  c->tf32_ = tf32;
  RETURN_IF_ERROR(c->Check(c->api().cudnnCreate(&c->handle_), "cudnnCreate"));
  RETURN_IF_ERROR(c->Check(c->api().cudnnSetStream(c->handle_, device->compute_stream()), "cudnnSetStream"));
  return c;
}

CudnnContext::~CudnnContext() {
  if (handle_ != nullptr) api().cudnnDestroy(handle_);
}

StatusOr<void*> CudnnContext::Workspace(size_t bytes) { return device_->Workspace(bytes); }

void Device::CudnnContextDeleter::operator()(CudnnContext* c) const { delete c; }

CudnnContext* Device::cudnn() {
  if (cudnn_tried_) return cudnn_.get();
  cudnn_tried_ = true;
  CudnnAvailability& a = cudnn_availability_;
  if (stand_in_) {
    a.description = "a host stand-in has no cuDNN";
    return nullptr;
  }
  if (!options_.cudnn) {
    a.description = "turned off (--cudnn=false)";
  } else if (auto library = CudnnLibrary::Load(); !library.ok()) {
    a.description = library.status().message();
  } else {
    const std::string found = "cuDNN " + FormatCudnnVersion((*library)->version()) + " (" + (*library)->path() + ")";
    auto context = CudnnContext::Create(std::move(library).value(), this, options_.conv_workspace_bytes, options_.tf32);
    if (!context.ok()) {
      a.description = found + " failed to start: " + context.status().message();
    } else {
      cudnn_.reset(context->release());
      a.usable = true;
      a.description = found + ", workspace up to " + FormatBytes(options_.conv_workspace_bytes) +
                      (options_.tf32 ? ", TF32 allowed" : ", FP32 math");
    }
  }
  LOG(INFO) << description_ << ": " << ConvEngineLogLine(a);
  return cudnn_.get();
}

const CudnnContext::Choice* CudnnContext::Find(const ConvAlgoKey& key) const {
  auto it = chosen_.find(key);
  return it == chosen_.end() ? nullptr : &it->second;
}

}  // namespace gpu
}  // namespace nereus

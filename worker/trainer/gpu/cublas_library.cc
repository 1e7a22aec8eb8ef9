#include "worker/trainer/gpu/cublas_library.h"

#include <dlfcn.h>

#include "worker/trainer/gpu/dynamic_library.h"

namespace nereus {
namespace gpu {

std::string CublasLibrary::DefaultName() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

StatusOr<std::unique_ptr<CublasLibrary>> CublasLibrary::Load(const std::string& name) {
  std::unique_ptr<CublasLibrary> lib(new CublasLibrary());
  ASSIGN_OR_RETURN(lib->handle_, OpenCudaLibrary(name, &lib->path_));
#define NEREUS_CUBLAS_FUNCTION(fn)                                                       \
  lib->api_.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib->handle_, #fn));            \
  if (lib->api_.fn == nullptr) {                                                         \
    return FailedPreconditionError(lib->path_ + " has no " #fn ": not a usable cuBLAS"); \
  }
#include "worker/trainer/gpu/cublas_functions.inc"
#undef NEREUS_CUBLAS_FUNCTION
  int major = -1, minor = -1, patch = -1;
  lib->api_.cublasGetProperty(MAJOR_VERSION, &major);
  lib->api_.cublasGetProperty(MINOR_VERSION, &minor);
  lib->api_.cublasGetProperty(PATCH_LEVEL, &patch);
  lib->version_ = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  if (major != CUBLAS_VER_MAJOR) {
    return FailedPreconditionError(lib->path_ + " is cuBLAS " + lib->version_ + "; this build needs cuBLAS " +
                                   std::to_string(CUBLAS_VER_MAJOR) + " (its headers)");
  }
  return lib;
}

CublasLibrary::~CublasLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

}  // namespace gpu
}  // namespace nereus

// CublasLibrary: cuBLAS, loaded at run time with dlopen when a GPU device is
// set up (gpu::Device::Create), never linked. Linking it cost every process
// that links the trainer about 0.45 s of CPU at start-up, GPU or not
// (libcublasLt's 540 MB of relocations): nereus_worker --help, a CPU-only
// worker, each of the tests' many worker processes. Every function Nereus
// calls is resolved once, by name, from the library of the major version
// this build was compiled against (cublas_api.h), found as the loader finds
// any library (LD_LIBRARY_PATH: scripts/gpu_check.sh sets it on a GPU
// machine), then in the CUDA toolkit this build was configured with.
#ifndef NEREUS_WORKER_TRAINER_GPU_CUBLAS_LIBRARY_H_
#define NEREUS_WORKER_TRAINER_GPU_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include <memory>
#include <string>

#include "common/base/status.h"

namespace nereus {
namespace gpu {

// The functions Nereus calls, as resolved in the loaded library.
struct CublasApi {
#define NEREUS_CUBLAS_FUNCTION(name) decltype(&::name) name = nullptr;
#include "worker/trainer/gpu/cublas_functions.inc"
#undef NEREUS_CUBLAS_FUNCTION
};

class CublasLibrary {
 public:
  // "libcublas.so.<the major version of cublas_api.h>".
  static std::string DefaultName();
  // Loads `name` (the loader's search, then the configured toolkit's lib64),
  // resolves every function and checks that its major version is the one
  // this build was compiled against. Needs no GPU. Errors name the library
  // and what was not found or why its version will not do.
  static StatusOr<std::unique_ptr<CublasLibrary>> Load(const std::string& name = DefaultName());
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  const CublasApi& api() const { return api_; }
  // "MAJOR.MINOR.PATCH", from cublasGetProperty.
  const std::string& version() const { return version_; }
  const std::string& path() const { return path_; }  // The file dlopen took.

 private:
  CublasLibrary() = default;
  void* handle_ = nullptr;
  CublasApi api_;
  std::string version_;
  std::string path_;
};

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_CUBLAS_LIBRARY_H_

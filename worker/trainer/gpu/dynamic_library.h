// OpenCudaLibrary: dlopen of a CUDA library that Nereus loads at run time
// rather than links (cuBLAS: cublas_library.h; cuDNN: cudnn_library.h).
#ifndef NEREUS_WORKER_TRAINER_GPU_DYNAMIC_LIBRARY_H_
#define NEREUS_WORKER_TRAINER_GPU_DYNAMIC_LIBRARY_H_

#include <string>

#include "common/base/status.h"

namespace nereus {
namespace gpu {

// Opens `name` (e.g. "libcublas.so.13") as the loader finds any library
// (LD_LIBRARY_PATH, the cache), else in the CUDA toolkit this build was
// configured with. Returns the handle (dlclose it) and sets `*path` to the
// file opened; NotFound naming `name` and each place's error otherwise.
StatusOr<void*> OpenCudaLibrary(const std::string& name, std::string* path);

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_DYNAMIC_LIBRARY_H_

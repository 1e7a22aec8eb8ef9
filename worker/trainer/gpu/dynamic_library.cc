#include "worker/trainer/gpu/dynamic_library.h"

#include <dlfcn.h>

#include <vector>

namespace nereus {
namespace gpu {

StatusOr<void*> OpenCudaLibrary(const std::string& name, std::string* path) {
  std::vector<std::string> candidates = {name};
#ifdef NEREUS_CUDA_LIBRARY_DIR
  candidates.push_back(std::string(NEREUS_CUDA_LIBRARY_DIR) + "/" + name);
#endif
  std::string errors;
  for (const std::string& c : candidates) {
    void* handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      errors += (errors.empty() ? "" : "; ") + std::string(e != nullptr ? e : c + ": not found");
      continue;
    }
    *path = c;
    // Where the loader found it, for the log.
    char where[4096] = {0};
    if (dlinfo(handle, RTLD_DI_ORIGIN, where) == 0 && where[0] != '\0') *path = std::string(where) + "/" + name;
    return handle;
  }
  return NotFoundError(name + " not found (" + errors + ")");
}

}  // namespace gpu
}  // namespace nereus

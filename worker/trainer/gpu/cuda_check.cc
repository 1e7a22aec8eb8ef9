#include "worker/trainer/gpu/cuda_check.h"

namespace nereus {
namespace gpu {

namespace {

// A CUDA library's status as a Status: OK on success; running out of memory
// is ResourceExhausted, anything else Internal, "<call>: <what>".
template <typename Code>
Status LibraryStatus(Code status, Code success, Code out_of_memory, const std::string& what, const std::string& call) {
  if (status == success) return Status::OK();
  const std::string message = call + ": " + what;
  if (status == out_of_memory) return ResourceExhaustedError(message);
  return InternalError(message);
}

}  // namespace

Status CudaStatus(cudaError_t error, const std::string& call) {
  if (error == cudaSuccess) return Status::OK();
  return LibraryStatus(error, cudaSuccess, cudaErrorMemoryAllocation,
                       std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error), call);
}

// Named here, not by cublasGetStatusName: the library is loaded only with a
// device (cublas_library.h), and a status may need a name without one.
const char* CublasStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

Status CublasStatus(cublasStatus_t status, const std::string& call) {
  return LibraryStatus(status, CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_ALLOC_FAILED, CublasStatusName(status), call);
}

const char* CurandStatusName(curandStatus_t status) {
  switch (status) {
    case CURAND_STATUS_SUCCESS:
      return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_VERSION_MISMATCH:
      return "CURAND_STATUS_VERSION_MISMATCH";
    case CURAND_STATUS_NOT_INITIALIZED:
      return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED:
      return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_TYPE_ERROR:
      return "CURAND_STATUS_TYPE_ERROR";
    case CURAND_STATUS_OUT_OF_RANGE:
      return "CURAND_STATUS_OUT_OF_RANGE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE:
      return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED:
      return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED";
    case CURAND_STATUS_LAUNCH_FAILURE:
      return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_PREEXISTING_FAILURE:
      return "CURAND_STATUS_PREEXISTING_FAILURE";
    case CURAND_STATUS_INITIALIZATION_FAILED:
      return "CURAND_STATUS_INITIALIZATION_FAILED";
    case CURAND_STATUS_ARCH_MISMATCH:
      return "CURAND_STATUS_ARCH_MISMATCH";
    case CURAND_STATUS_INTERNAL_ERROR:
      return "CURAND_STATUS_INTERNAL_ERROR";
  }
  return "unknown cuRAND status";
}

Status CurandStatus(curandStatus_t status, const std::string& call) {
  return LibraryStatus(status, CURAND_STATUS_SUCCESS, CURAND_STATUS_ALLOCATION_FAILED, CurandStatusName(status), call);
}

}  // namespace gpu
}  // namespace nereus

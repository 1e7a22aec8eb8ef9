// CUDA, cuBLAS and cuRAND results as Status: the error names the call that
// failed and the library's own words for the error. Included only by CUDA
// code (.cu files and the .cc files of worker/trainer/gpu/ that the CUDA
// build compiles); the rest of the trainer sees Status.
#ifndef NEREUS_WORKER_TRAINER_GPU_CUDA_CHECK_H_
#define NEREUS_WORKER_TRAINER_GPU_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>

#include <string>

#include "common/base/status.h"

namespace nereus {
namespace gpu {

// OK for cudaSuccess; else "<call>: <cudaGetErrorName>: <cudaGetErrorString>",
// ResourceExhausted for cudaErrorMemoryAllocation, Internal otherwise.
Status CudaStatus(cudaError_t error, const std::string& call);
Status CublasStatus(cublasStatus_t status, const std::string& call);
Status CurandStatus(curandStatus_t status, const std::string& call);

const char* CublasStatusName(cublasStatus_t status);
const char* CurandStatusName(curandStatus_t status);

}  // namespace gpu
}  // namespace nereus

// Returns the error of a CUDA runtime call from the enclosing function.
#define NEREUS_CUDA_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::nereus::gpu::CudaStatus((call), #call))
#define NEREUS_CUBLAS_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::nereus::gpu::CublasStatus((call), #call))
#define NEREUS_CURAND_RETURN_IF_ERROR(call) RETURN_IF_ERROR(::nereus::gpu::CurandStatus((call), #call))

#endif  // NEREUS_WORKER_TRAINER_GPU_CUDA_CHECK_H_

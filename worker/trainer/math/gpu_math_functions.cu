#include "worker/trainer/gpu/cublas_library.h"
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/math/gpu_math_functions.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace {

cublasOperation_t CublasOp(CBLAS_TRANSPOSE t) { return t == CblasNoTrans ? CUBLAS_OP_N : CUBLAS_OP_T; }

// Runs a cuBLAS call unless an error is pending, recording its failure.
template <typename Call>
void Cublas(gpu::Device* device, const char* name, Call call) {
  if (!device->ok()) return;
  const cublasStatus_t s = call(device->cublas_api(), device->cublas());
  if (s != CUBLAS_STATUS_SUCCESS) device->RecordError(gpu::CublasStatus(s, name));
}

template <typename Op>
__global__ void BinaryKernel(int n, const float* a, const float* b, float* y, Op op) {
  NEREUS_KERNEL_LOOP(i, n) y[i] = op(a[i], b[i]);
}

__global__ void SetKernel(int n, float alpha, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] = alpha; }

__global__ void AddScalarKernel(int n, float alpha, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] += alpha; }

__global__ void AbsKernel(int n, const float* a, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] = ops::Abs(a[i]); }
__global__ void ExpKernel(int n, const float* a, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] = ops::Exp(a[i]); }
__global__ void LogKernel(int n, const float* a, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] = ops::Log(a[i]); }
__global__ void PowxKernel(int n, const float* a, float b, float* y) {
  NEREUS_KERNEL_LOOP(i, n) y[i] = ops::Pow(a[i], b);
}
__global__ void SqrKernel(int n, const float* a, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] = ops::Sqr(a[i]); }
__global__ void SignKernel(int n, const float* a, float* y) { NEREUS_KERNEL_LOOP(i, n) y[i] = ops::Sign(a[i]); }
// cuRAND's uniform floats lie in (0, 1]; Caffe maps them to (a, b].
__global__ void ScaleUniformKernel(int n, float a, float range, float* r) {
  NEREUS_KERNEL_LOOP(i, n) r[i] = r[i] * range + a;
}

}  // namespace

void caffe_gpu_gemm(gpu::Device* device, CBLAS_TRANSPOSE TransA, CBLAS_TRANSPOSE TransB, int M, int N, int K,
                    float alpha, const float* A, const float* B, float beta, float* C) {
  // Row-major C (M x N) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  const int lda = (TransA == CblasNoTrans) ? K : M;
  const int ldb = (TransB == CblasNoTrans) ? N : K;
  Cublas(device, "cublasSgemm", [&](const gpu::CublasApi& api, cublasHandle_t h) {
    return api.cublasSgemm_v2(h, CublasOp(TransB), CublasOp(TransA), N, M, K, &alpha, B, ldb, A, lda, &beta, C, N);
  });
}

void caffe_gpu_gemm_strided_batched(gpu::Device* device, CBLAS_TRANSPOSE TransA, CBLAS_TRANSPOSE TransB, int M, int N,
                                    int K, float alpha, const float* A, long long stride_a, const float* B,
                                    long long stride_b, float beta, float* C, long long stride_c, int batch) {
  if (batch <= 0) return;
  const int lda = (TransA == CblasNoTrans) ? K : M;
  const int ldb = (TransB == CblasNoTrans) ? N : K;
  Cublas(device, "cublasSgemmStridedBatched", [&](const gpu::CublasApi& api, cublasHandle_t h) {
    return api.cublasSgemmStridedBatched(h, CublasOp(TransB), CublasOp(TransA), N, M, K, &alpha, B, ldb, stride_b, A,
                                         lda, stride_a, &beta, C, N, stride_c, batch);
  });
}

void caffe_gpu_gemv(gpu::Device* device, CBLAS_TRANSPOSE TransA, int M, int N, float alpha, const float* A,
                    const float* x, float beta, float* y) {
  // Row-major A (M x N) is column-major A^T (N x M): the opposite operation.
  const cublasOperation_t op = (TransA == CblasNoTrans) ? CUBLAS_OP_T : CUBLAS_OP_N;
  Cublas(device, "cublasSgemv", [&](const gpu::CublasApi& api, cublasHandle_t h) {
    return api.cublasSgemv_v2(h, op, N, M, &alpha, A, N, x, 1, &beta, y, 1);
  });
}

void caffe_gpu_axpy(gpu::Device* device, int N, float alpha, const float* X, float* Y) {
  if (N <= 0) return;
  Cublas(device, "cublasSaxpy",
         [&](const gpu::CublasApi& api, cublasHandle_t h) { return api.cublasSaxpy_v2(h, N, &alpha, X, 1, Y, 1); });
}

void caffe_gpu_scal(gpu::Device* device, int N, float alpha, float* X) {
  if (N <= 0) return;
  Cublas(device, "cublasSscal",
         [&](const gpu::CublasApi& api, cublasHandle_t h) { return api.cublasSscal_v2(h, N, &alpha, X, 1); });
}

void caffe_gpu_axpby(gpu::Device* device, int N, float alpha, const float* X, float beta, float* Y) {
  caffe_gpu_scal(device, N, beta, Y);
  caffe_gpu_axpy(device, N, alpha, X, Y);
}

void caffe_gpu_copy(gpu::Device* device, int N, const float* X, float* Y) {
  if (X == Y || N <= 0 || !device->ok()) return;
  const cudaError_t e =
      cudaMemcpyAsync(Y, X, sizeof(float) * static_cast<size_t>(N), cudaMemcpyDeviceToDevice, device->compute_stream());
  if (e != cudaSuccess) device->RecordError(gpu::CudaStatus(e, "cudaMemcpyAsync (device to device)"));
}

void caffe_gpu_scale(gpu::Device* device, int N, float alpha, const float* x, float* y) {
  caffe_gpu_copy(device, N, x, y);
  caffe_gpu_scal(device, N, alpha, y);
}

void caffe_gpu_set(gpu::Device* device, int N, float alpha, float* Y) {
  if (N <= 0 || !device->ok()) return;
  if (alpha == 0.0f) {
    const cudaError_t e = cudaMemsetAsync(Y, 0, sizeof(float) * static_cast<size_t>(N), device->compute_stream());
    if (e != cudaSuccess) device->RecordError(gpu::CudaStatus(e, "cudaMemsetAsync"));
    return;
  }
  gpu::Launch(device, "Set", N, SetKernel, alpha, Y);
}

void caffe_gpu_add_scalar(gpu::Device* device, int N, float alpha, float* Y) {
  gpu::Launch(device, "AddScalar", N, AddScalarKernel, alpha, Y);
}

void caffe_gpu_add(gpu::Device* device, int N, const float* a, const float* b, float* y) {
  gpu::Launch(device, "Add", N, BinaryKernel<ops::Add>, a, b, y, ops::Add());
}
void caffe_gpu_sub(gpu::Device* device, int N, const float* a, const float* b, float* y) {
  gpu::Launch(device, "Sub", N, BinaryKernel<ops::Sub>, a, b, y, ops::Sub());
}
void caffe_gpu_mul(gpu::Device* device, int N, const float* a, const float* b, float* y) {
  gpu::Launch(device, "Mul", N, BinaryKernel<ops::Mul>, a, b, y, ops::Mul());
}
void caffe_gpu_div(gpu::Device* device, int N, const float* a, const float* b, float* y) {
  gpu::Launch(device, "Div", N, BinaryKernel<ops::Div>, a, b, y, ops::Div());
}
void caffe_gpu_abs(gpu::Device* device, int N, const float* a, float* y) {
  gpu::Launch(device, "Abs", N, AbsKernel, a, y);
}
void caffe_gpu_exp(gpu::Device* device, int N, const float* a, float* y) {
  gpu::Launch(device, "Exp", N, ExpKernel, a, y);
}
void caffe_gpu_log(gpu::Device* device, int N, const float* a, float* y) {
  gpu::Launch(device, "Log", N, LogKernel, a, y);
}
void caffe_gpu_powx(gpu::Device* device, int N, const float* a, float b, float* y) {
  gpu::Launch(device, "Powx", N, PowxKernel, a, b, y);
}
void caffe_gpu_sqr(gpu::Device* device, int N, const float* a, float* y) {
  gpu::Launch(device, "Sqr", N, SqrKernel, a, y);
}
void caffe_gpu_sign(gpu::Device* device, int N, const float* x, float* y) {
  gpu::Launch(device, "Sign", N, SignKernel, x, y);
}

float caffe_gpu_dot(gpu::Device* device, int N, const float* x, const float* y) {
  float result = 0.0f;
  if (N <= 0) return result;
  Cublas(device, "cublasSdot",
         [&](const gpu::CublasApi& api, cublasHandle_t h) { return api.cublasSdot_v2(h, N, x, 1, y, 1, &result); });
  return result;
}

float caffe_gpu_asum(gpu::Device* device, int N, const float* x) {
  float result = 0.0f;
  if (N <= 0) return result;
  Cublas(device, "cublasSasum",
         [&](const gpu::CublasApi& api, cublasHandle_t h) { return api.cublasSasum_v2(h, N, x, 1, &result); });
  return result;
}

void caffe_gpu_rng_uniform(gpu::Device* device, int N, float a, float b, float* r) {
  if (N <= 0 || !device->ok()) return;
  const curandStatus_t s = curandGenerateUniform(device->curand(), r, N);
  if (s != CURAND_STATUS_SUCCESS) {
    device->RecordError(gpu::CurandStatus(s, "curandGenerateUniform"));
    return;
  }
  gpu::Launch(device, "ScaleUniform", N, ScaleUniformKernel, a, b - a, r);
}

void caffe_gpu_rng_uint(gpu::Device* device, int N, unsigned int* r) {
  if (N <= 0 || !device->ok()) return;
  const curandStatus_t s = curandGenerate(device->curand(), r, N);
  if (s != CURAND_STATUS_SUCCESS) device->RecordError(gpu::CurandStatus(s, "curandGenerate"));
}

void caffe_gpu_rng_gaussian(gpu::Device* device, int N, float mu, float sigma, float* r) {
  if (N <= 0 || !device->ok()) return;
  // cuRAND's normal generators want an even count: for an odd N the last
  // element comes from a pair drawn into scratch memory.
  const int even = N - (N % 2);
  curandStatus_t s = CURAND_STATUS_SUCCESS;
  if (even > 0) s = curandGenerateNormal(device->curand(), r, even, mu, sigma);
  if (s == CURAND_STATUS_SUCCESS && even < N) {
    float* two = nullptr;
    if (cudaMallocAsync(reinterpret_cast<void**>(&two), 2 * sizeof(float), device->compute_stream()) != cudaSuccess) {
      device->RecordError(gpu::CudaStatus(cudaGetLastError(), "cudaMallocAsync"));
      return;
    }
    s = curandGenerateNormal(device->curand(), two, 2, mu, sigma);
    cudaMemcpyAsync(r + even, two, sizeof(float), cudaMemcpyDeviceToDevice, device->compute_stream());
    cudaFreeAsync(two, device->compute_stream());
  }
  if (s != CURAND_STATUS_SUCCESS) device->RecordError(gpu::CurandStatus(s, "curandGenerateNormal"));
}

}  // namespace nereus

// The GPU counterparts of worker/trainer/math/math_functions.h (Caffe's
// caffe_gpu_* names and argument orders): cuBLAS for the BLAS ones, small
// kernels (gpu_math_functions.cu) for the element-wise ones, whose
// per-element operation is the CPU loop's (math_ops.h). Every pointer is
// device memory; every call is queued on `device`'s compute stream, except
// the ones returning a value to the host (dot, asum), which wait for it.
// While the device holds an error nothing is queued (and the value-returning
// ones return 0); a failed call records its error on the device (Device,
// "Errors").
//
// Only in a CUDA build (NEREUS_HAVE_CUDA). Matrices are row-major, as on the
// CPU: caffe_gpu_gemm computes C = alpha op(A) op(B) + beta C with cuBLAS's
// column-major sgemm on the transposed problem, as Caffe does. FP32
// throughout: the device's cuBLAS handle has TF32 off.
#ifndef NEREUS_WORKER_TRAINER_MATH_GPU_MATH_FUNCTIONS_H_
#define NEREUS_WORKER_TRAINER_MATH_GPU_MATH_FUNCTIONS_H_

#include <cblas.h>

#include "worker/trainer/gpu/device.h"

namespace nereus {

void caffe_gpu_gemm(gpu::Device* device, CBLAS_TRANSPOSE TransA, CBLAS_TRANSPOSE TransB, int M, int N, int K,
                    float alpha, const float* A, const float* B, float beta, float* C);
// `batch` products C_i = alpha op(A_i) op(B_i) + beta C_i, row-major, with
// A_i = A + i * stride_a (stride 0: one A for all), likewise B and C.
void caffe_gpu_gemm_strided_batched(gpu::Device* device, CBLAS_TRANSPOSE TransA, CBLAS_TRANSPOSE TransB, int M, int N,
                                    int K, float alpha, const float* A, long long stride_a, const float* B,
                                    long long stride_b, float beta, float* C, long long stride_c, int batch);
void caffe_gpu_gemv(gpu::Device* device, CBLAS_TRANSPOSE TransA, int M, int N, float alpha, const float* A,
                    const float* x, float beta, float* y);
void caffe_gpu_axpy(gpu::Device* device, int N, float alpha, const float* X, float* Y);
void caffe_gpu_axpby(gpu::Device* device, int N, float alpha, const float* X, float beta, float* Y);
void caffe_gpu_scal(gpu::Device* device, int N, float alpha, float* X);
// y = alpha * x.
void caffe_gpu_scale(gpu::Device* device, int N, float alpha, const float* x, float* y);
// Device-to-device copy (no-op when X == Y).
void caffe_gpu_copy(gpu::Device* device, int N, const float* X, float* Y);
void caffe_gpu_set(gpu::Device* device, int N, float alpha, float* Y);
void caffe_gpu_add_scalar(gpu::Device* device, int N, float alpha, float* Y);
void caffe_gpu_add(gpu::Device* device, int N, const float* a, const float* b, float* y);
void caffe_gpu_sub(gpu::Device* device, int N, const float* a, const float* b, float* y);
void caffe_gpu_mul(gpu::Device* device, int N, const float* a, const float* b, float* y);
void caffe_gpu_div(gpu::Device* device, int N, const float* a, const float* b, float* y);
void caffe_gpu_abs(gpu::Device* device, int N, const float* a, float* y);
void caffe_gpu_exp(gpu::Device* device, int N, const float* a, float* y);
void caffe_gpu_log(gpu::Device* device, int N, const float* a, float* y);
void caffe_gpu_powx(gpu::Device* device, int N, const float* a, float b, float* y);
void caffe_gpu_sqr(gpu::Device* device, int N, const float* a, float* y);
void caffe_gpu_sign(gpu::Device* device, int N, const float* x, float* y);
// Waits for the result.
float caffe_gpu_dot(gpu::Device* device, int N, const float* x, const float* y);
float caffe_gpu_asum(gpu::Device* device, int N, const float* x);

// Random numbers from the device's cuRAND generator: r[i] ~ U(a, b] (cuRAND's
// (0, 1] scaled, as Caffe), uniform 32-bit integers, N(mu, sigma).
void caffe_gpu_rng_uniform(gpu::Device* device, int N, float a, float b, float* r);
void caffe_gpu_rng_uint(gpu::Device* device, int N, unsigned int* r);
void caffe_gpu_rng_gaussian(gpu::Device* device, int N, float mu, float sigma, float* r);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_MATH_GPU_MATH_FUNCTIONS_H_

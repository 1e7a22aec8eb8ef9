// CPU math used by layers and the solver: thin wrappers over OpenBLAS (cblas)
// with Caffe's names and argument orders (caffe_cpu_gemm etc.), so code
// written against Caffe's math_functions.hpp reads the same. All matrices are
// row-major. Random fills take the engine explicitly (no global RNG).
#ifndef NEREUS_WORKER_TRAINER_MATH_MATH_FUNCTIONS_H_
#define NEREUS_WORKER_TRAINER_MATH_MATH_FUNCTIONS_H_

#include <cblas.h>

#include <random>

namespace nereus {

// C = alpha * op(A) * op(B) + beta * C; op(A) is M x K, op(B) is K x N.
void caffe_cpu_gemm(CBLAS_TRANSPOSE TransA, CBLAS_TRANSPOSE TransB, int M, int N, int K, float alpha, const float* A,
                    const float* B, float beta, float* C);
// y = alpha * op(A) * x + beta * y; A is M x N.
void caffe_cpu_gemv(CBLAS_TRANSPOSE TransA, int M, int N, float alpha, const float* A, const float* x, float beta,
                    float* y);
// Y = alpha * X + Y.
void caffe_axpy(int N, float alpha, const float* X, float* Y);
// Y = alpha * X + beta * Y.
void caffe_cpu_axpby(int N, float alpha, const float* X, float beta, float* Y);
// Y = X (no-op when X == Y).
void caffe_copy(int N, const float* X, float* Y);
// Y[i] = alpha.
void caffe_set(int N, float alpha, float* Y);
void caffe_set(int N, int alpha, int* Y);
// Y[i] += alpha.
void caffe_add_scalar(int N, float alpha, float* Y);
// X *= alpha.
void caffe_scal(int N, float alpha, float* X);
// y = alpha * x.
void caffe_cpu_scale(int N, float alpha, const float* x, float* y);
// Element-wise y = a op b.
void caffe_add(int N, const float* a, const float* b, float* y);
void caffe_sub(int N, const float* a, const float* b, float* y);
void caffe_mul(int N, const float* a, const float* b, float* y);
void caffe_div(int N, const float* a, const float* b, float* y);
// y = a^b, y = a^2, y = exp(a), y = log(a), y = |a|, y = sign(a) in {-1,0,1}.
void caffe_powx(int N, const float* a, float b, float* y);
void caffe_sqr(int N, const float* a, float* y);
void caffe_exp(int N, const float* a, float* y);
void caffe_log(int N, const float* a, float* y);
void caffe_abs(int N, const float* a, float* y);
void caffe_cpu_sign(int N, const float* x, float* y);
// Sum of x[i]*y[i]; strided variant uses x[i*incx], y[i*incy].
float caffe_cpu_dot(int N, const float* x, const float* y);
float caffe_cpu_strided_dot(int N, const float* x, int incx, const float* y, int incy);
// Sum of |x[i]|.
float caffe_cpu_asum(int N, const float* x);

// r[i] ~ U[a, b] (b included, as Caffe's boost-based version), N(mu, sigma),
// Bernoulli(p) in {0, 1}.
void caffe_rng_uniform(int N, float a, float b, float* r, std::mt19937* rng);
void caffe_rng_gaussian(int N, float mu, float sigma, float* r, std::mt19937* rng);
void caffe_rng_bernoulli(int N, float p, int* r, std::mt19937* rng);
void caffe_rng_bernoulli(int N, float p, unsigned int* r, std::mt19937* rng);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_MATH_MATH_FUNCTIONS_H_

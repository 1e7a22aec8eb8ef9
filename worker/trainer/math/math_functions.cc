#include "worker/trainer/math/math_functions.h"

#include <glog/logging.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "worker/trainer/math/math_ops.h"

namespace nereus {

void caffe_cpu_gemm(CBLAS_TRANSPOSE TransA, CBLAS_TRANSPOSE TransB, int M, int N, int K, float alpha, const float* A,
                    const float* B, float beta, float* C) {
  const int lda = (TransA == CblasNoTrans) ? K : M;
  const int ldb = (TransB == CblasNoTrans) ? N : K;
  cblas_sgemm(CblasRowMajor, TransA, TransB, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}

void caffe_cpu_gemv(CBLAS_TRANSPOSE TransA, int M, int N, float alpha, const float* A, const float* x, float beta,
                    float* y) {
  cblas_sgemv(CblasRowMajor, TransA, M, N, alpha, A, N, x, 1, beta, y, 1);
}

void caffe_axpy(int N, float alpha, const float* X, float* Y) { cblas_saxpy(N, alpha, X, 1, Y, 1); }

void caffe_cpu_axpby(int N, float alpha, const float* X, float beta, float* Y) {
  cblas_sscal(N, beta, Y, 1);
  cblas_saxpy(N, alpha, X, 1, Y, 1);
}

void caffe_copy(int N, const float* X, float* Y) {
  if (X != Y && N > 0) std::memcpy(Y, X, sizeof(float) * static_cast<size_t>(N));
}

void caffe_set(int N, float alpha, float* Y) {
  if (alpha == 0.0f) {
    if (N > 0) std::memset(Y, 0, sizeof(float) * static_cast<size_t>(N));
    return;
  }
  for (int i = 0; i < N; ++i) Y[i] = alpha;
}

void caffe_set(int N, int alpha, int* Y) {
  for (int i = 0; i < N; ++i) Y[i] = alpha;
}

void caffe_add_scalar(int N, float alpha, float* Y) {
  for (int i = 0; i < N; ++i) Y[i] += alpha;
}

void caffe_scal(int N, float alpha, float* X) { cblas_sscal(N, alpha, X, 1); }

void caffe_cpu_scale(int N, float alpha, const float* x, float* y) {
  cblas_scopy(N, x, 1, y, 1);
  cblas_sscal(N, alpha, y, 1);
}

void caffe_add(int N, const float* a, const float* b, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Add()(a[i], b[i]);
}
void caffe_sub(int N, const float* a, const float* b, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Sub()(a[i], b[i]);
}
void caffe_mul(int N, const float* a, const float* b, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Mul()(a[i], b[i]);
}
void caffe_div(int N, const float* a, const float* b, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Div()(a[i], b[i]);
}
void caffe_powx(int N, const float* a, float b, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Pow(a[i], b);
}
void caffe_sqr(int N, const float* a, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Sqr(a[i]);
}
void caffe_exp(int N, const float* a, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Exp(a[i]);
}
void caffe_log(int N, const float* a, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Log(a[i]);
}
void caffe_abs(int N, const float* a, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Abs(a[i]);
}
void caffe_cpu_sign(int N, const float* x, float* y) {
  for (int i = 0; i < N; ++i) y[i] = ops::Sign(x[i]);
}

float caffe_cpu_dot(int N, const float* x, const float* y) { return cblas_sdot(N, x, 1, y, 1); }

float caffe_cpu_strided_dot(int N, const float* x, int incx, const float* y, int incy) {
  return cblas_sdot(N, x, incx, y, incy);
}

float caffe_cpu_asum(int N, const float* x) { return cblas_sasum(N, x, 1); }

void caffe_rng_uniform(int N, float a, float b, float* r, std::mt19937* rng) {
  CHECK_GE(N, 0);
  CHECK(rng != nullptr);
  CHECK_LE(a, b);
  std::uniform_real_distribution<float> dist(a, std::nextafter(b, std::numeric_limits<float>::max()));
  for (int i = 0; i < N; ++i) r[i] = dist(*rng);
}

void caffe_rng_gaussian(int N, float mu, float sigma, float* r, std::mt19937* rng) {
  CHECK_GE(N, 0);
  CHECK(rng != nullptr);
  CHECK_GT(sigma, 0);
  std::normal_distribution<float> dist(mu, sigma);
  for (int i = 0; i < N; ++i) r[i] = dist(*rng);
}

void caffe_rng_bernoulli(int N, float p, int* r, std::mt19937* rng) {
  CHECK_GE(N, 0);
  CHECK(rng != nullptr);
  CHECK_GE(p, 0);
  CHECK_LE(p, 1);
  std::bernoulli_distribution dist(p);
  for (int i = 0; i < N; ++i) r[i] = dist(*rng) ? 1 : 0;
}

void caffe_rng_bernoulli(int N, float p, unsigned int* r, std::mt19937* rng) {
  CHECK_GE(N, 0);
  CHECK(rng != nullptr);
  CHECK_GE(p, 0);
  CHECK_LE(p, 1);
  std::bernoulli_distribution dist(p);
  for (int i = 0; i < N; ++i) r[i] = dist(*rng) ? 1u : 0u;
}

}  // namespace nereus

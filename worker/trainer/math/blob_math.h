// CpuMath and GpuMath: for a pass written once for the CPU and the GPU, as a
// template on the math. Each names a Blob's memory on its side (data, diff,
// mutable_data, mutable_diff: cpu_* or gpu_*) and has the same math
// functions (math_functions.h's caffe_*, gpu_math_functions.h's
// caffe_gpu_* on the layer's device), so the two passes run the same calls
// in the same order. GpuMath only in CUDA builds.
#ifndef NEREUS_WORKER_TRAINER_MATH_BLOB_MATH_H_
#define NEREUS_WORKER_TRAINER_MATH_BLOB_MATH_H_

#include <cblas.h>

#include "worker/trainer/blob.h"
#include "worker/trainer/math/math_functions.h"
#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/math/gpu_math_functions.h"
#endif

namespace nereus {

// (Re)fills `ones` with `n` ones when its size differs (a host write, once):
// the vector of ones that a GEMV sums a blob's rows or columns with.
inline void FillOnes(Blob* ones, int n) {
  if (ones->count() == n) return;
  ones->Reshape({n});
  caffe_set(n, 1.0f, ones->mutable_cpu_data());
}

// A Blob's memory on the host (kGpu false) or the device.
template <bool kGpu>
struct BlobSide {
  static const float* data(const Blob& blob) { return kGpu ? blob.gpu_data() : blob.cpu_data(); }
  static const float* diff(const Blob& blob) { return kGpu ? blob.gpu_diff() : blob.cpu_diff(); }
  static float* mutable_data(Blob* blob) { return kGpu ? blob->mutable_gpu_data() : blob->mutable_cpu_data(); }
  static float* mutable_diff(Blob* blob) { return kGpu ? blob->mutable_gpu_diff() : blob->mutable_cpu_diff(); }
};

struct CpuMath : BlobSide<false> {
  void gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) const {
    caffe_cpu_gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  void gemv(CBLAS_TRANSPOSE trans_a, int m, int n, float alpha, const float* a, const float* x, float beta,
            float* y) const {
    caffe_cpu_gemv(trans_a, m, n, alpha, a, x, beta, y);
  }
  void copy(int n, const float* x, float* y) const { caffe_copy(n, x, y); }
  void add(int n, const float* a, const float* b, float* y) const { caffe_add(n, a, b, y); }
  void mul(int n, const float* a, const float* b, float* y) const { caffe_mul(n, a, b, y); }
  void div(int n, const float* a, const float* b, float* y) const { caffe_div(n, a, b, y); }
  void scale(int n, float alpha, const float* x, float* y) const { caffe_cpu_scale(n, alpha, x, y); }
  void axpy(int n, float alpha, const float* x, float* y) const { caffe_axpy(n, alpha, x, y); }
};

#ifdef NEREUS_HAVE_CUDA
struct GpuMath : BlobSide<true> {
  explicit GpuMath(gpu::Device* d) : device(d) {}
  void gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) const {
    caffe_gpu_gemm(device, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  void gemv(CBLAS_TRANSPOSE trans_a, int m, int n, float alpha, const float* a, const float* x, float beta,
            float* y) const {
    caffe_gpu_gemv(device, trans_a, m, n, alpha, a, x, beta, y);
  }
  void copy(int n, const float* x, float* y) const { caffe_gpu_copy(device, n, x, y); }
  void add(int n, const float* a, const float* b, float* y) const { caffe_gpu_add(device, n, a, b, y); }
  void mul(int n, const float* a, const float* b, float* y) const { caffe_gpu_mul(device, n, a, b, y); }
  void div(int n, const float* a, const float* b, float* y) const { caffe_gpu_div(device, n, a, b, y); }
  void scale(int n, float alpha, const float* x, float* y) const { caffe_gpu_scale(device, n, alpha, x, y); }
  void axpy(int n, float alpha, const float* x, float* y) const { caffe_gpu_axpy(device, n, alpha, x, y); }

  gpu::Device* device;
};
#endif

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_MATH_BLOB_MATH_H_

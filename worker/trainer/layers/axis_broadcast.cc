#include "worker/trainer/layers/axis_broadcast.h"

#include "worker/trainer/math/blob_math.h"

namespace nereus {

Status AxisBroadcast::Check(const Blob& bottom, const Blob& b, int axis, const std::string& what) {
  if (bottom.num_axes() < axis + b.num_axes()) {
    return InvalidArgumentError(what + " blob's shape " + b.shape_string() + " extends past bottom[0]'s shape " +
                                bottom.shape_string() + " from axis " + std::to_string(axis));
  }
  for (int i = 0; i < b.num_axes(); ++i) {
    if (bottom.shape(axis + i) != b.shape(i)) {
      return InvalidArgumentError("dimension mismatch between bottom[0]->shape(" + std::to_string(axis + i) + ") and " +
                                  what + "->shape(" + std::to_string(i) + "): bottom " + bottom.shape_string() + ", " +
                                  what + " " + b.shape_string());
    }
  }
  return Status::OK();
}

void AxisBroadcast::Reshape(const Blob& bottom, const Blob& b, int axis) {
  outer_dim = bottom.count(0, axis);
  dim = b.count();
  inner_dim = bottom.count(axis + b.num_axes());
}

void AxisBroadcast::AddRowSums(const float* x, float* sums) const {
  for (int n = 0; n < outer_dim; ++n) {
    for (int d = 0; d < dim; ++d) {
      const float* row = x + (n * dim + d) * inner_dim;
      float sum = 0.0f;
      for (int j = 0; j < inner_dim; ++j) sum += row[j];
      sums[d] += sum;
    }
  }
}

#ifdef NEREUS_HAVE_CUDA
void AxisBroadcast::RowSumsGpu(gpu::Device* device, const float* x, float beta, float* out) {
  FillOnes(&inner_ones, inner_dim);
  FillOnes(&outer_ones, outer_dim);
  row_sums.Reshape({outer_dim * dim});
  float* rows = row_sums.mutable_gpu_data();
  caffe_gpu_gemv(device, CblasNoTrans, outer_dim * dim, inner_dim, 1.0f, x, inner_ones.gpu_data(), 0.0f, rows);
  caffe_gpu_gemv(device, CblasTrans, outer_dim, dim, 1.0f, rows, outer_ones.gpu_data(), beta, out);
}
#endif

}  // namespace nereus

// BatchNorm's GPU code: the element-wise steps by the functions
// batch_norm_layer.h shares with the CPU, the sums over a channel by two
// cuBLAS matrix-vector products, as Caffe's GPU BatchNorm makes them.
#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/layers/batch_norm_layer.h"
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace {

// Element i of a [num, channels, spatial] blob is in channel (i / spatial) % channels.
__global__ void CenterKernel(int n, const float* mean, int channels, int spatial, float* y) {
  NEREUS_KERNEL_LOOP(i, n) y[i] = ops::BnCenter(y[i], mean[(static_cast<int>(i) / spatial) % channels]);
}
__global__ void NormalizeKernel(int n, const float* std_dev, int channels, int spatial, float* y) {
  NEREUS_KERNEL_LOOP(i, n) y[i] = ops::BnNormalize(y[i], std_dev[(static_cast<int>(i) / spatial) % channels]);
}
__global__ void GlobalBackwardKernel(int n, const float* dy, const float* std_dev, int channels, int spatial,
                                     float* dx) {
  NEREUS_KERNEL_LOOP(i, n) dx[i] = ops::BnNormalize(dy[i], std_dev[(static_cast<int>(i) / spatial) % channels]);
}
__global__ void StdKernel(int n, float eps, float* variance) {
  NEREUS_KERNEL_LOOP(i, n) variance[i] = ops::BnStd(variance[i], eps);
}
__global__ void StatsCountKernel(int n, float moving_average_fraction, float* count) {
  NEREUS_KERNEL_LOOP(i, n) count[i] = ops::BnStatsCount(count[i], moving_average_fraction);
}
__global__ void BnBackwardKernel(int n, const float* dy, const float* y, const float* sum_dy_y, const float* sum_dy,
                                 float inv_m, const float* std_dev, int channels, int spatial, float* dx) {
  NEREUS_KERNEL_LOOP(i, n) {
    const int c = (static_cast<int>(i) / spatial) % channels;
    dx[i] = ops::BnBackward(dy[i], y[i], sum_dy_y[c], sum_dy[c], inv_m, std_dev[c]);
  }
}

}  // namespace

// ---- BatchNorm ----

void BatchNormLayer::ChannelSumsGpu(const float* x, float alpha, float* out) {
  FillOnes(&spatial_ones_, spatial_);
  FillOnes(&batch_ones_, num_);
  num_by_chans_.Reshape({num_ * channels_});
  float* rows = num_by_chans_.mutable_gpu_data();
  caffe_gpu_gemv(device(), CblasNoTrans, num_ * channels_, spatial_, alpha, x, spatial_ones_.gpu_data(), 0.0f, rows);
  caffe_gpu_gemv(device(), CblasTrans, num_, channels_, 1.0f, rows, batch_ones_.gpu_data(), 0.0f, out);
}

void BatchNormLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = bottom[0]->count();
  if (bottom[0] != top[0]) caffe_gpu_copy(device(), count, bottom[0]->gpu_data(), top[0]->mutable_gpu_data());
  float* y = top[0]->mutable_gpu_data();
  float* mean = mean_.mutable_gpu_data();
  float* variance = variance_.mutable_gpu_data();
  const int m = num_ * spatial_;
  const float inv_m = 1.0f / static_cast<float>(m);
  if (use_global_stats_) {
    // One float read back (a wait for the device), as Caffe's GPU code does.
    const float stored = blobs_[2]->cpu_data()[0];
    const float factor = stored == 0.0f ? 0.0f : 1.0f / stored;
    caffe_gpu_scale(device(), channels_, factor, blobs_[0]->gpu_data(), mean);
    caffe_gpu_scale(device(), channels_, factor, blobs_[1]->gpu_data(), variance);
  } else {
    ChannelSumsGpu(y, inv_m, mean);
  }
  gpu::Launch(device(), "BatchNormCenter", count, CenterKernel, static_cast<const float*>(mean), channels_, spatial_,
              y);
  if (!use_global_stats_) {
    temp_.ReshapeLike(*bottom[0]);
    float* squares = temp_.mutable_gpu_data();
    caffe_gpu_sqr(device(), count, y, squares);
    ChannelSumsGpu(squares, inv_m, variance);
    gpu::Launch(device(), "BatchNormStatsCount", 1, StatsCountKernel, moving_average_fraction_,
                blobs_[2]->mutable_gpu_data());
    caffe_gpu_axpby(device(), channels_, 1.0f, mean, moving_average_fraction_, blobs_[0]->mutable_gpu_data());
    const float bias_correction = m > 1 ? static_cast<float>(m) / (m - 1) : 1.0f;
    caffe_gpu_axpby(device(), channels_, bias_correction, variance, moving_average_fraction_,
                    blobs_[1]->mutable_gpu_data());
  }
  gpu::Launch(device(), "BatchNormStd", channels_, StdKernel, eps_, variance);
  gpu::Launch(device(), "BatchNormNormalize", count, NormalizeKernel, static_cast<const float*>(variance), channels_,
              spatial_, y);
  caffe_gpu_copy(device(), count, y, x_norm_.mutable_gpu_data());
}

void BatchNormLayer::Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const int count = bottom[0]->count();
  const float* dy = top[0]->gpu_diff();
  if (bottom[0] == top[0]) {
    x_norm_diff_.ReshapeLike(*top[0]);
    caffe_gpu_copy(device(), count, dy, x_norm_diff_.mutable_gpu_data());
    dy = x_norm_diff_.gpu_data();
  }
  float* dx = bottom[0]->mutable_gpu_diff();
  const float* std_dev = variance_.gpu_data();
  if (use_global_stats_) {
    gpu::Launch(device(), "BatchNormGlobalBackward", count, GlobalBackwardKernel, dy, std_dev, channels_, spatial_, dx);
    return;
  }
  const float* y = x_norm_.gpu_data();
  sum_dy_y_.Reshape({channels_});
  sum_dy_.Reshape({channels_});
  temp_.ReshapeLike(*bottom[0]);
  float* product = temp_.mutable_gpu_data();
  caffe_gpu_mul(device(), count, dy, y, product);
  ChannelSumsGpu(product, 1.0f, sum_dy_y_.mutable_gpu_data());
  ChannelSumsGpu(dy, 1.0f, sum_dy_.mutable_gpu_data());
  const float inv_m = 1.0f / static_cast<float>(num_ * spatial_);
  gpu::Launch(device(), "BatchNormBackward", count, BnBackwardKernel, dy, y, sum_dy_y_.gpu_data(), sum_dy_.gpu_data(),
              inv_m, std_dev, channels_, spatial_, dx);
}

}  // namespace nereus

#include "worker/trainer/layers/pooling_layer.h"

#include <cfloat>
#include <cmath>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

int PoolingLayer::PooledSize(int input, int kernel, int pad, int stride, bool any_pad) {
  int pooled = static_cast<int>(std::ceil(static_cast<float>(input + 2 * pad - kernel) / stride)) + 1;
  // With padding (on either axis, as Caffe tests it), the last window must
  // start inside the image or the top/left padding; otherwise it would pool
  // padding only, so it is dropped.
  if (any_pad && (pooled - 1) * stride >= input + pad) --pooled;
  return pooled;
}

Status PoolingLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::PoolingParameter& p = layer_param_.pooling_param();
  method_ = p.pool();
  if (method_ == caffe::PoolingParameter::STOCHASTIC) {
    return LayerError("STOCHASTIC pooling is not supported (use MAX or AVE)");
  }
  if (top.size() > 1 && method_ != caffe::PoolingParameter::MAX) {
    return LayerError("only MAX pooling has a second (argmax) top");
  }
  const Status four_axes = ReadFourAxes(*bottom[0], &channels_, &height_, &width_);
  if (!four_axes.ok()) return LayerError(four_axes.message());
  global_pooling_ = p.global_pooling();
  if (global_pooling_) {
    if (p.has_kernel_size() || p.has_kernel_h() || p.has_kernel_w()) {
      return LayerError("with global_pooling: true the kernel size cannot be specified");
    }
  } else {
    if (p.has_kernel_size() == (p.has_kernel_h() || p.has_kernel_w())) {
      return LayerError("the kernel size is kernel_size OR kernel_h and kernel_w, exactly one");
    }
    if (!p.has_kernel_size() && !(p.has_kernel_h() && p.has_kernel_w())) {
      return LayerError("for non-square kernels both kernel_h and kernel_w are required");
    }
  }
  if (p.has_pad() && (p.has_pad_h() || p.has_pad_w())) {
    return LayerError("padding is pad OR pad_h and pad_w, not both");
  }
  if (p.has_pad_h() != p.has_pad_w()) return LayerError("pad_h and pad_w must be given together");
  if (p.has_stride() && (p.has_stride_h() || p.has_stride_w())) {
    return LayerError("stride is stride OR stride_h and stride_w, not both");
  }
  if (p.has_stride_h() != p.has_stride_w()) {
    return LayerError("stride_h and stride_w must be given together");
  }
  if (global_pooling_) {
    kernel_h_ = bottom[0]->shape(2);
    kernel_w_ = bottom[0]->shape(3);
  } else if (p.has_kernel_size()) {
    kernel_h_ = kernel_w_ = static_cast<int>(p.kernel_size());
  } else {
    kernel_h_ = static_cast<int>(p.kernel_h());
    kernel_w_ = static_cast<int>(p.kernel_w());
  }
  if (kernel_h_ <= 0 || kernel_w_ <= 0) {
    return LayerError("kernel size must be > 0, got " + std::to_string(kernel_h_) + "x" + std::to_string(kernel_w_));
  }
  if (p.has_pad_h()) {
    pad_h_ = static_cast<int>(p.pad_h());
    pad_w_ = static_cast<int>(p.pad_w());
  } else {
    pad_h_ = pad_w_ = static_cast<int>(p.pad());
  }
  if (p.has_stride_h()) {
    stride_h_ = static_cast<int>(p.stride_h());
    stride_w_ = static_cast<int>(p.stride_w());
  } else {
    stride_h_ = stride_w_ = static_cast<int>(p.stride());
  }
  if (stride_h_ <= 0 || stride_w_ <= 0) return LayerError("stride must be > 0");
  if (global_pooling_ && (pad_h_ != 0 || pad_w_ != 0 || stride_h_ != 1 || stride_w_ != 1)) {
    return LayerError("with global_pooling: true only pad = 0 and stride = 1 are allowed");
  }
  if (pad_h_ >= kernel_h_ || pad_w_ >= kernel_w_) {
    return LayerError("pad (" + std::to_string(pad_h_) + ", " + std::to_string(pad_w_) +
                      ") must be smaller than the kernel (" + std::to_string(kernel_h_) + ", " +
                      std::to_string(kernel_w_) + ")");
  }
  if (bottom[0]->shape(2) + 2 * pad_h_ < kernel_h_ || bottom[0]->shape(3) + 2 * pad_w_ < kernel_w_) {
    return LayerError("kernel " + std::to_string(kernel_h_) + "x" + std::to_string(kernel_w_) +
                      " is larger than the padded input " + bottom[0]->shape_string());
  }
  return Status::OK();
}

void PoolingLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Status four_axes = ReadFourAxes(*bottom[0], &channels_, &height_, &width_);
  LAYER_CHECK(four_axes.ok()) << four_axes.message();
  if (global_pooling_) {
    kernel_h_ = height_;
    kernel_w_ = width_;
  }
  LAYER_CHECK(height_ + 2 * pad_h_ >= kernel_h_ && width_ + 2 * pad_w_ >= kernel_w_)
      << "kernel " << kernel_h_ << "x" << kernel_w_ << " is larger than the padded input " << bottom[0]->shape_string();
  const bool any_pad = pad_h_ != 0 || pad_w_ != 0;
  pooled_h_ = PooledSize(height_, kernel_h_, pad_h_, stride_h_, any_pad);
  pooled_w_ = PooledSize(width_, kernel_w_, pad_w_, stride_w_, any_pad);
  const std::vector<int> top_shape = {bottom[0]->shape(0), channels_, pooled_h_, pooled_w_};
  top[0]->Reshape(top_shape);
  if (top.size() > 1) top[1]->Reshape(top_shape);
  if (method_ == caffe::PoolingParameter::MAX && top.size() == 1 &&
      (max_idx_ == nullptr || max_idx_count_ != top[0]->count())) {
    max_idx_count_ = top[0]->count();
    max_idx_ = std::make_shared<SyncedMemory>(sizeof(int) * static_cast<size_t>(max_idx_count_));
  }
  geometry_.height = height_;
  geometry_.width = width_;
  geometry_.pooled_h = pooled_h_;
  geometry_.pooled_w = pooled_w_;
  geometry_.kernel_h = kernel_h_;
  geometry_.kernel_w = kernel_w_;
  geometry_.stride_h = stride_h_;
  geometry_.stride_w = stride_w_;
  geometry_.pad_h = pad_h_;
  geometry_.pad_w = pad_w_;
}

void PoolingLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* bottom_data = bottom[0]->cpu_data();
  float* top_data = top[0]->mutable_cpu_data();
  const int planes = bottom[0]->shape(0) * channels_;
  const int in_plane = height_ * width_;
  const int out_plane = pooled_h_ * pooled_w_;
  if (method_ == caffe::PoolingParameter::MAX) {
    const bool use_top_mask = top.size() > 1;
    float* top_mask = use_top_mask ? top[1]->mutable_cpu_data() : nullptr;
    int* mask = use_top_mask ? nullptr : static_cast<int*>(max_idx_->mutable_cpu_data());
    for (int plane = 0; plane < planes; ++plane) {
      const float* in = bottom_data + plane * in_plane;
      for (int ph = 0; ph < pooled_h_; ++ph) {
        for (int pw = 0; pw < pooled_w_; ++pw) {
          const int pool_index = plane * out_plane + ph * pooled_w_ + pw;
          int argmax = -1;
          top_data[pool_index] = ops::MaxPoolAt(in, geometry_, ph, pw, &argmax);
          if (use_top_mask) {
            top_mask[pool_index] = static_cast<float>(argmax);
          } else {
            mask[pool_index] = argmax;
          }
        }
      }
    }
    return;
  }
  // AVE.
  for (int plane = 0; plane < planes; ++plane) {
    const float* in = bottom_data + plane * in_plane;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        top_data[plane * out_plane + ph * pooled_w_ + pw] = ops::AvePoolAt(in, geometry_, ph, pw);
      }
    }
  }
}

void PoolingLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  caffe_set(bottom[0]->count(), 0.0f, bottom_diff);
  const int planes = bottom[0]->shape(0) * channels_;
  const int in_plane = height_ * width_;
  const int out_plane = pooled_h_ * pooled_w_;
  if (method_ == caffe::PoolingParameter::MAX) {
    const bool use_top_mask = top.size() > 1;
    const float* top_mask = use_top_mask ? top[1]->cpu_data() : nullptr;
    const int* mask = use_top_mask ? nullptr : static_cast<const int*>(max_idx_->cpu_data());
    for (int plane = 0; plane < planes; ++plane) {
      float* in_diff = bottom_diff + plane * in_plane;
      for (int i = plane * out_plane; i < (plane + 1) * out_plane; ++i) {
        const int index = use_top_mask ? static_cast<int>(top_mask[i]) : mask[i];
        if (index >= 0) in_diff[index] += top_diff[i];
      }
    }
    return;
  }
  for (int plane = 0; plane < planes; ++plane) {
    float* in_diff = bottom_diff + plane * in_plane;
    for (int ph = 0; ph < pooled_h_; ++ph) {
      for (int pw = 0; pw < pooled_w_; ++pw) {
        const ops::AvePoolWindow window = ops::AveWindow(geometry_, ph, pw);
        const float g = top_diff[plane * out_plane + ph * pooled_w_ + pw] / window.size;
        for (int h = window.hstart; h < window.hend; ++h) {
          for (int w = window.wstart; w < window.wend; ++w) in_diff[h * width_ + w] += g;
        }
      }
    }
  }
}

}  // namespace nereus

#include "worker/trainer/layers/eltwise_layer.h"

#include <cfloat>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status EltwiseLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::EltwiseParameter& p = layer_param_.eltwise_param();
  op_ = p.operation();
  if (p.coeff_size() != 0 && p.coeff_size() != static_cast<int>(bottom.size())) {
    return LayerError("Eltwise takes one coefficient per bottom blob: " + std::to_string(p.coeff_size()) +
                      " coefficients for " + std::to_string(bottom.size()) + " bottoms");
  }
  if (op_ != caffe::EltwiseParameter::SUM && p.coeff_size() != 0) {
    return LayerError("Eltwise only takes coefficients for the SUM operation");
  }
  coeffs_.assign(bottom.size(), 1.0f);
  for (int i = 0; i < p.coeff_size(); ++i) coeffs_[i] = p.coeff(i);
  stable_prod_grad_ = p.stable_prod_grad();
  for (size_t i = 1; i < bottom.size(); ++i) {
    if (bottom[i]->shape() != bottom[0]->shape()) {
      return LayerError("all bottoms must have the same shape: bottom 0 is " + bottom[0]->shape_string() + ", bottom " +
                        std::to_string(i) + " is " + bottom[i]->shape_string());
    }
  }
  return Status::OK();
}

void EltwiseLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  for (size_t i = 1; i < bottom.size(); ++i) {
    LAYER_CHECK(bottom[i]->shape() == bottom[0]->shape())
        << "all bottoms must have the same shape: bottom 0 is " << bottom[0]->shape_string() << ", bottom " << i
        << " is " << bottom[i]->shape_string();
  }
  top[0]->ReshapeLike(*bottom[0]);
  if (op_ == caffe::EltwiseParameter::MAX && (max_idx_ == nullptr || max_idx_count_ != bottom[0]->count())) {
    max_idx_count_ = bottom[0]->count();
    max_idx_ = std::make_shared<SyncedMemory>(sizeof(int) * static_cast<size_t>(max_idx_count_));
  }
}

void EltwiseLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int count = top[0]->count();
  float* top_data = top[0]->mutable_cpu_data();
  switch (op_) {
    case caffe::EltwiseParameter::PROD:
      caffe_mul(count, bottom[0]->cpu_data(), bottom[1]->cpu_data(), top_data);
      for (size_t i = 2; i < bottom.size(); ++i) {
        caffe_mul(count, top_data, bottom[i]->cpu_data(), top_data);
      }
      break;
    case caffe::EltwiseParameter::SUM:
      caffe_set(count, 0.0f, top_data);
      for (size_t i = 0; i < bottom.size(); ++i) {
        caffe_axpy(count, coeffs_[i], bottom[i]->cpu_data(), top_data);
      }
      break;
    case caffe::EltwiseParameter::MAX: {
      const float* a = bottom[0]->cpu_data();
      const float* b = bottom[1]->cpu_data();
      int* max_idx = static_cast<int*>(max_idx_->mutable_cpu_data());
      for (int k = 0; k < count; ++k) ops::EltwiseMaxFirst(a[k], b[k], top_data + k, max_idx + k);
      for (size_t i = 2; i < bottom.size(); ++i) {
        const float* c = bottom[i]->cpu_data();
        for (int k = 0; k < count; ++k) ops::EltwiseMaxNext(c[k], static_cast<int>(i), top_data + k, max_idx + k);
      }
      break;
    }
  }
}

void EltwiseLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    if (op_ != caffe::EltwiseParameter::MAX) {
      BackwardSumProd(CpuMath(), top, bottom, i);
      continue;
    }
    const int count = top[0]->count();
    const float* top_diff = top[0]->cpu_diff();
    float* bottom_diff = bottom[i]->mutable_cpu_diff();
    const int* max_idx = static_cast<const int*>(max_idx_->cpu_data());
    for (int k = 0; k < count; ++k) {
      bottom_diff[k] = ops::EltwiseMaxBackward(top_diff[k], max_idx[k], static_cast<int>(i));
    }
  }
}

}  // namespace nereus

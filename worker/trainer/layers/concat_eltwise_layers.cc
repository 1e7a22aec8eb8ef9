#include "worker/trainer/layers/concat_eltwise_layers.h"

#include <cfloat>
#include <string>

#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/blob_math.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {

// ---- Concat ----

std::string ConcatLayer::ShapeProblem(const std::vector<Blob*>& bottom, int* axis) const {
  const caffe::ConcatParameter& p = layer_param_.concat_param();
  const int num_axes = bottom[0]->num_axes();
  if (p.has_concat_dim()) {
    *axis = static_cast<int>(p.concat_dim());
    if (*axis >= num_axes) {
      return "concat_dim " + std::to_string(*axis) + " is out of range for bottom shape " + bottom[0]->shape_string();
    }
  } else {
    if (p.axis() < -num_axes || p.axis() >= num_axes) {
      return "axis " + std::to_string(p.axis()) + " is out of range for bottom shape " + bottom[0]->shape_string();
    }
    *axis = bottom[0]->CanonicalAxisIndex(p.axis());
  }
  for (size_t i = 1; i < bottom.size(); ++i) {
    bool same = bottom[i]->num_axes() == num_axes;
    for (int a = 0; same && a < num_axes; ++a) {
      if (a != *axis && bottom[i]->shape(a) != bottom[0]->shape(a)) same = false;
    }
    if (!same) {
      return "all inputs must have the same shape except at concat axis " + std::to_string(*axis) + ": bottom 0 is " +
             bottom[0]->shape_string() + ", bottom " + std::to_string(i) + " is " + bottom[i]->shape_string();
    }
  }
  return "";
}

Status ConcatLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ConcatParameter& p = layer_param_.concat_param();
  if (p.has_axis() && p.has_concat_dim()) {
    return LayerError("either axis or concat_dim should be specified; not both");
  }
  int axis = 0;
  const std::string problem = ShapeProblem(bottom, &axis);
  if (!problem.empty()) return LayerError(problem);
  return Status::OK();
}

void ConcatLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const std::string problem = ShapeProblem(bottom, &concat_axis_);
  LAYER_CHECK(problem.empty()) << problem;
  std::vector<int> top_shape = bottom[0]->shape();
  for (size_t i = 1; i < bottom.size(); ++i) top_shape[concat_axis_] += bottom[i]->shape(concat_axis_);
  top[0]->Reshape(top_shape);
  num_concats_ = bottom[0]->count(0, concat_axis_);
  concat_input_size_ = bottom[0]->count(concat_axis_ + 1);
}

void ConcatLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  float* top_data = top[0]->mutable_cpu_data();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    const float* bottom_data = b->cpu_data();
    const int chunk = bottom_concat_axis * concat_input_size_;
    for (int n = 0; n < num_concats_; ++n) {
      caffe_copy(chunk, bottom_data + n * chunk, top_data + (n * top_concat_axis + offset) * concat_input_size_);
    }
  });
}

void ConcatLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  const float* top_diff = top[0]->cpu_diff();
  const int top_concat_axis = top[0]->shape(concat_axis_);
  ForEachPart(bottom, concat_axis_, [&](size_t i, Blob* b, int bottom_concat_axis, int offset) {
    if (!propagate_down[i]) return;
    float* bottom_diff = b->mutable_cpu_diff();
    const int chunk = bottom_concat_axis * concat_input_size_;
    for (int n = 0; n < num_concats_; ++n) {
      caffe_copy(chunk, top_diff + (n * top_concat_axis + offset) * concat_input_size_, bottom_diff + n * chunk);
    }
  });
}

// ---- Eltwise ----

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

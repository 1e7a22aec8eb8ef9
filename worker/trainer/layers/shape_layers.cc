#include "worker/trainer/layers/shape_layers.h"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "worker/trainer/layers/concat_layer.h"
#include "worker/trainer/layers/layer_check.h"
#include "worker/trainer/math/math_functions.h"

namespace nereus {
namespace {

std::string ShapeString(const std::vector<int>& shape) { return Blob(shape).shape_string(); }

bool AxisInRange(int axis, const Blob& blob) { return axis >= -blob.num_axes() && axis < blob.num_axes(); }

}  // namespace

// ---- Flatten ----

Status FlattenLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0] == top[0]) return LayerError("Flatten does not allow in-place computation");
  const caffe::FlattenParameter& p = layer_param_.flatten_param();
  if (!AxisInRange(p.axis(), *bottom[0]) || !AxisInRange(p.end_axis(), *bottom[0])) {
    return LayerError("axis " + std::to_string(p.axis()) + " / end_axis " + std::to_string(p.end_axis()) +
                      " out of range for bottom shape " + bottom[0]->shape_string());
  }
  if (bottom[0]->CanonicalAxisIndex(p.end_axis()) < bottom[0]->CanonicalAxisIndex(p.axis())) {
    return LayerError("end_axis " + std::to_string(p.end_axis()) + " comes before axis " + std::to_string(p.axis()));
  }
  return Status::OK();
}

void FlattenLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::FlattenParameter& p = layer_param_.flatten_param();
  const int start = bottom[0]->CanonicalAxisIndex(p.axis());
  const int end = bottom[0]->CanonicalAxisIndex(p.end_axis());
  std::vector<int> shape;
  for (int i = 0; i < start; ++i) shape.push_back(bottom[0]->shape(i));
  shape.push_back(bottom[0]->count(start, end + 1));
  for (int i = end + 1; i < bottom[0]->num_axes(); ++i) shape.push_back(bottom[0]->shape(i));
  top[0]->Reshape(shape);
  top[0]->ShareData(*bottom[0]);
  top[0]->ShareDiff(*bottom[0]);
}

void FlattenLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->ShareData(*bottom[0]);
}

void FlattenLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  bottom[0]->ShareDiff(*top[0]);
}

// ---- Reshape ----

StatusOr<std::vector<int>> ReshapeLayer::TopShape(const Blob& bottom) const {
  const caffe::ReshapeParameter& p = layer_param_.reshape_param();
  const int num_axes = bottom.num_axes();
  const int start = p.axis() >= 0 ? p.axis() : num_axes + p.axis() + 1;
  if (start < 0 || start > num_axes) {
    return InvalidArgumentError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                                bottom.shape_string());
  }
  if (p.num_axes() < -1) return InvalidArgumentError("num_axes must be >= 0, or -1 for all");
  const int end = p.num_axes() == -1 ? num_axes : start + p.num_axes();
  if (end > num_axes) {
    return InvalidArgumentError("axis + num_axes (" + std::to_string(end) + ") goes past the bottom's axes " +
                                bottom.shape_string());
  }
  std::vector<int> shape(bottom.shape().begin(), bottom.shape().begin() + start);
  int inferred = -1;
  int64_t known = 1;
  for (int i = 0; i < p.shape().dim_size(); ++i) {
    const int64_t dim = p.shape().dim(i);
    if (dim == 0) {
      if (start + i >= num_axes) {
        return InvalidArgumentError("dim " + std::to_string(i) + " is 0 (copy) but the bottom has no axis " +
                                    std::to_string(start + i));
      }
      shape.push_back(bottom.shape(start + i));
    } else if (dim == -1) {
      if (inferred >= 0) return InvalidArgumentError("only one dimension may be -1 (inferred)");
      inferred = static_cast<int>(shape.size());
      shape.push_back(1);
      continue;
    } else if (dim < -1) {
      return InvalidArgumentError("dim " + std::to_string(i) + " is " + std::to_string(dim) +
                                  "; dimensions must be >= 0, or -1 to infer one");
    } else {
      shape.push_back(static_cast<int>(dim));
    }
    known *= shape.back();
  }
  for (int i = end; i < num_axes; ++i) shape.push_back(bottom.shape(i));
  for (int i = 0; i < start; ++i) known *= bottom.shape(i);
  for (int i = end; i < num_axes; ++i) known *= bottom.shape(i);
  if (inferred >= 0) {
    if (known == 0 || bottom.count() % known != 0) {
      return InvalidArgumentError("cannot infer the -1 dimension: bottom count " + std::to_string(bottom.count()) +
                                  " is not a multiple of " + std::to_string(known));
    }
    shape[inferred] = static_cast<int>(bottom.count() / known);
  }
  int64_t count = 1;
  for (int d : shape) count *= d;
  if (count != bottom.count()) {
    return InvalidArgumentError("output count " + std::to_string(count) + " (shape " + ShapeString(shape) +
                                ") differs from bottom count " + std::to_string(bottom.count()) + " (" +
                                bottom.shape_string() + ")");
  }
  return shape;
}

Status ReshapeLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (bottom[0] == top[0]) return LayerError("Reshape does not allow in-place computation");
  auto shape = TopShape(*bottom[0]);
  if (!shape.ok()) return LayerError(shape.status().message());
  return Status::OK();
}

void ReshapeLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  auto shape = TopShape(*bottom[0]);
  LAYER_CHECK(shape.ok()) << shape.status().message();
  top[0]->Reshape(*shape);
  top[0]->ShareData(*bottom[0]);
  top[0]->ShareDiff(*bottom[0]);
}

// ---- Slice ----

int SliceLayer::SliceAxis(const Blob& bottom) const {
  const caffe::SliceParameter& p = layer_param_.slice_param();
  return p.has_slice_dim() ? static_cast<int>(p.slice_dim()) : bottom.CanonicalAxisIndex(p.axis());
}

StatusOr<std::vector<int>> SliceLayer::TopSizes(const Blob& bottom, int num_tops) const {
  const caffe::SliceParameter& p = layer_param_.slice_param();
  const int axis = SliceAxis(bottom);
  const int dim = bottom.shape(axis);
  std::vector<int> sizes;
  if (p.slice_point_size() > 0) {
    if (p.slice_point_size() != num_tops - 1) {
      return InvalidArgumentError(std::to_string(p.slice_point_size()) + " slice_point(s) for " +
                                  std::to_string(num_tops) + " tops; give one fewer than tops");
    }
    int prev = 0;
    for (int i = 0; i < p.slice_point_size(); ++i) {
      const int point = static_cast<int>(p.slice_point(i));
      if (point <= prev || point >= dim) {
        return InvalidArgumentError("slice_point " + std::to_string(point) + " must be increasing and inside (0, " +
                                    std::to_string(dim) + ") (axis " + std::to_string(axis) + " of " +
                                    bottom.shape_string() + ")");
      }
      sizes.push_back(point - prev);
      prev = point;
    }
    sizes.push_back(dim - prev);
  } else {
    if (dim % num_tops != 0) {
      return InvalidArgumentError("axis " + std::to_string(axis) + " of " + bottom.shape_string() +
                                  " cannot be split evenly into " + std::to_string(num_tops) +
                                  " tops; give slice_point");
    }
    sizes.assign(num_tops, dim / num_tops);
  }
  return sizes;
}

Status SliceLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::SliceParameter& p = layer_param_.slice_param();
  if (p.has_slice_dim() && p.has_axis()) {
    return LayerError("either axis or slice_dim may be given, not both");
  }
  if (p.has_slice_dim() ? static_cast<int>(p.slice_dim()) >= bottom[0]->num_axes()
                        : !AxisInRange(p.axis(), *bottom[0])) {
    return LayerError("the slice axis is out of range for bottom shape " + bottom[0]->shape_string());
  }
  auto sizes = TopSizes(*bottom[0], static_cast<int>(top.size()));
  if (!sizes.ok()) return LayerError(sizes.status().message());
  return Status::OK();
}

void SliceLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  slice_axis_ = SliceAxis(*bottom[0]);
  auto sizes = TopSizes(*bottom[0], static_cast<int>(top.size()));
  LAYER_CHECK(sizes.ok()) << sizes.status().message();
  num_slices_ = bottom[0]->count(0, slice_axis_);
  slice_size_ = bottom[0]->count(slice_axis_ + 1);
  std::vector<int> shape = bottom[0]->shape();
  for (size_t i = 0; i < top.size(); ++i) {
    shape[slice_axis_] = (*sizes)[i];
    top[i]->Reshape(shape);
  }
}

void SliceLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  const int bottom_axis = bottom[0]->shape(slice_axis_);
  ForEachPart(top, slice_axis_, [&](size_t, Blob* t, int top_axis, int offset) {
    float* out = t->mutable_cpu_data();
    for (int n = 0; n < num_slices_; ++n) {
      caffe_copy(top_axis * slice_size_, in + (n * bottom_axis + offset) * slice_size_,
                 out + n * top_axis * slice_size_);
    }
  });
}

void SliceLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                              const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const int bottom_axis = bottom[0]->shape(slice_axis_);
  ForEachPart(top, slice_axis_, [&](size_t, Blob* t, int top_axis, int offset) {
    const float* top_diff = t->cpu_diff();
    for (int n = 0; n < num_slices_; ++n) {
      caffe_copy(top_axis * slice_size_, top_diff + n * top_axis * slice_size_,
                 bottom_diff + (n * bottom_axis + offset) * slice_size_);
    }
  });
}

// ---- Silence ----

void SilenceLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                const std::vector<Blob*>& bottom) {
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (propagate_down[i]) caffe_set(bottom[i]->count(), 0.0f, bottom[i]->mutable_cpu_diff());
  }
}

// ---- Input ----

Status InputLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::InputParameter& p = layer_param_.input_param();
  const int num_shapes = p.shape_size();
  if (num_shapes != 0 && num_shapes != 1 && num_shapes != static_cast<int>(top.size())) {
    return LayerError("input_param must give no shape, one shape for every top, or one per top (" +
                      std::to_string(top.size()) + "); got " + std::to_string(num_shapes));
  }
  for (size_t i = 0; i < top.size() && num_shapes > 0; ++i) {
    const caffe::BlobShape& shape = p.shape(num_shapes == 1 ? 0 : static_cast<int>(i));
    Status valid = CheckBlobShape(shape);
    if (!valid.ok()) return LayerError("input_param " + valid.message());
    top[i]->Reshape(shape);
  }
  return Status::OK();
}

// ---- ArgMax ----

Status ArgMaxLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::ArgMaxParameter& p = layer_param_.argmax_param();
  out_max_val_ = p.out_max_val();
  top_k_ = static_cast<int>(p.top_k());
  has_axis_ = p.has_axis();
  if (top_k_ < 1) return LayerError("top_k must be >= 1");
  if (has_axis_) {
    if (!AxisInRange(p.axis(), *bottom[0])) {
      return LayerError("axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                        bottom[0]->shape_string());
    }
    axis_ = bottom[0]->CanonicalAxisIndex(p.axis());
    if (top_k_ > bottom[0]->shape(axis_)) {
      return LayerError("top_k (" + std::to_string(top_k_) + ") must be <= the dimension of axis " +
                        std::to_string(axis_) + " of " + bottom[0]->shape_string());
    }
  } else if (top_k_ > bottom[0]->count(1)) {
    return LayerError("top_k (" + std::to_string(top_k_) + ") must be <= the number of classes (" +
                      std::to_string(bottom[0]->count(1)) + ")");
  }
  return Status::OK();
}

void ArgMaxLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::vector<int> shape(std::max(bottom[0]->num_axes(), 3), 1);
  if (has_axis_) {
    shape = bottom[0]->shape();
    shape[axis_] = top_k_;
  } else {
    shape[0] = bottom[0]->shape(0);
    shape[2] = top_k_;
    if (out_max_val_) shape[1] = 2;
  }
  top[0]->Reshape(shape);
}

void ArgMaxLayer::ItemGeometry(const Blob& bottom, int* dim, int* axis_dist) const {
  if (has_axis_) {
    *dim = bottom.shape(axis_);
    *axis_dist = bottom.count(axis_) / *dim;
  } else {
    *dim = bottom.count(1);
    *axis_dist = 1;
  }
}

void ArgMaxLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  int dim, axis_dist;
  ItemGeometry(*bottom[0], &dim, &axis_dist);
  const int num = bottom[0]->count() / dim;
  std::vector<std::pair<float, int>> pairs(dim);
  for (int i = 0; i < num; ++i) {
    const int base = (i / axis_dist) * dim * axis_dist + i % axis_dist;
    for (int j = 0; j < dim; ++j) pairs[j] = {in[base + j * axis_dist], j};
    std::partial_sort(pairs.begin(), pairs.begin() + top_k_, pairs.end(), std::greater<std::pair<float, int>>());
    for (int j = 0; j < top_k_; ++j) {
      ops::ArgMaxWrite(out, i, j, top_k_, axis_dist, has_axis_, out_max_val_, pairs[j].first, pairs[j].second);
    }
  }
}

void ArgMaxLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  LAYER_CHECK(!propagate_down[0]) << "ArgMax has no gradient";
}

}  // namespace nereus

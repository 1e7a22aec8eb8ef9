#include "worker/trainer/layers/tile_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

Status TileLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::TileParameter& p = layer_param_.tile_param();
  const int num_axes = bottom[0]->num_axes();
  if (p.axis() < -num_axes || p.axis() >= num_axes) {
    return LayerError("tile_param.axis " + std::to_string(p.axis()) + " is out of range for bottom shape " +
                      bottom[0]->shape_string());
  }
  if (!p.has_tiles()) return LayerError("tile_param.tiles must be given");
  if (p.tiles() <= 0) return LayerError("tile_param.tiles must be positive, got " + std::to_string(p.tiles()));
  tiles_ = p.tiles();
  return Status::OK();
}

void TileLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int num_axes = bottom[0]->num_axes();
  const int param_axis = layer_param_.tile_param().axis();
  LAYER_CHECK(param_axis >= -num_axes && param_axis < num_axes)
      << "axis " << param_axis << " is out of range for bottom shape " << bottom[0]->shape_string();
  axis_ = bottom[0]->CanonicalAxisIndex(param_axis);
  std::vector<int> shape = bottom[0]->shape();
  shape[axis_] *= tiles_;
  top[0]->Reshape(shape);
  inner_dim_ = bottom[0]->count(axis_);
}

void TileLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const float* in = bottom[0]->cpu_data();
  float* out = top[0]->mutable_cpu_data();
  const int count = top[0]->count();
  for (int i = 0; i < count; ++i) out[i] = in[ops::TileSource(i, tiles_, inner_dim_)];
}

void TileLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                             const std::vector<Blob*>& bottom) {
  if (!propagate_down[0]) return;
  const float* top_diff = top[0]->cpu_diff();
  float* bottom_diff = bottom[0]->mutable_cpu_diff();
  const int count = bottom[0]->count();
  for (int j = 0; j < count; ++j) bottom_diff[j] = ops::TileGradient(top_diff, j, tiles_, inner_dim_);
}

}  // namespace nereus

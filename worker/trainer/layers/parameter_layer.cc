#include "worker/trainer/layers/parameter_layer.h"

#include <cstdint>
#include <string>

#include "worker/trainer/math/math_functions.h"

namespace nereus {

Status ParameterLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::BlobShape& shape = layer_param_.parameter_param().shape();
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (shape.dim(i) < 0 || shape.dim(i) > INT32_MAX) {
      return LayerError("parameter_param.shape dimension " + std::to_string(i) + " is " + std::to_string(shape.dim(i)) +
                        ", not a size");
    }
  }
  Blob wanted;
  wanted.Reshape(shape);
  if (blobs_.empty()) {
    blobs_.push_back(std::make_shared<Blob>(wanted.shape()));
  } else {
    RETURN_IF_ERROR(CheckExistingShape(*blobs_[0], wanted.shape(), "parameter blob"));
  }
  param_propagate_down_.assign(1, true);
  return Status::OK();
}

void ParameterLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->ReshapeLike(*blobs_[0]);
}

void ParameterLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  top[0]->ShareData(*blobs_[0]);
}

void ParameterLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                                  const std::vector<Blob*>& bottom) {
  if (!param_propagate_down(0)) return;
  caffe_axpy(blobs_[0]->count(), 1.0f, top[0]->cpu_diff(), blobs_[0]->mutable_cpu_diff());
}

}  // namespace nereus

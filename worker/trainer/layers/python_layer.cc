#include "worker/trainer/layers/python_layer.h"

#include <string>

#include "worker/trainer/layers/layer_check.h"

namespace nereus {

Status PythonLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::PythonParameter& pp = layer_param_.python_param();
  return LayerError(
      "Python layers cannot run in Nereus: no Python interpreter is embedded in the trainer, so "
      "python_param { module: '" +
      pp.module() + "' layer: '" + pp.layer() +
      "' } has nothing to run it; replace the layer with one of Caffe's C++ layer types");
}

void PythonLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(false) << "a Python layer cannot run (no Python is embedded)";
}

void PythonLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  LAYER_CHECK(false) << "a Python layer cannot run (no Python is embedded)";
}

void PythonLayer::Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                               const std::vector<Blob*>& bottom) {
  LAYER_CHECK(false) << "a Python layer cannot run (no Python is embedded)";
}

}  // namespace nereus

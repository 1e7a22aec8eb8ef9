// Python: Caffe's layer whose code is a Python class (python_param { module
// layer param_str }). Nereus embeds no Python interpreter, so such a layer
// cannot run: its set-up fails, and with it the construction of the net,
// with an error naming the layer, its module and class, and why. The type is
// registered so that the net's other layers are checked and this reason
// given, instead of "unknown layer type".
#ifndef NEREUS_WORKER_TRAINER_LAYERS_PYTHON_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_PYTHON_LAYER_H_

#include <vector>

#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {

class PythonLayer : public Layer {
 public:
  using Layer::Layer;
  // Always an error: see above.
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // Never reached (set-up fails): fatal, naming the layer.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  const char* type() const override { return "Python"; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_PYTHON_LAYER_H_

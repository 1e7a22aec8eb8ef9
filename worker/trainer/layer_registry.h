// LayerRegistry: maps a prototxt layer type ("Convolution") to a factory.
// There is no process-wide registry: whoever builds a Net passes one in,
// normally DefaultLayerRegistry(), which lists every layer Nereus ships;
// tests build their own with fakes.
//
// Not thread-safe for Register; Create may be called concurrently once
// registration is over.
#ifndef NEREUS_WORKER_TRAINER_LAYER_REGISTRY_H_
#define NEREUS_WORKER_TRAINER_LAYER_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/layer.h"

namespace nereus {

class LayerRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Layer>(const caffe::LayerParameter&)>;

  // Adds `type`. Registering a type twice is a bug in the caller (CHECK).
  void Register(const std::string& type, Factory factory);

  // Convenience: Register(type, [](p) { return std::make_unique<L>(p); }).
  template <typename L>
  void Register(const std::string& type) {
    Register(type, [](const caffe::LayerParameter& p) -> std::unique_ptr<Layer> { return std::make_unique<L>(p); });
  }

  // Builds a layer of param.type(). An unknown type is InvalidArgument
  // naming the type and the layer and listing the known types.
  StatusOr<std::unique_ptr<Layer>> Create(const caffe::LayerParameter& param) const;

  bool Has(const std::string& type) const { return factories_.count(type) > 0; }
  // Registered types, sorted.
  std::vector<std::string> Types() const;

 private:
  std::map<std::string, Factory> factories_;
};

// Every layer Nereus ships: the compute layers (worker/trainer/layers/), the
// data layers (worker/trainer/data/). The Net adds its own Split layer
// internally. Defined in worker/trainer/default_layer_registry.cc, part of
// nereus_trainer (not of nereus_trainer_core).
LayerRegistry DefaultLayerRegistry();

// Defined in worker/trainer/layers/register_layers.cc and
// worker/trainer/data/register_data_layers.cc respectively; each registers its
// layers explicitly.
void RegisterComputeLayers(LayerRegistry* registry);
void RegisterDataLayers(LayerRegistry* registry);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYER_REGISTRY_H_

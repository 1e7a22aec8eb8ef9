#include <memory>

#include "worker/trainer/data/data_layer.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {

void RegisterDataLayers(LayerRegistry* registry, const data::DataLayerOptions& options) {
  registry->Register("Data", [options](const caffe::LayerParameter& param) -> std::unique_ptr<Layer> {
    return std::make_unique<data::DataLayer>(param, options);
  });
}

void RegisterDataLayers(LayerRegistry* registry) { RegisterDataLayers(registry, data::DataLayerOptions()); }

}  // namespace nereus

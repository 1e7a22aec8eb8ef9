// DefaultLayerRegistry lives apart from LayerRegistry so that the trainer core
// (nereus_trainer_core) builds and tests without the layer implementations;
// only nereus_trainer, which compiles worker/trainer/layers/ and
// worker/trainer/data/, has it.
#include "worker/trainer/layer_registry.h"

namespace nereus {

LayerRegistry DefaultLayerRegistry() {
  LayerRegistry registry;
  RegisterComputeLayers(&registry);
  RegisterDataLayers(&registry);
  return registry;
}

}  // namespace nereus

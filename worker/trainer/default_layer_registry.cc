// DefaultLayerRegistry lives apart from LayerRegistry so that the trainer core
// (nereus_trainer_core) builds and tests without the layer implementations;
// only nereus_trainer, which compiles worker/layers/ and worker/data/, has it.
#include "worker/trainer/layer_registry.h"

namespace nereus {

LayerRegistry DefaultLayerRegistry() {
  LayerRegistry registry;
#ifdef NEREUS_HAVE_COMPUTE_LAYERS
  RegisterComputeLayers(&registry);
#endif
#ifdef NEREUS_HAVE_DATA_LAYERS
  RegisterDataLayers(&registry);
#endif
  return registry;
}

}  // namespace nereus

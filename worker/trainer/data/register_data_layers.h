// The data layers' registration with a worker's shard: every layer that
// reads a source (Data, ImageData, HDF5Data, WindowData) reads this worker's
// shard of it in the TRAIN phase and the whole source in TEST (worker 0
// tests on the whole test set); HDF5Output in a TRAIN net of several
// workers writes a file per worker.
#ifndef NEREUS_WORKER_TRAINER_DATA_REGISTER_DATA_LAYERS_H_
#define NEREUS_WORKER_TRAINER_DATA_REGISTER_DATA_LAYERS_H_

#include "worker/trainer/data/data_layer_options.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {

// Registers every data layer; those of a TRAIN-phase net get `options`
// (a distributed worker passes its rank and the worker count), the others
// the default (everything). RegisterDataLayers(registry) (layer_registry.h)
// uses the default 0 of 1 for both.
void RegisterDataLayers(LayerRegistry* registry, const data::DataLayerOptions& options);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_REGISTER_DATA_LAYERS_H_

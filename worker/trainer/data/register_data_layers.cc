#include "worker/trainer/data/register_data_layers.h"

#include <memory>

#include "worker/trainer/data/data_layer.h"
#include "worker/trainer/data/dummy_data_layer.h"
#include "worker/trainer/data/hdf5_data_layer.h"
#include "worker/trainer/data/hdf5_output_layer.h"
#include "worker/trainer/data/image_data_layer.h"
#include "worker/trainer/data/memory_data_layer.h"
#include "worker/trainer/data/window_data_layer.h"

namespace nereus {
namespace {

// Registers `type` as layer L built with the options of its phase.
template <typename L>
void RegisterSharded(LayerRegistry* registry, const std::string& type, const data::DataLayerOptions& train) {
  registry->Register(type, [train](const caffe::LayerParameter& param) -> std::unique_ptr<Layer> {
    return std::make_unique<L>(param, param.phase() == caffe::TRAIN ? train : data::DataLayerOptions());
  });
}

}  // namespace

void RegisterDataLayers(LayerRegistry* registry, const data::DataLayerOptions& options) {
  RegisterSharded<data::DataLayer>(registry, "Data", options);
  RegisterSharded<data::ImageDataLayer>(registry, "ImageData", options);
  RegisterSharded<data::Hdf5DataLayer>(registry, "HDF5Data", options);
  RegisterSharded<data::Hdf5OutputLayer>(registry, "HDF5Output", options);
  RegisterSharded<data::WindowDataLayer>(registry, "WindowData", options);
  registry->Register<data::DummyDataLayer>("DummyData");
  registry->Register<data::MemoryDataLayer>("MemoryData");
}

void RegisterDataLayers(LayerRegistry* registry) { RegisterDataLayers(registry, data::DataLayerOptions()); }

}  // namespace nereus

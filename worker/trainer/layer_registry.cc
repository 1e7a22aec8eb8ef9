#include "worker/trainer/layer_registry.h"

#include <utility>

namespace nereus {

void LayerRegistry::Register(const std::string& type, Factory factory) {
  CHECK(!type.empty()) << "layer type must not be empty";
  CHECK(factory) << "null factory for layer type " << type;
  const bool inserted = factories_.emplace(type, std::move(factory)).second;
  CHECK(inserted) << "layer type " << type << " registered twice";
}

StatusOr<std::unique_ptr<Layer>> LayerRegistry::Create(const caffe::LayerParameter& param) const {
  auto it = factories_.find(param.type());
  if (it == factories_.end()) {
    std::string known;
    for (const auto& [type, factory] : factories_) {
      if (!known.empty()) known += ", ";
      known += type;
    }
    return InvalidArgumentError("unknown layer type \"" + param.type() + "\" in layer \"" + param.name() +
                                "\" (supported: " + known + ")");
  }
  std::unique_ptr<Layer> layer = it->second(param);
  if (layer == nullptr) {
    return InternalError("factory for layer type \"" + param.type() + "\" returned null");
  }
  return layer;
}

std::vector<std::string> LayerRegistry::Types() const {
  std::vector<std::string> types;
  for (const auto& [type, factory] : factories_) types.push_back(type);
  return types;
}

}  // namespace nereus

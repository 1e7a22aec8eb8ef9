#include "worker/client/tensor_registry.h"

#include <string>

namespace nereus {
namespace {

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

StatusOr<int> TensorRegistry::Register(const TensorSpec& spec) {
  MutexLock lock(&mu_);
  if (frozen_) return FailedPreconditionError("RegisterTensor(\"" + spec.name + "\") after Init");
  if (spec.shape.empty()) return InvalidArgumentError("tensor \"" + spec.name + "\" has no shape");
  uint64_t n = 1;
  for (int64_t d : spec.shape) {
    if (d <= 0) return InvalidArgumentError("tensor \"" + spec.name + "\" has a non-positive dimension");
    n *= static_cast<uint64_t>(d);
  }
  if ((spec.data == nullptr) != (spec.diff == nullptr))
    return InvalidArgumentError("tensor \"" + spec.name + "\": give both data and diff buffers, or neither");
  if (spec.factor_rows < 0 || (spec.factor_rows > 0 && (spec.factor_left == nullptr || spec.factor_right == nullptr)))
    return InvalidArgumentError("tensor \"" + spec.name + "\": sufficient factors need factor_rows > 0 and both " +
                                "factor_left and factor_right");
  if (spec.factor_rows > 0 && (spec.shape.size() != 2 || spec.data == nullptr))
    return InvalidArgumentError("tensor \"" + spec.name + "\": sufficient factors need a 2-D weight (rows x cols) " +
                                "registered with data and diff buffers");
  if (spec.factor_applier != nullptr && spec.factor_rows <= 0)
    return InvalidArgumentError("tensor \"" + spec.name + "\": a factor_applier without sufficient factors " +
                                "(factor_rows, factor_left, factor_right)");
  if (spec.factor_rows > 0) {
    for (const TensorSpec& other : specs_) {
      if (other.factor_rows > 0 && other.factor_applier != spec.factor_applier)
        return InvalidArgumentError("tensor \"" + spec.name + "\" has another factor_applier than tensor \"" +
                                    other.name + "\": every tensor with factors has the same one, or none");
    }
  }
  specs_.push_back(spec);
  elements_.push_back(n);
  return static_cast<int>(specs_.size()) - 1;
}

Status TensorRegistry::Freeze(size_t num_initial, uint64_t partition_bytes, int num_servers) {
  MutexLock lock(&mu_);
  if (frozen_) return FailedPreconditionError("Init called twice");
  if (num_initial != specs_.size())
    return InvalidArgumentError("Init got " + std::to_string(num_initial) + " initial values for " +
                                std::to_string(specs_.size()) + " registered tensors");
  ASSIGN_OR_RETURN(ShardMap map, ShardMap::Build(elements_, partition_bytes, num_servers));
  shards_ = std::make_unique<ShardMap>(std::move(map));
  frozen_ = true;
  return Status::OK();
}

bool TensorRegistry::frozen() const {
  MutexLock lock(&mu_);
  return frozen_;
}

Status TensorRegistry::CheckTensor(int tensor, const char* op) const {
  MutexLock lock(&mu_);
  if (!frozen_) return FailedPreconditionError(std::string(op) + " before Init");
  if (tensor < 0 || tensor >= static_cast<int>(specs_.size()))
    return NotFoundError("unknown tensor id " + std::to_string(tensor));
  return Status::OK();
}

std::vector<PartitionRef> TensorRegistry::Refs(int tensor) const {
  std::vector<PartitionRef> refs;
  for (const PartitionPlacement& c : shards_->partitions(tensor)) refs.push_back(PartitionRef{tensor, &c});
  return refs;
}

uint64_t TensorRegistry::Digest() const {
  uint64_t h = 1469598103934665603ull;
  for (const auto& t : specs_) {
    h = Fnv1a(h, t.name.data(), t.name.size());
    for (int64_t d : t.shape) h = Fnv1a(h, &d, sizeof(d));
    h = Fnv1a(h, &t.lr_mult, sizeof(t.lr_mult));
    h = Fnv1a(h, &t.decay_mult, sizeof(t.decay_mult));
  }
  return h == 0 ? 1 : h;
}

}  // namespace nereus

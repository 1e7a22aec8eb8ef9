// TensorRegistry: the tensors a worker declared and where their partitions live.
#ifndef NEREUS_WORKER_CLIENT_TENSOR_REGISTRY_H_
#define NEREUS_WORKER_CLIENT_TENSOR_REGISTRY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "common/net/shard_map.h"
#include "nereus/client.h"

namespace nereus {

// One partition of one tensor, as the servers store it.
struct PartitionRef {
  int tensor;
  const PartitionPlacement* placement;
};

// Owns the TensorSpecs (RegisterTensor) and, from Init on, the ShardMap.
// Before Freeze() it is written by user threads under its lock; Freeze()
// (Init) makes it read-only, and from then on any thread that has seen
// frozen() (or an OK CheckTensor) reads it without locking.
class TensorRegistry {
 public:
  // Validates and appends `spec`; returns its id. Fails after Freeze().
  StatusOr<int> Register(const TensorSpec& spec) NEREUS_LOCKS_EXCLUDED(mu_);

  // Init: checks that `num_initial` values came, one per tensor, and cuts the
  // tensors into partitions over the servers. Fails if called twice.
  Status Freeze(size_t num_initial, uint64_t partition_bytes, int num_servers) NEREUS_LOCKS_EXCLUDED(mu_);
  bool frozen() const NEREUS_LOCKS_EXCLUDED(mu_);

  // OK if `tensor` is a registered id and Init has run; `op` names the caller.
  Status CheckTensor(int tensor, const char* op) const NEREUS_LOCKS_EXCLUDED(mu_);

  // After Freeze():
  int size() const { return static_cast<int>(specs_.size()); }
  const TensorSpec& spec(int tensor) const { return specs_[tensor]; }
  uint64_t elements(int tensor) const { return elements_[tensor]; }
  const std::vector<PartitionPlacement>& partitions(int tensor) const { return shards_->partitions(tensor); }
  std::vector<PartitionRef> Refs(int tensor) const;
  uint64_t partition_bytes() const { return shards_->partition_bytes(); }
  // FNV-1a over names, shapes and multipliers: equal across workers that
  // registered the same model (checked by the "nereus.model" barrier).
  uint64_t Digest() const;

 private:
  mutable Mutex mu_;
  bool frozen_ NEREUS_GUARDED_BY(mu_) = false;
  // Written under mu_ until frozen_, then read-only and read without mu_
  // (size(), spec(), Digest()): not expressible as NEREUS_GUARDED_BY.
  std::vector<TensorSpec> specs_;
  std::vector<uint64_t> elements_;    // Likewise.
  std::unique_ptr<ShardMap> shards_;  // Set by Freeze, then read-only.
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_TENSOR_REGISTRY_H_

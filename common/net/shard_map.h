// ShardMap: how tensors are cut into partitions and spread over server shards.
#ifndef NEREUS_COMMON_NET_SHARD_MAP_H_
#define NEREUS_COMMON_NET_SHARD_MAP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/base/status.h"

namespace nereus {

struct PartitionPlacement {
  int tensor = 0;       // Index of the tensor in registration order.
  int partition = 0;    // Index of the partition within its tensor.
  uint64_t offset = 0;  // First element of the partition within the tensor.
  uint64_t length = 0;  // Elements in the partition (> 0).
  int server = 0;       // Server rank holding the partition.
};

// A pure function of (tensor sizes, partition size, number of servers): every node
// computes the same map. Immutable after construction; safe to share.
class ShardMap {
 public:
  // Cuts tensor t (tensor_elements[t] float32 elements) into partitions of at most
  // partition_bytes bytes and places each partition so that the bytes held by any two
  // servers differ by at most the size of one partition (largest partition first, onto
  // the least-loaded server, lowest rank on ties). Tensors of 0 elements get no
  // partitions. Fails if partition_bytes < 4 or num_servers < 1.
  static StatusOr<ShardMap> Build(const std::vector<uint64_t>& tensor_elements, uint64_t partition_bytes,
                                  int num_servers);

  int num_servers() const { return num_servers_; }
  int num_tensors() const { return static_cast<int>(by_tensor_.size()); }
  // The partitions of tensor t, by partition index.
  const std::vector<PartitionPlacement>& partitions(int tensor) const { return by_tensor_.at(tensor); }
  uint64_t tensor_elements(int tensor) const { return tensor_elements_.at(tensor); }
  // Bytes held by server s.
  uint64_t server_bytes(int server) const { return server_bytes_.at(server); }
  uint64_t partition_bytes() const { return partition_bytes_; }

 private:
  int num_servers_ = 0;
  uint64_t partition_bytes_ = 0;
  std::vector<uint64_t> tensor_elements_;
  std::vector<std::vector<PartitionPlacement>> by_tensor_;
  std::vector<uint64_t> server_bytes_;
};

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_SHARD_MAP_H_

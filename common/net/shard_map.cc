#include "common/net/shard_map.h"

#include <algorithm>
#include <string>

namespace nereus {

StatusOr<ShardMap> ShardMap::Build(const std::vector<uint64_t>& tensor_elements, uint64_t partition_bytes,
                                   int num_servers) {
  if (num_servers < 1) return InvalidArgumentError("num_servers must be >= 1, got " + std::to_string(num_servers));
  if (partition_bytes < sizeof(float))
    return InvalidArgumentError("partition_bytes must be >= 4, got " + std::to_string(partition_bytes));
  const uint64_t partition_elements = partition_bytes / sizeof(float);

  ShardMap map;
  map.num_servers_ = num_servers;
  map.partition_bytes_ = partition_elements * sizeof(float);
  map.tensor_elements_ = tensor_elements;
  map.by_tensor_.resize(tensor_elements.size());
  map.server_bytes_.assign(num_servers, 0);

  std::vector<PartitionPlacement*> order;
  for (size_t t = 0; t < tensor_elements.size(); ++t) {
    const uint64_t n = tensor_elements[t];
    auto& partitions = map.by_tensor_[t];
    partitions.reserve((n + partition_elements - 1) / partition_elements);
    for (uint64_t off = 0; off < n; off += partition_elements) {
      PartitionPlacement c;
      c.tensor = static_cast<int>(t);
      c.partition = static_cast<int>(partitions.size());
      c.offset = off;
      c.length = std::min(partition_elements, n - off);
      partitions.push_back(c);
    }
  }
  for (auto& partitions : map.by_tensor_)
    for (auto& c : partitions) order.push_back(&c);
  // Largest first; ties keep registration order so the result is unique.
  std::stable_sort(order.begin(), order.end(),
                   [](const PartitionPlacement* a, const PartitionPlacement* b) { return a->length > b->length; });
  for (PartitionPlacement* c : order) {
    int best = 0;
    for (int s = 1; s < num_servers; ++s)
      if (map.server_bytes_[s] < map.server_bytes_[best]) best = s;
    c->server = best;
    map.server_bytes_[best] += c->length * sizeof(float);
  }
  return map;
}

}  // namespace nereus

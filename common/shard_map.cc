#include "common/shard_map.h"

#include <algorithm>
#include <string>

namespace nereus {

StatusOr<ShardMap> ShardMap::Build(const std::vector<uint64_t>& tensor_elements, uint64_t chunk_bytes,
                                   int num_servers) {
  if (num_servers < 1) return InvalidArgumentError("num_servers must be >= 1, got " + std::to_string(num_servers));
  if (chunk_bytes < sizeof(float))
    return InvalidArgumentError("chunk_bytes must be >= 4, got " + std::to_string(chunk_bytes));
  const uint64_t chunk_elements = chunk_bytes / sizeof(float);

  ShardMap map;
  map.num_servers_ = num_servers;
  map.chunk_bytes_ = chunk_elements * sizeof(float);
  map.tensor_elements_ = tensor_elements;
  map.by_tensor_.resize(tensor_elements.size());
  map.server_bytes_.assign(num_servers, 0);

  std::vector<ChunkPlacement*> order;
  for (size_t t = 0; t < tensor_elements.size(); ++t) {
    const uint64_t n = tensor_elements[t];
    auto& chunks = map.by_tensor_[t];
    chunks.reserve((n + chunk_elements - 1) / chunk_elements);
    for (uint64_t off = 0; off < n; off += chunk_elements) {
      ChunkPlacement c;
      c.tensor = static_cast<int>(t);
      c.chunk = static_cast<int>(chunks.size());
      c.offset = off;
      c.length = std::min(chunk_elements, n - off);
      chunks.push_back(c);
    }
  }
  for (auto& chunks : map.by_tensor_)
    for (auto& c : chunks) order.push_back(&c);
  // Largest first; ties keep registration order so the result is unique.
  std::stable_sort(order.begin(), order.end(),
                   [](const ChunkPlacement* a, const ChunkPlacement* b) { return a->length > b->length; });
  for (ChunkPlacement* c : order) {
    int best = 0;
    for (int s = 1; s < num_servers; ++s)
      if (map.server_bytes_[s] < map.server_bytes_[best]) best = s;
    c->server = best;
    map.server_bytes_[best] += c->length * sizeof(float);
  }
  return map;
}

}  // namespace nereus

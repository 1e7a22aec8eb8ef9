// DataLayerOptions: what the trainer tells every data layer that reads a
// source (Data, ImageData, HDF5Data, WindowData; HDF5Output's file name):
// which shard of it this worker reads, and how far a resumed job had read.
#ifndef NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_OPTIONS_H_
#define NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_OPTIONS_H_

#include <cstdint>
#include <string>

namespace nereus {
namespace data {

struct DataLayerOptions {
  // This worker's index among num_shards readers; record i goes to worker
  // i mod num_shards. Requires 0 <= shard_index < num_shards.
  int shard_index = 0;
  int num_shards = 1;
  // A resumed job: batches of this shard the run before already consumed
  // (iterations x iter_size); SetUp skips their records (modulo the shard's
  // size, as every pass reads the shard in the same order), after rand_skip.
  std::uint64_t skip_batches = 0;

  bool valid() const { return num_shards >= 1 && shard_index >= 0 && shard_index < num_shards; }
  // "shard 1 of 2".
  std::string ShardName() const { return "shard " + std::to_string(shard_index) + " of " + std::to_string(num_shards); }
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_OPTIONS_H_

// DataLayer: Caffe's "Data" layer. Reads Datum records from an LMDB or a
// LevelDB (data_param.source, data_param.backend) in key order, wrapping
// around at the end, decodes encoded records (Datum.encoded: Caffe's
// convert_imageset --encoded; transform_param.force_color / force_gray, as
// Caffe's DataTransformer), applies transform_param (DataTransformer) and
// fills top[0] with batch_size x C x H x W floats and, when a second top is
// given, top[1] with the batch_size labels. Prefetching, the GPU path and
// the reporting of bad records are PrefetchingDataLayer's.
//
// backend: Caffe's default is LEVELDB. Nereus takes the backend the source
// directory holds when the field is absent (data.mdb: LMDB, CURRENT:
// LevelDB), and refuses a source that is not what an explicit backend says.
// LevelDB lets one handle open a database at a time: two layers (or two
// processes, such as a job's workers on one machine) reading one LevelDB
// fail, naming it; an LMDB has no such limit.
//
// Data parallelism: with num_shards = P and shard_index = k, this layer reads
// only the records at positions i (0-based, in key order, counted afresh each
// pass over the database) with i mod P == k, so P workers read disjoint parts
// that together cover the database. data_param.batch_size is per worker. The
// trainer passes the shard through DataLayerOptions (RegisterDataLayers with
// options, or set_options before SetUp); the default 0/1 reads everything.
//
// rand_skip: at set-up the layer skips rng() % rand_skip of its own records,
// so shards stay disjoint.
//
// Errors: bad configuration, a missing, truncated or locked database, an
// empty shard or a first record that cannot be used are Status errors from
// SetUp naming the layer. A record the prefetch thread cannot use (not a
// Datum, another shape, a data size that does not match its shape, an image
// that does not decode, a read error) is reported by the Forward that needs
// it, and a label a consumer cannot take by the Forward of its batch. Every
// message names the database and the record, e.g.
//   layer mnist (Data): LMDB database 'data/train_lmdb', record 2 (key
//   '00000002'): not a Datum (3 bytes that do not parse)
//
// Not thread-safe (like every Layer); the prefetch thread is internal.
#ifndef NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_layer_options.h"
#include "worker/trainer/data/data_transformer.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/image_io.h"
#include "worker/trainer/data/prefetching_data_layer.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace data {

class DataLayer : public PrefetchingDataLayer {
 public:
  explicit DataLayer(const caffe::LayerParameter& param, DataLayerOptions options = {});
  // Stops and joins the prefetch thread.
  ~DataLayer() override;

  // Only before SetUp.
  void set_options(const DataLayerOptions& options);
  const DataLayerOptions& options() const { return options_; }

  const char* type() const override { return "Data"; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  // Records in this worker's shard (per pass over the database), once set
  // up; unknown (nullopt) for a LevelDB outside a resumed job, since
  // counting a LevelDB reads all of it.
  std::optional<std::size_t> shard_size() const { return shard_size_; }

 protected:
  Status DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) override;
  Status FillBatch(Batch* batch) override;
  // "LMDB database '<path>', record <index> (key '<key>')".
  std::string Where(std::uint64_t record, const std::string& key) const override;

 private:
  // Validates data_param; returns the error naming the bad field.
  Status CheckParam() const;
  // Opens data_param.source with the backend it names or holds.
  Status OpenSource();
  // Whether the database holds a record for this shard (more than
  // shard_index records): reads at most shard_index + 1 records. Sets
  // *count to the number of records when it is not.
  StatusOr<bool> ShardHasRecords(std::size_t* count) const;
  // Reads this shard's next record into *datum (prefetch thread and SetUp),
  // decoded when it was encoded; *index is its position in key order. With
  // datum == nullptr, only moves the cursor onto this shard's next record
  // without consuming it.
  Status NextRecord(caffe::Datum* datum, std::string* key, std::uint64_t* index);
  // Reads past `count` records (rand_skip, a resumed job's batches); an
  // error names the layer.
  Status SkipRecords(std::uint64_t count);

  DataLayerOptions options_;
  int batch_size_ = 0;
  bool output_labels_ = false;
  ImageColor decode_color_ = ImageColor::kNative;
  std::vector<int> datum_shape_;  // {1, C, H, W} after the transform.
  std::string first_shape_;       // "CxHxW" of the first record, before the transform.
  std::optional<std::size_t> shard_size_;

  std::unique_ptr<DataTransformer> transformer_;
  std::unique_ptr<Database> db_;
  // Used by SetUp, then only by the prefetch thread.
  std::unique_ptr<DbCursor> cursor_;
  std::uint64_t position_ = 0;  // Index of cursor_'s record in the current pass.
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_H_

// Hdf5DataLayer: Caffe's "HDF5Data" layer. hdf5_data_param.source is a text
// file naming HDF5 files (whitespace-separated, as Caffe reads it); each
// top reads the dataset of its own name from each file, N x (item shape),
// float or integer (converted to float), and a batch is batch_size rows of
// every top, the same rows across tops. The files are read in list order,
// all of a file's rows before the next file's, wrapping around at the end;
// with shuffle, the order of the files is shuffled at set-up and at every
// pass, and the order of the rows within each file every time it is read
// (Caffe's semantics: files are never interleaved). No transform_param
// (Caffe refuses it too).
//
// Set-up opens every listed file once and checks its datasets: every top's
// dataset exists, holds numbers, has the rank and item shape of the first
// file's, and all of a file's datasets have the same number of rows. A file
// is read whole (as Caffe does) by the prefetch thread when its rows are
// needed, so loading overlaps training; on a GPU the batches go to the
// device as the Data layer's do (PrefetchingDataLayer).
//
// Data parallelism: worker k of P reads the rows whose index i, counted
// over all files in list order, has i mod P == k; shuffling permutes only
// this worker's rows and the order of its files.
//
// The HDF5 library must be thread-safe (Debian's is): the prefetch thread
// reads while the training thread may write snapshots.
//
// Errors name the file, the dataset and, for a row, its index: a missing
// file or dataset, a dataset of the wrong rank, type or shape is a SetUp
// error; a file that changed since (or cannot be read) is reported by the
// Forward that needs it.
//
// Not thread-safe (like every Layer); the prefetch thread is internal.
#ifndef NEREUS_WORKER_TRAINER_DATA_HDF5_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_HDF5_DATA_LAYER_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_layer_options.h"
#include "worker/trainer/data/prefetching_data_layer.h"

namespace nereus {
namespace data {

class Hdf5DataLayer : public PrefetchingDataLayer {
 public:
  explicit Hdf5DataLayer(const caffe::LayerParameter& param, DataLayerOptions options = {})
      : PrefetchingDataLayer(param), options_(options) {}
  ~Hdf5DataLayer() override { StopPrefetch(); }

  const char* type() const override { return "HDF5Data"; }
  int MinTopBlobs() const override { return 1; }

  // This worker's rows over all files, once set up.
  std::uint64_t shard_size() const { return shard_size_; }

 protected:
  Status DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) override;
  Status FillBatch(Batch* batch) override;
  // "HDF5 file '<path>', row <row>".
  std::string Where(std::uint64_t row, const std::string& path) const override;

 private:
  struct File {
    std::string path;
    std::uint64_t rows = 0;
    std::uint64_t first_row = 0;  // Of this shard, within the file.
    std::uint64_t shard_rows = 0;
  };

  // The rows (dimension 0) of `path`'s datasets, checking them against
  // item_shapes_ (set from the first file when empty).
  StatusOr<std::uint64_t> Describe(const std::string& path);
  // Reads file `index` whole into loaded_ and draws its row order.
  Status Load(std::size_t index);
  // This shard's rows of the loaded file, shuffled when asked.
  void DrawRowOrder();
  // Moves to the next row of this shard (the next file at the end of one).
  void Advance();

  DataLayerOptions options_;
  int batch_size_ = 0;
  std::vector<std::string> tops_;              // Dataset names.
  std::vector<std::vector<int>> item_shapes_;  // Per top, the dimensions after the first.
  std::vector<std::size_t> item_counts_;       // Per top, the values per row.
  std::vector<File> files_;
  std::uint64_t shard_size_ = 0;
  // The prefetch thread's state (SetUp's before it starts).
  std::vector<std::size_t> file_order_;  // Files with rows for this shard.
  std::size_t order_pos_ = 0;
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  std::size_t loaded_ = kNone;              // Index in files_.
  std::vector<std::vector<float>> values_;  // Per top, the loaded file's dataset.
  std::vector<std::uint64_t> row_order_;
  std::size_t row_pos_ = 0;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_HDF5_DATA_LAYER_H_

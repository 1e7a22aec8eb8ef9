#include "worker/trainer/data/hdf5_data_layer.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <utility>

#include "worker/trainer/hdf5_handle.h"

namespace nereus {
namespace data {
namespace {

// "rows x 3 x 8"; `rows` as given ("N" for any).
std::string ShapeString(const std::string& rows, const std::vector<int>& item) {
  std::string s = rows;
  for (int d : item) s += " x " + std::to_string(d);
  return s;
}

const char* ClassName(H5T_class_t cls) {
  switch (cls) {
    case H5T_STRING:
      return "strings";
    case H5T_COMPOUND:
      return "compound records";
    case H5T_TIME:
      return "times";
    case H5T_BITFIELD:
      return "bit fields";
    case H5T_OPAQUE:
      return "opaque data";
    case H5T_REFERENCE:
      return "references";
    case H5T_ENUM:
      return "enums";
    case H5T_VLEN:
      return "variable-length data";
    case H5T_ARRAY:
      return "arrays";
    default:
      return "values of an unknown class";
  }
}

Hdf5Handle OpenForReading(const std::string& path) {
  return Hdf5Handle(Hdf5Quiet([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }), H5Fclose);
}

Status CannotOpen(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
    return DataLossError("HDF5 file '" + path + "' is not an HDF5 file");
  }
  return NotFoundError("cannot open HDF5 file '" + path + "': " + std::strerror(errno));
}

}  // namespace

std::string Hdf5DataLayer::Where(std::uint64_t row, const std::string& path) const {
  return "HDF5 file '" + path + "', row " + std::to_string(row);
}

StatusOr<std::uint64_t> Hdf5DataLayer::Describe(const std::string& path) {
  Hdf5Handle file = OpenForReading(path);
  if (!file.ok()) return CannotOpen(path);
  const bool first = item_shapes_.empty();
  std::uint64_t rows = 0;
  for (std::size_t t = 0; t < tops_.size(); ++t) {
    const std::string where = "HDF5 file '" + path + "', dataset '" + tops_[t] + "'";
    if (Hdf5Quiet([&] { return H5LTfind_dataset(file.get(), tops_[t].c_str()); }) <= 0) {
      return InvalidArgumentError("HDF5 file '" + path + "' has no dataset '" + tops_[t] +
                                  "' (each top of an HDF5Data layer reads the dataset of its name)");
    }
    int rank = 0;
    if (Hdf5Quiet([&] { return H5LTget_dataset_ndims(file.get(), tops_[t].c_str(), &rank); }) < 0) {
      return DataLossError(where + ": cannot read its rank");
    }
    if (rank < 1) return InvalidArgumentError(where + " is a scalar; it must have rows (rank 1 or more)");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5T_class_t cls = H5T_NO_CLASS;
    std::size_t type_size = 0;
    if (Hdf5Quiet([&] { return H5LTget_dataset_info(file.get(), tops_[t].c_str(), dims.data(), &cls, &type_size); }) <
        0) {
      return DataLossError(where + ": cannot read its shape");
    }
    if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
      return InvalidArgumentError(where + " holds " + ClassName(cls) +
                                  "; HDF5Data reads floating-point or integer datasets");
    }
    std::vector<int> item;
    for (int d = 1; d < rank; ++d) {
      if (dims[d] > static_cast<hsize_t>(INT_MAX)) return InvalidArgumentError(where + ": a dimension is too large");
      item.push_back(static_cast<int>(dims[d]));
    }
    if (first) {
      item_shapes_.push_back(item);
    } else if (item.size() != item_shapes_[t].size()) {
      return InvalidArgumentError(where + " has rank " + std::to_string(rank) + " (" +
                                  ShapeString(std::to_string(dims[0]), item) + "); the first file's has rank " +
                                  std::to_string(item_shapes_[t].size() + 1) + " (" +
                                  ShapeString("N", item_shapes_[t]) + ")");
    } else if (item != item_shapes_[t]) {
      return InvalidArgumentError(where + " is " + ShapeString(std::to_string(dims[0]), item) +
                                  "; the first file's is " + ShapeString("N", item_shapes_[t]));
    }
    if (t == 0) {
      rows = dims[0];
    } else if (dims[0] != rows) {
      return InvalidArgumentError(where + " has " + std::to_string(dims[0]) + " rows but dataset '" + tops_[0] +
                                  "' has " + std::to_string(rows) + "; every dataset needs one row per item");
    }
  }
  return rows;
}

Status Hdf5DataLayer::DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) {
  const caffe::HDF5DataParameter& p = layer_param_.hdf5_data_param();
  if (!layer_param_.has_hdf5_data_param() || p.source().empty()) {
    return LayerError("hdf5_data_param.source is required (a text file listing HDF5 files)");
  }
  if (p.batch_size() == 0) return LayerError("hdf5_data_param.batch_size must be positive");
  if (layer_param_.has_transform_param()) return LayerError("HDF5Data does not transform data (no transform_param)");
  if (!options_.valid()) return LayerError("bad sharding: " + options_.ShardName());
  // The prefetch thread reads files while the training thread may write
  // HDF5 snapshots or an HDF5Output file: the library must take its own
  // lock (Debian's libhdf5 does).
  hbool_t threadsafe = false;
  if (H5is_library_threadsafe(&threadsafe) < 0 || !threadsafe) {
    return LayerError("this HDF5 library is not thread-safe, and HDF5Data reads on its prefetch thread");
  }
  batch_size_ = static_cast<int>(p.batch_size());
  tops_.assign(layer_param_.top().begin(), layer_param_.top().end());

  std::ifstream list(p.source());
  if (!list) return LayerError("cannot read HDF5 file list '" + p.source() + "': " + std::strerror(errno));
  std::vector<std::string> paths;
  for (std::string path; list >> path;) paths.push_back(path);
  if (paths.empty()) return LayerError("HDF5 file list '" + p.source() + "' names no file");

  const auto shards = static_cast<std::uint64_t>(options_.num_shards);
  const auto shard = static_cast<std::uint64_t>(options_.shard_index);
  std::uint64_t offset = 0;
  for (const std::string& path : paths) {
    auto rows = Describe(path);
    if (!rows.ok()) return LayerError(rows.status().message() + " (listed in '" + p.source() + "')");
    File file;
    file.path = path;
    file.rows = *rows;
    // The first global index at or after `offset` that is this shard's.
    file.first_row = (shard + shards - offset % shards) % shards;
    file.shard_rows = file.rows > file.first_row ? (file.rows - file.first_row + shards - 1) / shards : 0;
    if (file.shard_rows > 0) file_order_.push_back(files_.size());
    shard_size_ += file.shard_rows;
    offset += file.rows;
    files_.push_back(std::move(file));
  }
  if (shard_size_ == 0) {
    return LayerError("the HDF5 files of '" + p.source() + "' hold " + std::to_string(offset) + " rows, none for " +
                      options_.ShardName());
  }
  for (const auto& item : item_shapes_) {
    std::size_t count = 1;
    for (int d : item) count *= static_cast<std::size_t>(d);
    item_counts_.push_back(count);
  }
  if (p.shuffle()) std::shuffle(file_order_.begin(), file_order_.end(), *prefetch_rng());
  order_pos_ = 0;
  row_pos_ = 0;
  if (options_.skip_batches > 0) {
    std::uint64_t skip = options_.skip_batches * static_cast<std::uint64_t>(batch_size_) % shard_size_;
    LOG(INFO) << "layer " << layer_param_.name() << ": resuming after " << options_.skip_batches
              << " batches; skipping " << skip << " rows of its shard";
    while (skip >= files_[file_order_[order_pos_]].shard_rows) {
      skip -= files_[file_order_[order_pos_]].shard_rows;
      ++order_pos_;
    }
    row_pos_ = static_cast<std::size_t>(skip);
  }
  for (std::size_t t = 0; t < tops_.size(); ++t) {
    std::vector<int> shape{batch_size_};
    shape.insert(shape.end(), item_shapes_[t].begin(), item_shapes_[t].end());
    top_shapes->push_back(shape);
  }
  LOG(INFO) << "layer " << layer_param_.name() << ": " << files_.size() << " HDF5 file(s) of '" << p.source() << "', "
            << options_.ShardName() << " (" << shard_size_ << " of " << offset << " rows"
            << (p.shuffle() ? ", shuffled" : "") << ")";
  return Status::OK();
}

Status Hdf5DataLayer::Load(std::size_t index) {
  const File& file = files_[index];
  // Checked again: the file may have changed since set-up.
  auto rows = Describe(file.path);
  if (!rows.ok()) return Status(rows.status().code(), rows.status().message() + " (read again after set-up)");
  if (*rows != file.rows) {
    return DataLossError("HDF5 file '" + file.path + "' has " + std::to_string(*rows) + " rows, " +
                         std::to_string(file.rows) + " at set-up: it changed while training");
  }
  Hdf5Handle h = OpenForReading(file.path);
  if (!h.ok()) return CannotOpen(file.path);
  values_.resize(tops_.size());
  for (std::size_t t = 0; t < tops_.size(); ++t) {
    values_[t].resize(static_cast<std::size_t>(file.rows) * item_counts_[t]);
    if (Hdf5Quiet([&] { return H5LTread_dataset_float(h.get(), tops_[t].c_str(), values_[t].data()); }) < 0) {
      return DataLossError("HDF5 file '" + file.path + "', dataset '" + tops_[t] + "': cannot read it");
    }
  }
  loaded_ = index;
  DrawRowOrder();
  return Status::OK();
}

void Hdf5DataLayer::DrawRowOrder() {
  const File& file = files_[loaded_];
  const auto shards = static_cast<std::uint64_t>(options_.num_shards);
  row_order_.clear();
  for (std::uint64_t r = file.first_row; r < file.rows; r += shards) row_order_.push_back(r);
  if (layer_param_.hdf5_data_param().shuffle()) std::shuffle(row_order_.begin(), row_order_.end(), *prefetch_rng());
}

void Hdf5DataLayer::Advance() {
  if (++row_pos_ < files_[file_order_[order_pos_]].shard_rows) return;
  row_pos_ = 0;
  if (++order_pos_ == file_order_.size()) {
    order_pos_ = 0;
    if (layer_param_.hdf5_data_param().shuffle()) {
      std::shuffle(file_order_.begin(), file_order_.end(), *prefetch_rng());
    }
  }
  // The same file again (one file, or a shuffle that put it first): a new
  // pass over its rows.
  if (file_order_[order_pos_] == loaded_) DrawRowOrder();
}

Status Hdf5DataLayer::FillBatch(Batch* batch) {
  for (int i = 0; i < batch_size_; ++i) {
    if (stopping()) return Status::OK();
    if (loaded_ != file_order_[order_pos_]) RETURN_IF_ERROR(Load(file_order_[order_pos_]));
    const std::uint64_t row = row_order_[row_pos_];
    for (std::size_t t = 0; t < tops_.size(); ++t) {
      const std::size_t n = item_counts_[t];
      const float* from = values_[t].data() + static_cast<std::size_t>(row) * n;
      std::copy(from, from + n, batch->tops[t].data() + static_cast<std::size_t>(i) * n);
    }
    batch->records[i] = row;
    batch->keys[i] = files_[loaded_].path;
    Advance();
  }
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

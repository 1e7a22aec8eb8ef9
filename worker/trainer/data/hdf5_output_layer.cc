#include "worker/trainer/data/hdf5_output_layer.h"

#include <hdf5.h>

#include <algorithm>
#include <utility>

#include "worker/trainer/hdf5_handle.h"

namespace nereus {
namespace data {
namespace {

// The shape Caffe gives a bottom in the file: its legacy 4-D shape (num,
// channels, height, width; missing axes 1), or its own beyond 4 axes.
std::vector<hsize_t> FileShape(const Blob& blob) {
  std::vector<hsize_t> dims;
  if (blob.num_axes() <= 4) {
    for (int a = 0; a < 4; ++a) dims.push_back(a < blob.num_axes() ? static_cast<hsize_t>(blob.shape(a)) : 1);
  } else {
    for (int d : blob.shape()) dims.push_back(static_cast<hsize_t>(d));
  }
  return dims;
}

std::string DimsString(const std::vector<hsize_t>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// "out.h5" -> "out.rank1.h5"; "out" -> "out.rank1".
std::string PerWorkerName(const std::string& name, int rank) {
  const std::size_t slash = name.rfind('/');
  const std::size_t dot = name.rfind('.');
  const std::string tag = ".rank" + std::to_string(rank);
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0 ||
      (slash != std::string::npos && dot == slash + 1)) {
    return name + tag;
  }
  return name.substr(0, dot) + tag + name.substr(dot);
}

}  // namespace

struct Hdf5OutputLayer::File {
  Hdf5Handle file;
  Hdf5Handle datasets[2];
  std::vector<hsize_t> dims[2];  // Current extent of each dataset.
};

Hdf5OutputLayer::Hdf5OutputLayer(const caffe::LayerParameter& param, DataLayerOptions options)
    : Layer(param), options_(options) {}

Hdf5OutputLayer::~Hdf5OutputLayer() {
  if (file_ == nullptr) return;
  for (Hdf5Handle& d : file_->datasets) d.Reset();
  if (file_->file.ok() && Hdf5Quiet([&] { return file_->file.Reset(); }) < 0) {
    LOG(ERROR) << "layer " << layer_param_.name() << " (HDF5Output): closing '" << file_name_ << "' failed";
  }
}

Status Hdf5OutputLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::HDF5OutputParameter& p = layer_param_.hdf5_output_param();
  if (!layer_param_.has_hdf5_output_param() || p.file_name().empty()) {
    return LayerError("hdf5_output_param.file_name is required");
  }
  if (!options_.valid()) return LayerError("bad sharding: " + options_.ShardName());
  file_name_ = options_.num_shards > 1 ? PerWorkerName(p.file_name(), options_.shard_index) : p.file_name();
  auto file = std::make_unique<File>();
  file->file = Hdf5Handle(
      Hdf5Quiet([&] { return H5Fcreate(file_name_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }), H5Fclose);
  if (!file->file.ok()) return LayerError("cannot create HDF5 file '" + file_name_ + "'");
  file_ = std::move(file);
  LOG(INFO) << "layer " << layer_param_.name() << ": writing " << bottom.size() << " bottoms to '" << file_name_ << "'";
  return Status::OK();
}

Status Hdf5OutputLayer::Append(const std::vector<Blob*>& bottom) {
  static const char* const kNames[2] = {"data", "label"};  // Caffe's HDF5_DATA_DATASET_NAME, _LABEL_NAME.
  if (bottom[0]->num_axes() == 0 || bottom[1]->num_axes() == 0) {
    return InvalidArgumentError("HDF5 file '" + file_name_ + "': a bottom is a scalar; each needs rows");
  }
  if (bottom[0]->shape(0) != bottom[1]->shape(0)) {
    return InvalidArgumentError("HDF5 file '" + file_name_ + "': the data bottom has " +
                                std::to_string(bottom[0]->shape(0)) + " rows and the label bottom " +
                                std::to_string(bottom[1]->shape(0)) + "; they must be the same");
  }
  for (int b = 0; b < 2; ++b) {
    const Blob& blob = *bottom[b];
    std::vector<hsize_t> add = FileShape(blob);
    const std::string where = "HDF5 file '" + file_name_ + "', dataset '" + kNames[b] + "'";
    std::vector<hsize_t>& dims = file_->dims[b];
    Hdf5Handle& dataset = file_->datasets[b];
    if (!dataset.ok()) {
      // Extendible along the rows, in chunks of one Forward's rows.
      std::vector<hsize_t> max = add;
      max[0] = H5S_UNLIMITED;
      std::vector<hsize_t> zero = add;
      zero[0] = 0;
      std::vector<hsize_t> chunk = add;
      chunk[0] = std::max<hsize_t>(1, add[0]);
      Hdf5Handle space(H5Screate_simple(static_cast<int>(add.size()), zero.data(), max.data()), H5Sclose);
      Hdf5Handle props(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      if (!space.ok() || !props.ok() || H5Pset_chunk(props.get(), static_cast<int>(chunk.size()), chunk.data()) < 0) {
        return InternalError(where + ": cannot describe the dataset");
      }
      dataset = Hdf5Handle(Hdf5Quiet([&] {
                             return H5Dcreate2(file_->file.get(), kNames[b], H5T_NATIVE_FLOAT, space.get(), H5P_DEFAULT,
                                               props.get(), H5P_DEFAULT);
                           }),
                           H5Dclose);
      if (!dataset.ok()) return UnavailableError("cannot create " + where);
      dims = zero;
    } else if (add.size() != dims.size() || !std::equal(add.begin() + 1, add.end(), dims.begin() + 1)) {
      std::vector<hsize_t> row(dims.begin() + 1, dims.end());
      std::vector<hsize_t> got(add.begin() + 1, add.end());
      return InvalidArgumentError(where + ": rows of " + DimsString(got) + "; the first Forward's were " +
                                  DimsString(row));
    }
    if (add[0] == 0) continue;
    std::vector<hsize_t> grown = dims;
    grown[0] += add[0];
    std::vector<hsize_t> start(dims.size(), 0);
    start[0] = dims[0];
    herr_t st = Hdf5Quiet([&] { return H5Dset_extent(dataset.get(), grown.data()); });
    Hdf5Handle file_space(st < 0 ? -1 : H5Dget_space(dataset.get()), H5Sclose);
    Hdf5Handle memory(H5Screate_simple(static_cast<int>(add.size()), add.data(), nullptr), H5Sclose);
    if (st < 0 || !file_space.ok() || !memory.ok() ||
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, add.data(), nullptr) < 0 ||
        Hdf5Quiet([&] {
          return H5Dwrite(dataset.get(), H5T_NATIVE_FLOAT, memory.get(), file_space.get(), H5P_DEFAULT,
                          blob.cpu_data());
        }) < 0) {
      return UnavailableError("cannot write " + std::to_string(add[0]) + " rows to " + where);
    }
    dims = grown;
  }
  if (Hdf5Quiet([&] { return H5Fflush(file_->file.get(), H5F_SCOPE_LOCAL); }) < 0) {
    return UnavailableError("cannot flush HDF5 file '" + file_name_ + "'");
  }
  rows_ += bottom[0]->shape(0);
  return Status::OK();
}

void Hdf5OutputLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const Status s = Append(bottom);
  if (!s.ok()) set_forward_error(s.code(), s.message());
}

}  // namespace data
}  // namespace nereus

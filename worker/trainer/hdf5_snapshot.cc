#include "worker/trainer/hdf5_snapshot.h"

#include <hdf5.h>
#include <hdf5_hl.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "worker/trainer/hdf5_handle.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace {

// Why HDF5 could not open `path` for reading: it is not an HDF5 file (it
// exists), or it cannot be opened at all.
Status OpenFailure(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
    return DataLossError(path + ": not an HDF5 file");
  }
  return NotFoundError("cannot open " + path);
}

Status WriteFloats(hid_t loc, const std::string& name, const std::vector<int>& shape, const float* data,
                   const std::string& where) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  const herr_t st = Hdf5Quiet(
      [&] { return H5LTmake_dataset_float(loc, name.c_str(), static_cast<int>(dims.size()), dims.data(), data); });
  if (st < 0) return UnavailableError("cannot write HDF5 dataset " + where);
  return Status::OK();
}

// Reads a float dataset of any float type into `shape` and `values`.
Status ReadFloats(hid_t loc, const std::string& name, std::vector<int>* shape, std::vector<float>* values,
                  const std::string& where) {
  int rank = 0;
  if (Hdf5Quiet([&] { return H5LTget_dataset_ndims(loc, name.c_str(), &rank); }) < 0)
    return DataLossError("no dataset " + where);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5T_class_t cls = H5T_NO_CLASS;
  size_t type_size = 0;
  if (Hdf5Quiet([&] { return H5LTget_dataset_info(loc, name.c_str(), dims.data(), &cls, &type_size); }) < 0)
    return DataLossError("cannot read the shape of dataset " + where);
  if (cls != H5T_FLOAT) return DataLossError("dataset " + where + " does not hold floating-point numbers");
  shape->clear();
  size_t count = 1;
  for (hsize_t d : dims) {
    // A blob holds at most INT_MAX values.
    if (d > static_cast<hsize_t>(INT_MAX) || (d > 0 && count > static_cast<size_t>(INT_MAX) / d)) {
      return DataLossError("dataset " + where + " is larger than a blob can hold (a dimension of " +
                           std::to_string(static_cast<unsigned long long>(d)) + ")");
    }
    shape->push_back(static_cast<int>(d));
    count *= static_cast<size_t>(d);
  }
  values->resize(count);
  if (Hdf5Quiet([&] { return H5LTread_dataset_float(loc, name.c_str(), values->data()); }) < 0)
    return DataLossError("cannot read dataset " + where);
  return Status::OK();
}

Status ReadInt(hid_t loc, const std::string& name, int* value, const std::string& where) {
  int rank = -1;
  if (Hdf5Quiet([&] { return H5LTget_dataset_ndims(loc, name.c_str(), &rank); }) < 0 || rank != 0)
    return DataLossError("no scalar dataset " + where);
  if (Hdf5Quiet([&] { return H5LTread_dataset_int(loc, name.c_str(), value); }) < 0)
    return DataLossError("cannot read dataset " + where);
  return Status::OK();
}

Status ReadString(hid_t loc, const std::string& name, std::string* value, const std::string& where) {
  H5T_class_t cls = H5T_NO_CLASS;
  size_t size = 0;
  hsize_t dims[H5S_MAX_RANK];
  if (Hdf5Quiet([&] { return H5LTget_dataset_info(loc, name.c_str(), dims, &cls, &size); }) < 0 || cls != H5T_STRING)
    return DataLossError("no string dataset " + where);
  std::vector<char> buf(size + 1, '\0');
  if (Hdf5Quiet([&] { return H5LTread_dataset_string(loc, name.c_str(), buf.data()); }) < 0)
    return DataLossError("cannot read dataset " + where);
  *value = buf.data();
  return Status::OK();
}

bool LinkExists(hid_t loc, const std::string& name) {
  return Hdf5Quiet([&] { return H5Lexists(loc, name.c_str(), H5P_DEFAULT); }) > 0;
}

// The names of the links of a group, in HDF5's name order (as Caffe lists them).
StatusOr<std::vector<std::string>> LinkNames(hid_t group, const std::string& where) {
  H5G_info_t info;
  if (Hdf5Quiet([&] { return H5Gget_info(group, &info); }) < 0) return DataLossError("cannot list group " + where);
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size = Hdf5Quiet(
        [&] { return H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT); });
    if (size < 0) return DataLossError("cannot list group " + where);
    std::vector<char> buf(static_cast<size_t>(size) + 1, '\0');
    Hdf5Quiet([&] {
      return H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, buf.data(), buf.size(), H5P_DEFAULT);
    });
    names.emplace_back(buf.data());
  }
  return names;
}

// Writes with `write` into path.tmp, then renames it to path.
template <typename F>
Status WriteAtomically(const std::string& path, F write) {
  const std::string tmp = path + ".tmp";
  {
    Hdf5Handle file(Hdf5Quiet([&] { return H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }),
                    H5Fclose);
    if (!file.ok()) return UnavailableError("cannot create HDF5 file " + tmp);
    Status st = write(file.get());
    if (!st.ok()) {
      std::remove(tmp.c_str());
      return st;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return UnavailableError("cannot rename " + tmp + " to " + path);
  return Status::OK();
}

Status WriteGroupOfLayers(const Net& net, hid_t file, const char* group_name, bool diff, const std::string& path) {
  Hdf5Handle group(Hdf5Quiet([&] { return H5Gcreate2(file, group_name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT); }),
                   H5Gclose);
  if (!group.ok()) return UnavailableError(path + ": cannot create group " + group_name);
  std::set<const void*> written;  // A shared parameter is stored with its owner only.
  for (int l = 0; l < net.num_layers(); ++l) {
    const std::string& name = net.layer_names()[l];
    const int first = net.layer_index(name);
    if (first != l) {
      // A repeated name (two "loss" layers): Caffe's layout has one group per
      // name, which the first layer of the name holds. A later one can only
      // be left out when it has no parameters of its own.
      for (const auto& b : net.layers()[l]->blobs()) {
        if (written.count(b->data().get()) == 0) {
          return InvalidArgumentError(path + ": layers " + std::to_string(first) + " and " + std::to_string(l) +
                                      " are both named \"" + name +
                                      "\" and the second has parameters; an HDF5 snapshot holds one group per "
                                      "layer name (use snapshot_format: BINARYPROTO)");
        }
      }
      continue;
    }
    Hdf5Handle layer(
        Hdf5Quiet([&] { return H5Gcreate2(group.get(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT); }),
        H5Gclose);
    if (!layer.ok()) return UnavailableError(path + ": cannot create group " + group_name + "/" + name);
    const auto& blobs = net.layers()[l]->blobs();
    for (size_t j = 0; j < blobs.size(); ++j) {
      const Blob& b = *blobs[j];
      const bool stored_before = !written.insert(b.data().get()).second;
      if (!diff && stored_before) continue;
      const std::string dataset = std::to_string(j);
      RETURN_IF_ERROR(WriteFloats(layer.get(), dataset, b.shape(), diff ? b.cpu_diff() : b.cpu_data(),
                                  path + ":" + group_name + "/" + name + "/" + dataset));
    }
  }
  return Status::OK();
}

}  // namespace

bool IsHdf5Path(const std::string& path) { return path.size() >= 3 && path.compare(path.size() - 3, 3, ".h5") == 0; }

Status WriteNetToHdf5(const Net& net, const std::string& path, bool write_diff) {
  return WriteAtomically(path, [&](hid_t file) -> Status {
    RETURN_IF_ERROR(WriteGroupOfLayers(net, file, "data", /*diff=*/false, path));
    if (write_diff) RETURN_IF_ERROR(WriteGroupOfLayers(net, file, "diff", /*diff=*/true, path));
    return Status::OK();
  });
}

Status CopyTrainedLayersFromHdf5(const std::string& path, Net* net) {
  Hdf5Handle file(Hdf5Quiet([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }), H5Fclose);
  if (!file.ok()) return OpenFailure(path);
  Hdf5Handle data(Hdf5Quiet([&] { return H5Gopen2(file.get(), "data", H5P_DEFAULT); }), H5Gclose);
  if (!data.ok()) return DataLossError(path + ": no group \"data\" (not a Caffe .caffemodel.h5)");
  ASSIGN_OR_RETURN(std::vector<std::string> layers, LinkNames(data.get(), path + ":data"));
  // Which blobs the net shares from another layer (their data is another's).
  std::set<const void*> seen;
  std::vector<std::vector<bool>> shared(net->num_layers());
  for (int l = 0; l < net->num_layers(); ++l) {
    for (const auto& b : net->layers()[l]->blobs()) shared[l].push_back(!seen.insert(b->data().get()).second);
  }
  for (const std::string& name : layers) {
    const int l = net->layer_index(name);
    if (l < 0) {
      VLOG(1) << "Ignoring source layer " << name;
      continue;
    }
    const std::string where = path + ":data/" + name;
    Hdf5Handle layer(Hdf5Quiet([&] { return H5Gopen2(data.get(), name.c_str(), H5P_DEFAULT); }), H5Gclose);
    if (!layer.ok()) return DataLossError("cannot open group " + where);
    ASSIGN_OR_RETURN(std::vector<std::string> datasets, LinkNames(layer.get(), where));
    auto& blobs = net->layers()[l]->blobs();
    if (datasets.size() > blobs.size()) {
      return InvalidArgumentError("incompatible number of blobs for layer \"" + name + "\": " + path + " has " +
                                  std::to_string(datasets.size()) + ", the net has " + std::to_string(blobs.size()));
    }
    for (size_t j = 0; j < blobs.size(); ++j) {
      const std::string dataset = std::to_string(j);
      if (!LinkExists(layer.get(), dataset)) {
        if (shared[l][j]) continue;  // Stored with the layer that owns it.
        return InvalidArgumentError("incompatible number of blobs for layer \"" + name + "\": " + path +
                                    " has no blob " + dataset);
      }
      std::vector<int> shape;
      std::vector<float> values;
      RETURN_IF_ERROR(ReadFloats(layer.get(), dataset, &shape, &values, where + "/" + dataset));
      Blob* target = blobs[j].get();
      if (shape != target->shape()) {
        Blob source(shape);
        return InvalidArgumentError("layer \"" + name + "\" blob " + dataset + ": " + path + " holds shape " +
                                    source.shape_string() + ", the net has " + target->shape_string());
      }
      std::copy(values.begin(), values.end(), target->mutable_cpu_data());
    }
  }
  return Status::OK();
}

Status CopyTrainedLayersFromFile(const std::string& path, Net* net) {
  if (IsHdf5Path(path)) return CopyTrainedLayersFromHdf5(path, net);
  return net->CopyTrainedLayersFromBinaryProto(path);
}

Status WriteSolverStateToHdf5(const caffe::SolverState& state, const std::string& path) {
  return WriteAtomically(path, [&](hid_t file) -> Status {
    const int iter = state.iter();
    const int current_step = state.current_step();
    if (Hdf5Quiet([&] { return H5LTmake_dataset_int(file, "iter", 0, nullptr, &iter); }) < 0 ||
        Hdf5Quiet([&] { return H5LTmake_dataset_string(file, "learned_net", state.learned_net().c_str()); }) < 0 ||
        Hdf5Quiet([&] { return H5LTmake_dataset_int(file, "current_step", 0, nullptr, &current_step); }) < 0) {
      return UnavailableError("cannot write " + path);
    }
    Hdf5Handle history(Hdf5Quiet([&] { return H5Gcreate2(file, "history", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT); }),
                       H5Gclose);
    if (!history.ok()) return UnavailableError(path + ": cannot create group history");
    for (int i = 0; i < state.history_size(); ++i) {
      const caffe::BlobProto& h = state.history(i);
      std::vector<int> shape(h.shape().dim().begin(), h.shape().dim().end());
      RETURN_IF_ERROR(WriteFloats(history.get(), std::to_string(i), shape, h.data().data(),
                                  path + ":history/" + std::to_string(i)));
    }
    return Status::OK();
  });
}

Status ReadSolverStateFromHdf5(const std::string& path, caffe::SolverState* state) {
  state->Clear();
  Hdf5Handle file(Hdf5Quiet([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }), H5Fclose);
  if (!file.ok()) return OpenFailure(path);
  int iter = 0, current_step = 0;
  RETURN_IF_ERROR(ReadInt(file.get(), "iter", &iter, path + ":iter"));
  RETURN_IF_ERROR(ReadInt(file.get(), "current_step", &current_step, path + ":current_step"));
  state->set_iter(iter);
  state->set_current_step(current_step);
  if (LinkExists(file.get(), "learned_net")) {
    std::string learned_net;
    RETURN_IF_ERROR(ReadString(file.get(), "learned_net", &learned_net, path + ":learned_net"));
    state->set_learned_net(learned_net);
  }
  Hdf5Handle history(Hdf5Quiet([&] { return H5Gopen2(file.get(), "history", H5P_DEFAULT); }), H5Gclose);
  if (!history.ok()) return DataLossError(path + ": no group \"history\" (not a Caffe .solverstate.h5)");
  ASSIGN_OR_RETURN(std::vector<std::string> names, LinkNames(history.get(), path + ":history"));
  for (size_t i = 0; i < names.size(); ++i) {
    // Datasets "0".."n-1" (the name order of the group is "0", "1", "10", ...).
    const std::string name = std::to_string(i);
    std::vector<int> shape;
    std::vector<float> values;
    RETURN_IF_ERROR(ReadFloats(history.get(), name, &shape, &values, path + ":history/" + name));
    caffe::BlobProto* h = state->add_history();
    for (int d : shape) h->mutable_shape()->add_dim(d);
    h->mutable_data()->Add(values.begin(), values.end());
  }
  return Status::OK();
}

}  // namespace nereus

// Hdf5OutputLayer: Caffe's "HDF5Output" layer. Writes its two bottoms to
// the HDF5 file hdf5_output_param.file_name, created (truncated) at set-up:
// bottom 0 as dataset "data", bottom 1 as "label", each shaped as Caffe
// writes them (num x channels x height x width, missing axes 1; a bottom of
// more than 4 axes keeps its shape). Every Forward appends its rows (the
// datasets grow along their first axis) and flushes the file, so what the
// layer got is on disk after each pass; the file is closed when the layer
// is destroyed. Caffe writes the datasets at the first Forward and dies at
// the second (they exist); Nereus keeps appending.
//
// In a TRAIN net of a job with several workers each worker writes its own
// file: "out.h5" becomes "out.rank<k>.h5" for worker k (DataLayerOptions);
// a TEST net (worker 0 only) writes file_name itself.
//
// Runs on the CPU: on a GPU net its bottoms are copied to the host (the
// file is written from there anyway).
//
// Errors: a file that cannot be created is a SetUp error; bottoms of
// different batch sizes, or of another item shape than the first Forward's,
// and a failed write are Forward errors naming the file.
//
// Not thread-safe (like every Layer).
#ifndef NEREUS_WORKER_TRAINER_DATA_HDF5_OUTPUT_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_HDF5_OUTPUT_LAYER_H_

#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_layer_options.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace data {

class Hdf5OutputLayer : public Layer {
 public:
  explicit Hdf5OutputLayer(const caffe::LayerParameter& param, DataLayerOptions options = {});
  ~Hdf5OutputLayer() override;

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "HDF5Output"; }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

  // The file written (file_name, or its per-worker name).
  const std::string& file_name() const { return file_name_; }
  // Rows written so far.
  long long rows() const { return rows_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}

 private:
  struct File;  // The open HDF5 file and its two datasets (hdf5_output_layer.cc).

  Status Append(const std::vector<Blob*>& bottom);

  const DataLayerOptions options_;
  std::string file_name_;
  std::unique_ptr<File> file_;
  long long rows_ = 0;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_HDF5_OUTPUT_LAYER_H_

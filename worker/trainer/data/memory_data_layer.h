// MemoryDataLayer: Caffe's "MemoryData" layer, fed through the trainer's C++
// API. memory_data_param gives batch_size, channels, height and width; top 0
// is batch_size x channels x height x width, top 1 the batch_size labels.
// A program hands the layer its arrays (Reset, as Caffe's) or Datum records
// (AddDatumVector, transformed by transform_param); each Forward copies the
// next batch_size items into the tops, wrapping around at the end.
//
//   Layer* layer = net->layer_by_name("data");
//   ASSIGN_OR_RETURN(MemoryDataLayer* memory, AsMemoryDataLayer(layer));
//   RETURN_IF_ERROR(memory->Reset(images.data(), labels.data(), 64));
//   RETURN_IF_ERROR(net->Forward().status());
//
// No sharding: in a job, each worker's program feeds its own worker. A
// Forward before any data is an error (Caffe dies), as is a label a
// consumer of top 1 cannot take (naming the item). Runs on the CPU: on a
// GPU net the tops are copied to the device when the next layer reads them.
//
// Thread-safety: not thread-safe (like every Layer): Reset and
// AddDatumVector are called on the thread that runs the net, between
// Forwards.
#ifndef NEREUS_WORKER_TRAINER_DATA_MEMORY_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_MEMORY_DATA_LAYER_H_

#include <memory>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_transformer.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace data {

class MemoryDataLayer : public Layer {
 public:
  explicit MemoryDataLayer(const caffe::LayerParameter& param) : Layer(param) {}

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "MemoryData"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }
  void RestrictLabels(int top_index, const LabelRange& range) override;

  // Caffe's Reset: the next Forwards read `n` items from `data` (n x
  // channels x height x width floats, used as they are: no transform) and
  // `labels` (n floats), starting with the first. The layer keeps the
  // pointers, not copies: the caller keeps both arrays alive and unchanged
  // until the next Reset or AddDatumVector, or the layer's destruction.
  // INVALID_ARGUMENT unless both are given and n is a positive multiple of
  // batch_size.
  Status Reset(const float* data, const float* labels, int n);
  // Caffe's AddDatumVector: decodes (encoded records) and transforms
  // (transform_param, with the Net's engine for crops and mirrors) each
  // Datum into arrays the layer owns, then Reset on them. INVALID_ARGUMENT
  // naming the item for a count that is not a positive multiple of
  // batch_size, or a Datum whose transformed shape is not channels x height
  // x width.
  Status AddDatumVector(const std::vector<caffe::Datum>& datums);
  // Caffe's set_batch_size: a new batch size for the next Reset (the data
  // given so far is dropped).
  Status set_batch_size(int batch_size);

  int batch_size() const { return batch_size_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}

 private:
  int batch_size_ = 0;
  int channels_ = 0;
  int height_ = 0;
  int width_ = 0;
  std::unique_ptr<DataTransformer> transformer_;
  std::vector<LabelRange> label_ranges_;
  // The arrays being read (the caller's, or added_*), n_ items.
  const float* data_ = nullptr;
  const float* labels_ = nullptr;
  int n_ = 0;
  int pos_ = 0;
  std::vector<float> added_data_;
  std::vector<float> added_labels_;
};

// `layer` as a MemoryDataLayer; INVALID_ARGUMENT naming it when it is not
// one (or null).
StatusOr<MemoryDataLayer*> AsMemoryDataLayer(Layer* layer);

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_MEMORY_DATA_LAYER_H_

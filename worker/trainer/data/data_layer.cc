#include "worker/trainer/data/data_layer.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace nereus {
namespace data {

DataLayer::DataLayer(const caffe::LayerParameter& param, DataLayerOptions options) : Layer(param), options_(options) {}

DataLayer::~DataLayer() { StopPrefetch(); }

void DataLayer::set_options(const DataLayerOptions& options) {
  CHECK(!thread_.joinable()) << "DataLayer::set_options after SetUp";
  options_ = options;
}

void DataLayer::StopPrefetch() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stopping_.store(true);
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status DataLayer::CheckParam() const {
  const caffe::DataParameter& p = layer_param_.data_param();
  if (!layer_param_.has_data_param() || p.source().empty()) {
    return LayerError("data_param.source is required (an LMDB directory)");
  }
  if (p.batch_size() == 0) return LayerError("data_param.batch_size must be positive");
  if (p.has_backend() && p.backend() != caffe::DataParameter::LMDB) {
    return LayerError("data_param.backend " + caffe::DataParameter::DB_Name(p.backend()) +
                      " is not supported; Nereus reads LMDB only (backend: LMDB)");
  }
  if (p.has_scale() || p.has_mean_file() || p.has_crop_size() || p.has_mirror()) {
    return LayerError("data_param.scale/mean_file/crop_size/mirror are deprecated; put them in transform_param");
  }
  if (p.force_encoded_color()) {
    return LayerError("data_param.force_encoded_color is not supported (no encoded records)");
  }
  if (p.prefetch() == 0) return LayerError("data_param.prefetch must be at least 1");
  if (options_.num_shards < 1 || options_.shard_index < 0 || options_.shard_index >= options_.num_shards) {
    return LayerError("bad sharding: shard_index " + std::to_string(options_.shard_index) + " of num_shards " +
                      std::to_string(options_.num_shards));
  }
  return Status::OK();
}

Status DataLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CHECK(!thread_.joinable()) << "DataLayer set up twice";
  RETURN_IF_ERROR(CheckParam());
  const caffe::DataParameter& p = layer_param_.data_param();
  batch_size_ = static_cast<int>(p.batch_size());
  output_labels_ = top.size() > 1;

  auto transformer = DataTransformer::Create(layer_param_.transform_param(), phase());
  if (!transformer.ok()) return LayerError(transformer.status().message());
  transformer_ = std::move(transformer).value();

  auto db = LmdbDatabase::Open(p.source(), DbMode::kRead);
  if (!db.ok()) return LayerError(db.status().message());
  db_ = std::move(db).value();
  auto count = db_->Count();
  if (!count.ok()) return LayerError(count.status().message());
  const std::size_t n = *count;
  const auto shards = static_cast<std::size_t>(options_.num_shards);
  const auto index = static_cast<std::size_t>(options_.shard_index);
  shard_size_ = n > index ? (n - index + shards - 1) / shards : 0;
  if (shard_size_ == 0) {
    return LayerError("LMDB database '" + p.source() + "' has " + std::to_string(n) + " records, none for shard " +
                      std::to_string(index) + " of " + std::to_string(shards));
  }
  auto cursor = db_->NewCursor();
  if (!cursor.ok()) return LayerError(cursor.status().message());
  cursor_ = std::move(cursor).value();
  position_ = 0;

  // The prefetch thread's own engine: one draw from the Net's, here, on the
  // Net's thread.
  prefetch_rng_.seed((*rng())());
  if (p.rand_skip() > 0) {
    const std::uint32_t skip = prefetch_rng_() % p.rand_skip();
    LOG(INFO) << "layer " << layer_param_.name() << ": skipping the first " << skip << " records of its shard";
    RETURN_IF_ERROR(SkipRecords(skip));
  }

  if (options_.skip_batches > 0) {
    const std::uint64_t skip = options_.skip_batches * static_cast<std::uint64_t>(batch_size_) % shard_size_;
    LOG(INFO) << "layer " << layer_param_.name() << ": resuming after " << options_.skip_batches
              << " batches; skipping " << skip << " records of its shard";
    RETURN_IF_ERROR(SkipRecords(skip));
  }

  // The first record (not consumed) gives the shape of every record.
  Status positioned = NextRecord(nullptr, nullptr, nullptr);
  if (!positioned.ok()) return LayerError(positioned.message());
  const std::string first_where = Where(position_, std::string(cursor_->key()));
  caffe::Datum first;
  if (!first.ParseFromArray(cursor_->value().data(), static_cast<int>(cursor_->value().size()))) {
    return LayerError(first_where + ": not a Datum (" + std::to_string(cursor_->value().size()) +
                      " bytes that do not parse)");
  }
  auto shape = transformer_->InferShape(first);
  if (!shape.ok()) return LayerError(first_where + ": " + shape.status().message());
  datum_shape_ = *shape;
  first_shape_ =
      std::to_string(first.channels()) + "x" + std::to_string(first.height()) + "x" + std::to_string(first.width());

  std::vector<int> data_shape = datum_shape_;
  data_shape[0] = batch_size_;
  top[0]->Reshape(data_shape);
  if (output_labels_) top[1]->Reshape(std::vector<int>{batch_size_});
  const std::size_t per_datum = static_cast<std::size_t>(datum_shape_[1]) * datum_shape_[2] * datum_shape_[3];
  {
    MutexLock lock(&mu_);
    for (std::uint32_t i = 0; i < p.prefetch(); ++i) {
      // Page-locked for a GPU (pinned here, once).
      std::shared_ptr<gpu::DeviceMemory> pinned = device() != nullptr ? device()->memory() : nullptr;
      auto batch = std::make_unique<Batch>();
      batch->data = gpu::HostBuffer(per_datum * batch_size_, pinned);
      if (output_labels_) batch->label = gpu::HostBuffer(batch_size_, pinned);
      batch->labels.resize(batch_size_);
      batch->records.resize(batch_size_);
      batch->keys.resize(batch_size_);
      free_.push_back(std::move(batch));
    }
  }
  LOG(INFO) << "layer " << layer_param_.name() << ": " << p.source() << ", shard " << options_.shard_index << "/"
            << options_.num_shards << " (" << shard_size_ << " of " << n << " records), batch "
            << top[0]->shape_string();
  thread_ = std::thread(&DataLayer::PrefetchLoop, this);
  return Status::OK();
}

std::string DataLayer::Where(std::uint64_t index, const std::string& key) const {
  return "LMDB database '" + db_->path() + "', record " + std::to_string(index) + " (key '" + key + "')";
}

// With datum == nullptr, only moves the cursor onto this shard's next record
// without consuming it.
Status DataLayer::SkipRecords(std::uint64_t count) {
  caffe::Datum ignored;
  std::string key;
  std::uint64_t index = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    Status st = NextRecord(&ignored, &key, &index);
    if (!st.ok()) return LayerError(st.message());
  }
  return Status::OK();
}

Status DataLayer::NextRecord(caffe::Datum* datum, std::string* key, std::uint64_t* index) {
  const auto shards = static_cast<std::uint64_t>(options_.num_shards);
  const auto shard = static_cast<std::uint64_t>(options_.shard_index);
  auto advance = [this] {
    const std::uint64_t epoch = cursor_->epoch();
    cursor_->Next();
    position_ = cursor_->epoch() != epoch ? 0 : position_ + 1;
  };
  for (;;) {
    if (!cursor_->valid()) {
      if (!cursor_->status().ok()) {
        return DataLossError("LMDB database '" + db_->path() + "', record " + std::to_string(position_) +
                             ": cannot read it: " + cursor_->status().message());
      }
      return DataLossError("LMDB database '" + db_->path() + "' became empty");
    }
    if (position_ % shards == shard) break;
    advance();
  }
  if (datum == nullptr) return Status::OK();
  *key = std::string(cursor_->key());
  *index = position_;
  if (!datum->ParseFromArray(cursor_->value().data(), static_cast<int>(cursor_->value().size()))) {
    return DataLossError(Where(*index, *key) + ": not a Datum (" + std::to_string(cursor_->value().size()) +
                         " bytes that do not parse)");
  }
  advance();
  return Status::OK();
}

Status DataLayer::FillBatch(Batch* batch) {
  const std::size_t per_datum = batch->data.size() / static_cast<std::size_t>(batch_size_);
  caffe::Datum datum;
  for (int i = 0; i < batch_size_; ++i) {
    if (stopping_.load(std::memory_order_relaxed)) return Status::OK();
    std::string& key = batch->keys[i];
    std::uint64_t& index = batch->records[i];
    RETURN_IF_ERROR(NextRecord(&datum, &key, &index));
    auto shape = transformer_->InferShape(datum);
    if (!shape.ok()) return DataLossError(Where(index, key) + ": " + shape.status().message());
    if (*shape != datum_shape_) {
      return DataLossError(Where(index, key) + ": Datum of shape " + std::to_string(datum.channels()) + "x" +
                           std::to_string(datum.height()) + "x" + std::to_string(datum.width()) +
                           "; the first record read, whose shape every record must have, is " + first_shape_);
    }
    Status s = transformer_->Transform(datum, batch->data.data() + per_datum * i, &prefetch_rng_);
    if (!s.ok()) return DataLossError(Where(index, key) + ": " + s.message());
    batch->labels[i] = datum.label();
    if (output_labels_) batch->label.data()[i] = static_cast<float>(datum.label());
  }
  return Status::OK();
}

void DataLayer::PrefetchLoop() {
  for (;;) {
    std::unique_ptr<Batch> batch;
    {
      MutexLock lock(&mu_);
      while (!stop_ && free_.empty()) cv_.Wait(&mu_);
      if (stop_) return;
      batch = std::move(free_.front());
      free_.pop_front();
    }
    Status s = FillBatch(batch.get());
    {
      MutexLock lock(&mu_);
      if (stop_) return;
      if (!s.ok()) {
        error_ = s;
      } else {
        full_.push_back(std::move(batch));
      }
    }
    cv_.SignalAll();
    if (!s.ok()) return;
  }
}

void DataLayer::RestrictLabels(int top_index, const LabelRange& range) {
  if (top_index == 1) label_ranges_.push_back(range);
}

Status DataLayer::CheckLabels(const Batch& batch) const {
  for (const LabelRange& range : label_ranges_) {
    for (std::size_t i = 0; i < batch.labels.size(); ++i) {
      const int label = batch.labels[i];
      if (range.Accepts(label)) continue;
      return DataLossError(Where(batch.records[i], batch.keys[i]) + ": label " + std::to_string(label) +
                           " is out of range for " + range.consumer + ", which takes labels 0 to " +
                           std::to_string(range.num_classes - 1) +
                           (range.ignore_label ? " and ignore_label " + std::to_string(*range.ignore_label) : ""));
    }
  }
  return Status::OK();
}

Status DataLayer::TakeBatch(std::unique_ptr<Batch>* out) {
  std::unique_ptr<Batch> batch;
  {
    MutexLock lock(&mu_);
    while (full_.empty() && error_.ok()) cv_.Wait(&mu_);
    // The prefetch thread stopped at a record it could not use; the good
    // batches before it have been handed out.
    if (full_.empty()) return error_;
    batch = std::move(full_.front());
    full_.pop_front();
  }
  Status labels = CheckLabels(*batch);
  if (!labels.ok()) {
    ReturnBatch(std::move(batch));
    return labels;
  }
  *out = std::move(batch);
  return Status::OK();
}

void DataLayer::ReturnBatch(std::unique_ptr<Batch> batch) {
  {
    MutexLock lock(&mu_);
    free_.push_back(std::move(batch));
  }
  cv_.SignalAll();
}

void DataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::unique_ptr<Batch> batch;
  const Status taken = TakeBatch(&batch);
  if (!taken.ok()) {
    set_forward_error(taken.code(), taken.message());
    return;
  }
  std::vector<int> data_shape = datum_shape_;
  data_shape[0] = batch_size_;
  top[0]->Reshape(data_shape);
  std::copy(batch->data.data(), batch->data.data() + batch->data.size(), top[0]->mutable_cpu_data());
  if (output_labels_) {
    top[1]->Reshape(std::vector<int>{batch_size_});
    std::copy(batch->label.data(), batch->label.data() + batch->label.size(), top[1]->mutable_cpu_data());
  }
  ReturnBatch(std::move(batch));
}

}  // namespace data
}  // namespace nereus

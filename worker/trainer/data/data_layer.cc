#include "worker/trainer/data/data_layer.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace nereus {
namespace data {

DataLayer::DataLayer(const caffe::LayerParameter& param, DataLayerOptions options)
    : PrefetchingDataLayer(param), options_(options) {}

DataLayer::~DataLayer() { StopPrefetch(); }

void DataLayer::set_options(const DataLayerOptions& options) {
  CHECK(db_ == nullptr) << "DataLayer::set_options after SetUp";
  options_ = options;
}

Status DataLayer::CheckParam() const {
  const caffe::DataParameter& p = layer_param_.data_param();
  RETURN_IF_ERROR(CheckSourceAndBatch(layer_param_.has_data_param(), p, "data_param", "an LMDB or LevelDB directory"));
  const caffe::TransformationParameter& t = layer_param_.transform_param();
  if (t.force_color() && t.force_gray()) {
    return LayerError("transform_param: force_color and force_gray cannot both be set");
  }
  if (p.force_encoded_color() && t.force_gray()) {
    return LayerError("data_param.force_encoded_color and transform_param.force_gray cannot both be set");
  }
  if (!options_.valid()) return LayerError("bad sharding: " + options_.ShardName());
  return Status::OK();
}

Status DataLayer::OpenSource() {
  const caffe::DataParameter& p = layer_param_.data_param();
  auto held = DetectDbBackend(p.source());
  if (!held.ok()) {
    if (!p.has_backend()) return LayerError(held.status().message());
    // Named by the backend asked for, as opening it would say.
    const DbBackend asked = p.backend() == caffe::DataParameter::LMDB ? DbBackend::kLmdb : DbBackend::kLevelDb;
    auto db = Database::Open(asked, p.source(), DbMode::kRead);
    return LayerError(db.ok() ? held.status().message() : db.status().message());
  }
  if (p.has_backend()) {
    const DbBackend asked = p.backend() == caffe::DataParameter::LMDB ? DbBackend::kLmdb : DbBackend::kLevelDb;
    if (asked != *held) {
      return LayerError("data_param.backend is " + caffe::DataParameter::DB_Name(p.backend()) + " but '" + p.source() +
                        "' holds a" + (*held == DbBackend::kLmdb ? "n LMDB" : " LevelDB") + " database; set backend: " +
                        (*held == DbBackend::kLmdb ? "LMDB" : "LEVELDB") + " or leave it out");
    }
  }
  auto db = Database::Open(*held, p.source(), DbMode::kRead);
  if (!db.ok()) return LayerError(db.status().message());
  db_ = std::move(db).value();
  return Status::OK();
}

StatusOr<bool> DataLayer::ShardHasRecords(std::size_t* count) const {
  ASSIGN_OR_RETURN(std::unique_ptr<DbCursor> cursor, db_->NewCursor());
  const auto need = static_cast<std::size_t>(options_.shard_index) + 1;
  std::size_t seen = 0;
  for (; seen < need && cursor->valid() && cursor->epoch() == 0; cursor->Next()) ++seen;
  if (!cursor->status().ok()) return cursor->status();
  *count = seen;
  return seen == need;
}

Status DataLayer::DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) {
  RETURN_IF_ERROR(CheckParam());
  const caffe::DataParameter& p = layer_param_.data_param();
  batch_size_ = static_cast<int>(p.batch_size());
  output_labels_ = top.size() > 1;
  const caffe::TransformationParameter& t = layer_param_.transform_param();
  decode_color_ = t.force_color() || p.force_encoded_color() ? ImageColor::kColor
                  : t.force_gray()                           ? ImageColor::kGray
                                                             : ImageColor::kNative;

  auto transformer = DataTransformer::Create(t, phase());
  if (!transformer.ok()) return LayerError(transformer.status().message());
  transformer_ = std::move(transformer).value();

  RETURN_IF_ERROR(OpenSource());
  // LMDB keeps its count; a LevelDB is counted (read whole) only when a
  // resumed job needs the shard's size.
  std::optional<std::size_t> records;
  if (db_->backend() == DbBackend::kLmdb || options_.skip_batches > 0) {
    auto count = db_->Count();
    if (!count.ok()) return LayerError(count.status().message());
    records = *count;
  }
  const auto shards = static_cast<std::size_t>(options_.num_shards);
  const auto index = static_cast<std::size_t>(options_.shard_index);
  if (records) {
    shard_size_ = *records > index ? (*records - index + shards - 1) / shards : 0;
  } else {
    std::size_t seen = 0;
    auto has = ShardHasRecords(&seen);
    if (!has.ok()) return LayerError(has.status().message());
    if (!*has) {
      shard_size_ = 0;
      records = seen;
    }
  }
  if (shard_size_ == std::optional<std::size_t>(0)) {
    return LayerError(db_->Name() + " has " + std::to_string(*records) + " records, none for " + options_.ShardName());
  }
  auto cursor = db_->NewCursor();
  if (!cursor.ok()) return LayerError(cursor.status().message());
  cursor_ = std::move(cursor).value();
  position_ = 0;

  if (p.rand_skip() > 0) {
    const std::uint32_t skip = (*prefetch_rng())() % p.rand_skip();
    LOG(INFO) << "layer " << layer_param_.name() << ": skipping the first " << skip << " records of its shard";
    RETURN_IF_ERROR(SkipRecords(skip));
  }
  if (options_.skip_batches > 0) {
    const std::uint64_t skip = options_.skip_batches * static_cast<std::uint64_t>(batch_size_) % *shard_size_;
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
  if (first.encoded()) {
    Status decoded = DecodeDatum(&first, decode_color_);
    if (!decoded.ok()) return LayerError(first_where + ": " + decoded.message());
  }
  auto shape = transformer_->InferShape(first);
  if (!shape.ok()) return LayerError(first_where + ": " + shape.status().message());
  datum_shape_ = *shape;
  first_shape_ = DatumShapeString(first);

  std::vector<int> data_shape = datum_shape_;
  data_shape[0] = batch_size_;
  top_shapes->push_back(data_shape);
  if (output_labels_) top_shapes->push_back({batch_size_});
  LOG(INFO) << "layer " << layer_param_.name() << ": " << db_->Name() << ", " << options_.ShardName() << " ("
            << (shard_size_ ? std::to_string(*shard_size_) + " of " + std::to_string(*records) + " records"
                            : std::string("a LevelDB: records not counted"))
            << "), batch " << batch_size_ << " x " << first_shape_;
  return Status::OK();
}

std::string DataLayer::Where(std::uint64_t index, const std::string& key) const {
  return db_->Name() + ", record " + std::to_string(index) + " (key '" + key + "')";
}

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
        return DataLossError(db_->Name() + ", record " + std::to_string(position_) +
                             ": cannot read it: " + cursor_->status().message());
      }
      return DataLossError(db_->Name() + " became empty");
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
  if (datum->encoded()) {
    Status decoded = DecodeDatum(datum, decode_color_);
    if (!decoded.ok()) return Status(decoded.code(), Where(*index, *key) + ": " + decoded.message());
  }
  return Status::OK();
}

Status DataLayer::FillBatch(Batch* batch) {
  gpu::HostBuffer& data = batch->tops[0];
  const std::size_t per_datum = data.size() / static_cast<std::size_t>(batch_size_);
  caffe::Datum datum;
  for (int i = 0; i < batch_size_; ++i) {
    if (stopping()) return Status::OK();
    std::string& key = batch->keys[i];
    std::uint64_t& index = batch->records[i];
    RETURN_IF_ERROR(NextRecord(&datum, &key, &index));
    auto shape = transformer_->InferShape(datum);
    if (!shape.ok()) return DataLossError(Where(index, key) + ": " + shape.status().message());
    if (*shape != datum_shape_) {
      return DataLossError(Where(index, key) + ": Datum of shape " + DatumShapeString(datum) +
                           "; the first record read, whose shape every record must have, is " + first_shape_);
    }
    Status s = transformer_->Transform(datum, data.data() + per_datum * i, prefetch_rng());
    if (!s.ok()) return DataLossError(Where(index, key) + ": " + s.message());
    if (output_labels_) batch->tops[1].data()[i] = static_cast<float>(datum.label());
  }
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

#include "worker/trainer/data/image_data_layer.h"

#include <algorithm>
#include <utility>

#include "worker/trainer/data/image_io.h"

namespace nereus {
namespace data {

std::string ImageDataLayer::Where(std::uint64_t line, const std::string& path) const {
  return "image list '" + layer_param_.image_data_param().source() + "' line " + std::to_string(line) + " (image '" +
         path + "')";
}

Status ImageDataLayer::ReadLine(std::size_t index, caffe::Datum* datum) const {
  const caffe::ImageDataParameter& p = layer_param_.image_data_param();
  const ImageListEntry& line = lines_[index];
  const std::string path = p.root_folder() + line.path;
  auto read = ReadImageToDatum(path, line.label, static_cast<int>(p.new_height()), static_cast<int>(p.new_width()),
                               p.is_color());
  if (!read.ok()) return Status(read.status().code(), Where(line.line, path) + ": " + read.status().message());
  *datum = std::move(read).value();
  return Status::OK();
}

Status ImageDataLayer::DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) {
  const caffe::ImageDataParameter& p = layer_param_.image_data_param();
  RETURN_IF_ERROR(
      CheckSourceAndBatch(layer_param_.has_image_data_param(), p, "image_data_param", "a list of 'PATH LABEL' lines"));
  if ((p.new_height() == 0) != (p.new_width() == 0)) {
    return LayerError("image_data_param: give both new_height and new_width, or neither");
  }
  if (!options_.valid()) return LayerError("bad sharding: " + options_.ShardName());
  if (!ImageCodecsAvailable()) return LayerError(NoImageCodecsError("ImageData").message());
  batch_size_ = static_cast<int>(p.batch_size());

  auto transformer = DataTransformer::Create(layer_param_.transform_param(), phase());
  if (!transformer.ok()) return LayerError(transformer.status().message());
  transformer_ = std::move(transformer).value();

  auto all = ReadImageList(p.source());
  if (!all.ok()) return LayerError(all.status().message());
  for (std::size_t i = static_cast<std::size_t>(options_.shard_index); i < all->size();
       i += static_cast<std::size_t>(options_.num_shards)) {
    lines_.push_back((*all)[i]);
  }
  if (lines_.empty()) {
    return LayerError("image list '" + p.source() + "' has " + std::to_string(all->size()) + " images, none for " +
                      options_.ShardName());
  }
  if (p.shuffle()) std::shuffle(lines_.begin(), lines_.end(), *prefetch_rng());
  position_ = 0;
  if (p.rand_skip() > 0) {
    const std::uint32_t skip = (*prefetch_rng())() % p.rand_skip();
    LOG(INFO) << "layer " << layer_param_.name() << ": skipping the first " << skip << " images of its shard";
    position_ = skip % lines_.size();
  }
  if (options_.skip_batches > 0) {
    const std::uint64_t skip = options_.skip_batches * static_cast<std::uint64_t>(batch_size_) % lines_.size();
    LOG(INFO) << "layer " << layer_param_.name() << ": resuming after " << options_.skip_batches
              << " batches; skipping " << skip << " images of its shard";
    position_ = (position_ + skip) % lines_.size();
  }

  // The first image gives the shape of every image.
  caffe::Datum first;
  Status read = ReadLine(position_, &first);
  if (!read.ok()) return LayerError(read.message());
  auto shape = transformer_->InferShape(first);
  if (!shape.ok()) {
    return LayerError(Where(lines_[position_].line, p.root_folder() + lines_[position_].path) + ": " +
                      shape.status().message());
  }
  datum_shape_ = *shape;
  first_shape_ = DatumShapeString(first);
  std::vector<int> data_shape = datum_shape_;
  data_shape[0] = batch_size_;
  top_shapes->push_back(data_shape);
  top_shapes->push_back({batch_size_});
  LOG(INFO) << "layer " << layer_param_.name() << ": " << p.source() << ", " << options_.ShardName() << " ("
            << lines_.size() << " of " << all->size() << " images" << (p.shuffle() ? ", shuffled" : "") << "), batch "
            << batch_size_ << " x " << first_shape_;
  return Status::OK();
}

Status ImageDataLayer::FillBatch(Batch* batch) {
  const caffe::ImageDataParameter& p = layer_param_.image_data_param();
  gpu::HostBuffer& data = batch->tops[0];
  const std::size_t per_image = data.size() / static_cast<std::size_t>(batch_size_);
  caffe::Datum datum;
  for (int i = 0; i < batch_size_; ++i) {
    if (stopping()) return Status::OK();
    const ImageListEntry& line = lines_[position_];
    batch->records[i] = static_cast<std::uint64_t>(line.line);
    batch->keys[i] = p.root_folder() + line.path;
    RETURN_IF_ERROR(ReadLine(position_, &datum));
    auto shape = transformer_->InferShape(datum);
    if (!shape.ok()) return DataLossError(Where(line.line, batch->keys[i]) + ": " + shape.status().message());
    if (*shape != datum_shape_) {
      return DataLossError(Where(line.line, batch->keys[i]) + ": image of shape " + DatumShapeString(datum) +
                           "; the first image read, whose shape every image must have, is " + first_shape_);
    }
    Status s = transformer_->Transform(datum, data.data() + per_image * i, prefetch_rng());
    if (!s.ok()) return DataLossError(Where(line.line, batch->keys[i]) + ": " + s.message());
    batch->tops[1].data()[i] = static_cast<float>(line.label);
    if (++position_ == lines_.size()) {
      position_ = 0;
      if (p.shuffle()) std::shuffle(lines_.begin(), lines_.end(), *prefetch_rng());
    }
  }
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

#include "worker/trainer/data/memory_data_layer.h"

#include <algorithm>
#include <utility>

#include "worker/trainer/data/image_io.h"

namespace nereus {
namespace data {

Status MemoryDataLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::MemoryDataParameter& p = layer_param_.memory_data_param();
  if (p.batch_size() == 0 || p.channels() == 0 || p.height() == 0 || p.width() == 0) {
    return LayerError("batch_size, channels, height and width must be given and positive in memory_data_param");
  }
  batch_size_ = static_cast<int>(p.batch_size());
  channels_ = static_cast<int>(p.channels());
  height_ = static_cast<int>(p.height());
  width_ = static_cast<int>(p.width());
  auto transformer = DataTransformer::Create(layer_param_.transform_param(), phase());
  if (!transformer.ok()) return LayerError(transformer.status().message());
  transformer_ = std::move(transformer).value();
  top[0]->Reshape(batch_size_, channels_, height_, width_);
  top[1]->Reshape(std::vector<int>{batch_size_});
  return Status::OK();
}

void MemoryDataLayer::RestrictLabels(int top_index, const LabelRange& range) {
  if (top_index == 1) label_ranges_.push_back(range);
}

Status MemoryDataLayer::Reset(const float* data, const float* labels, int n) {
  if (data == nullptr || labels == nullptr) return LayerError("Reset needs both a data and a labels array");
  if (n <= 0 || n % batch_size_ != 0) {
    return LayerError("Reset with " + std::to_string(n) + " items; give a positive multiple of the batch size " +
                      std::to_string(batch_size_));
  }
  if (layer_param_.has_transform_param() && data != added_data_.data()) {
    LOG(WARNING) << "layer " << layer_param_.name() << " (MemoryData) does not transform arrays given to Reset";
  }
  data_ = data;
  labels_ = labels;
  n_ = n;
  pos_ = 0;
  return Status::OK();
}

Status MemoryDataLayer::AddDatumVector(const std::vector<caffe::Datum>& datums) {
  const int n = static_cast<int>(datums.size());
  if (n <= 0 || n % batch_size_ != 0) {
    return LayerError("AddDatumVector with " + std::to_string(n) +
                      " Datum records; give a positive multiple of the batch size " + std::to_string(batch_size_));
  }
  const std::size_t per_item = static_cast<std::size_t>(channels_) * height_ * width_;
  const std::vector<int> want{1, channels_, height_, width_};
  std::vector<float> data(per_item * n);
  std::vector<float> labels(n);
  caffe::Datum decoded;
  for (int i = 0; i < n; ++i) {
    const std::string where = "Datum " + std::to_string(i) + " given to AddDatumVector";
    const caffe::Datum* datum = &datums[i];
    if (datum->encoded()) {
      decoded = *datum;
      const caffe::TransformationParameter& t = layer_param_.transform_param();
      Status s = DecodeDatum(&decoded, t.force_color()  ? ImageColor::kColor
                                       : t.force_gray() ? ImageColor::kGray
                                                        : ImageColor::kNative);
      if (!s.ok()) return LayerError(where + ": " + s.message());
      datum = &decoded;
    }
    auto shape = transformer_->InferShape(*datum);
    if (!shape.ok()) return LayerError(where + ": " + shape.status().message());
    if (*shape != want) {
      return LayerError(where + ": transformed to " + std::to_string((*shape)[1]) + "x" + std::to_string((*shape)[2]) +
                        "x" + std::to_string((*shape)[3]) + ", but memory_data_param says " +
                        std::to_string(channels_) + "x" + std::to_string(height_) + "x" + std::to_string(width_));
    }
    Status s = transformer_->Transform(*datum, data.data() + per_item * i, rng());
    if (!s.ok()) return LayerError(where + ": " + s.message());
    labels[i] = static_cast<float>(datum->label());
  }
  added_data_ = std::move(data);
  added_labels_ = std::move(labels);
  return Reset(added_data_.data(), added_labels_.data(), n);
}

Status MemoryDataLayer::set_batch_size(int batch_size) {
  if (batch_size <= 0) return LayerError("set_batch_size(" + std::to_string(batch_size) + "): must be positive");
  batch_size_ = batch_size;
  data_ = labels_ = nullptr;
  n_ = pos_ = 0;
  return Status::OK();
}

void MemoryDataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  if (data_ == nullptr) {
    set_forward_error(StatusCode::kFailedPrecondition,
                      "no data: hand the layer its arrays (Reset) or Datum records (AddDatumVector) first");
    return;
  }
  for (const LabelRange& range : label_ranges_) {
    for (int i = 0; i < batch_size_; ++i) {
      const int label = static_cast<int>(labels_[pos_ + i]);
      if (range.Accepts(label)) continue;
      set_forward_error(StatusCode::kDataLoss,
                        "item " + std::to_string(pos_ + i) + " of the data given: label " + std::to_string(label) +
                            " is out of range for " + range.consumer + ", which takes labels 0 to " +
                            std::to_string(range.num_classes - 1) +
                            (range.ignore_label ? " and ignore_label " + std::to_string(*range.ignore_label) : ""));
      return;
    }
  }
  const std::size_t per_item = static_cast<std::size_t>(channels_) * height_ * width_;
  top[0]->Reshape(batch_size_, channels_, height_, width_);
  top[1]->Reshape(std::vector<int>{batch_size_});
  const float* from = data_ + per_item * pos_;
  std::copy(from, from + per_item * batch_size_, top[0]->mutable_cpu_data());
  std::copy(labels_ + pos_, labels_ + pos_ + batch_size_, top[1]->mutable_cpu_data());
  pos_ = (pos_ + batch_size_) % n_;
}

StatusOr<MemoryDataLayer*> AsMemoryDataLayer(Layer* layer) {
  if (layer == nullptr) return InvalidArgumentError("no layer (a MemoryData layer was expected)");
  auto* memory = dynamic_cast<MemoryDataLayer*>(layer);
  if (memory == nullptr) {
    return InvalidArgumentError("layer " + layer->layer_param().name() + " is a " + layer->type() +
                                " layer, not MemoryData");
  }
  return memory;
}

}  // namespace data
}  // namespace nereus

#include "worker/trainer/data/prefetching_data_layer.h"

#include <algorithm>
#include <utility>

namespace nereus {
namespace data {

PrefetchingDataLayer::~PrefetchingDataLayer() {
  // A subclass has stopped the thread already (it runs the subclass's
  // FillBatch); this only covers a layer whose subclass set up nothing.
  StopPrefetch();
}

void PrefetchingDataLayer::StopPrefetch() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stopping_.store(true);
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Status PrefetchingDataLayer::LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  CHECK(!thread_.joinable()) << "layer " << layer_param_.name() << " set up twice";
  const std::uint32_t prefetch = layer_param_.data_param().prefetch();
  if (prefetch == 0) return LayerError("data_param.prefetch must be at least 1");
  // The prefetch thread's own engine: one draw from the Net's, here, on the
  // Net's thread.
  prefetch_rng_.seed((*rng())());
  std::vector<std::vector<int>> shapes;
  RETURN_IF_ERROR(DataLayerSetUp(top, &shapes));
  CHECK_EQ(shapes.size(), top.size()) << "layer " << layer_param_.name() << ": a shape per top";
  for (const auto& shape : shapes) {
    CHECK(!shape.empty() && shape[0] == shapes[0][0])
        << "layer " << layer_param_.name() << ": every top starts with the batch size";
  }
  top_shapes_ = std::move(shapes);
  batch_items_ = top_shapes_[0][0];
  for (std::size_t t = 0; t < top.size(); ++t) top[t]->Reshape(top_shapes_[t]);
  {
    MutexLock lock(&mu_);
    for (std::uint32_t i = 0; i < prefetch; ++i) {
      // Page-locked for a GPU (pinned here, once).
      std::shared_ptr<gpu::DeviceMemory> pinned = device() != nullptr ? device()->memory() : nullptr;
      auto batch = std::make_unique<Batch>();
      for (Blob* t : top) batch->tops.emplace_back(static_cast<std::size_t>(t->count()), pinned);
      batch->records.resize(batch_items_);
      batch->keys.resize(batch_items_);
      free_.push_back(std::move(batch));
    }
  }
  thread_ = std::thread(&PrefetchingDataLayer::PrefetchLoop, this);
  return Status::OK();
}

void PrefetchingDataLayer::PrefetchLoop() {
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

void PrefetchingDataLayer::RestrictLabels(int top_index, const LabelRange& range) {
  label_ranges_.emplace_back(top_index, range);
}

Status PrefetchingDataLayer::CheckLabels(const Batch& batch) const {
  for (const auto& [t, range] : label_ranges_) {
    const gpu::HostBuffer& values = batch.tops[t];
    const std::size_t per_item = values.size() / static_cast<std::size_t>(batch_items_);
    for (std::size_t v = 0; v < values.size(); ++v) {
      const int label = static_cast<int>(values.data()[v]);
      if (range.Accepts(label)) continue;
      const std::size_t item = v / per_item;
      return DataLossError(Where(batch.records[item], batch.keys[item]) + ": label " + std::to_string(label) +
                           " is out of range for " + range.consumer + ", which takes labels 0 to " +
                           std::to_string(range.num_classes - 1) +
                           (range.ignore_label ? " and ignore_label " + std::to_string(*range.ignore_label) : ""));
    }
  }
  return Status::OK();
}

Status PrefetchingDataLayer::TakeBatch(std::unique_ptr<Batch>* out) {
  std::unique_ptr<Batch> batch;
  {
    MutexLock lock(&mu_);
    while (full_.empty() && error_.ok()) cv_.Wait(&mu_);
    // The prefetch thread stopped at an item it could not use; the good
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

void PrefetchingDataLayer::ReturnBatch(std::unique_ptr<Batch> batch) {
  {
    MutexLock lock(&mu_);
    free_.push_back(std::move(batch));
  }
  cv_.SignalAll();
}

void PrefetchingDataLayer::Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  std::unique_ptr<Batch> batch;
  const Status taken = TakeBatch(&batch);
  if (!taken.ok()) {
    set_forward_error(taken.code(), taken.message());
    return;
  }
  for (std::size_t t = 0; t < top.size(); ++t) {
    top[t]->Reshape(top_shapes_[t]);
    const gpu::HostBuffer& values = batch->tops[t];
    std::copy(values.data(), values.data() + values.size(), top[t]->mutable_cpu_data());
  }
  ReturnBatch(std::move(batch));
}

}  // namespace data
}  // namespace nereus

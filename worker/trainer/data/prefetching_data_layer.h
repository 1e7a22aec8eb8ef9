// PrefetchingDataLayer: what Caffe's BasePrefetchingDataLayer is to its
// Data, ImageData and WindowData layers (and, in Nereus, HDF5Data): a
// background thread that fills batches ahead of the net, and the copy of
// each batch into the tops, on the CPU or a GPU. A subclass says where its
// items come from (DataLayerSetUp, FillBatch, Where); this class owns the
// thread, the queue and the device staging.
//
// Prefetching: SetUp (LayerSetUpStatus) calls DataLayerSetUp, which fixes
// the shape of every top, allocates data_param.prefetch batches (Caffe's
// field, default 4, for every prefetching layer) and starts one thread,
// owned by the layer, that fills them in order (a bounded queue). Forward
// takes the oldest ready batch, blocking until one is ready. The thread uses
// its own std::mt19937 (prefetch_rng()), seeded at SetUp with one draw from
// the Net's rng(), before DataLayerSetUp, so runs are reproducible and the
// Net's engine is never touched off its thread. Each subclass's destructor
// calls StopPrefetch() first (the thread runs the subclass's FillBatch),
// which wakes the thread wherever it waits and joins it, so a layer may be
// destroyed at any time, mid-epoch included.
//
// On a GPU (a layer with a device): the batches are prefetched into
// page-locked host buffers (allocated once, at set-up), and each Forward
// starts the copy of the *next* batch to device staging buffers on the
// device's copy stream, so that it runs while this iteration computes; the
// next Forward waits (on the compute stream, through an event) for that copy
// and moves the batch into the tops by a device-to-device copy. The batches
// and their order are the CPU's.
//
// Errors: an item the thread cannot use ends the thread (FillBatch's
// error); the Forward that needs that batch reports it through
// Layer::forward_error (Net::Forward returns it), after the good batches
// before it. A label that a consumer of a top cannot take (its
// Layer::AcceptedLabels, handed over by the Net through RestrictLabels) is
// reported by the Forward of its batch, naming the item (Where). On a GPU
// the next batch is taken one Forward ahead, but an error found in it is
// kept and reported by the Forward that needs the batch, as on the CPU.
//
// Not thread-safe (like every Layer); the prefetch thread is internal.
#ifndef NEREUS_WORKER_TRAINER_DATA_PREFETCHING_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_PREFETCHING_DATA_LAYER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/gpu/host_buffer.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace data {

class PrefetchingDataLayer : public Layer {
 public:
  // Checks that the subclass stopped the thread.
  ~PrefetchingDataLayer() override;

  // Seeds prefetch_rng(), calls DataLayerSetUp, sizes the tops, allocates
  // the batches and starts the thread.
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) final;
  // The tops are sized at set-up and by each Forward.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  bool HasGpuCode() const override { return true; }

  // Each item's values in top[top_index] must be labels `range` accepts.
  void RestrictLabels(int top_index, const LabelRange& range) override;

 protected:
  explicit PrefetchingDataLayer(const caffe::LayerParameter& param) : Layer(param) {}

  struct Batch {
    // One buffer per top, of the top's count (page-locked on a GPU).
    std::vector<gpu::HostBuffer> tops;
    // Per item, for error messages (Where): its index in the source and a
    // name (a database key, a file).
    std::vector<std::uint64_t> records;
    std::vector<std::string> keys;
  };

  // The source's set-up, on the Net's thread: reads and checks the
  // parameters, opens the source, reads what fixes the shapes, and returns
  // the shape of every top (the batch size first). Errors name the layer
  // (LayerError). prefetch_rng() is already seeded.
  virtual Status DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) = 0;
  // What DataLayerSetUp checks first in Data's, ImageData's and WindowData's
  // parameter `p` (`field`: "data_param", ...; present: whether the layer
  // has it): a source (`source_is`: what it names), a positive batch_size,
  // and none of the fields Caffe moved to transform_param.
  template <class Param>
  Status CheckSourceAndBatch(bool present, const Param& p, const std::string& field,
                             const std::string& source_is) const {
    if (!present || p.source().empty()) return LayerError(field + ".source is required (" + source_is + ")");
    if (p.batch_size() == 0) return LayerError(field + ".batch_size must be positive");
    if (p.has_scale() || p.has_mean_file() || p.has_crop_size() || p.has_mirror()) {
      return LayerError(field + ".scale/mean_file/crop_size/mirror are deprecated; put them in transform_param");
    }
    return Status::OK();
  }
  // On the prefetch thread: fills every buffer of `batch` and its records
  // and keys with the next batch of items. An error ends the thread; it
  // names the item (Where) and what is wrong. May return early (OK) once
  // stopping().
  virtual Status FillBatch(Batch* batch) = 0;
  // Where an item came from: "LMDB database 'x', record 3 (key 'k')".
  virtual std::string Where(std::uint64_t record, const std::string& key) const = 0;

  // Stops and joins the prefetch thread; every subclass's destructor calls
  // it first. Idempotent.
  void StopPrefetch() NEREUS_LOCKS_EXCLUDED(mu_);
  // For FillBatch: the layer is being destroyed.
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }
  // The prefetch thread's engine (and DataLayerSetUp's, before the thread
  // starts).
  std::mt19937* prefetch_rng() { return &prefetch_rng_; }

  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
#ifdef NEREUS_HAVE_CUDA
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
#endif

 private:
  // The device side on a GPU (prefetching_data_layer.cu): staging buffers,
  // events, the batch whose copy is in flight.
  struct GpuStaging;

  // The oldest prefetched batch (waits for one) into *batch; the prefetch
  // thread's error once the good batches before it are taken, or the label
  // check's error (CheckLabels; the batch is given back).
  Status TakeBatch(std::unique_ptr<Batch>* batch) NEREUS_LOCKS_EXCLUDED(mu_);
  // Gives a batch back to the prefetch thread.
  void ReturnBatch(std::unique_ptr<Batch> batch) NEREUS_LOCKS_EXCLUDED(mu_);
  // The first label of the batch that a consumer does not accept.
  Status CheckLabels(const Batch& batch) const;
  void PrefetchLoop() NEREUS_LOCKS_EXCLUDED(mu_);

  std::vector<std::vector<int>> top_shapes_;
  int batch_items_ = 0;  // top_shapes_[0][0].
  // (top, range) of the tops' label consumers (Net thread only).
  std::vector<std::pair<int, LabelRange>> label_ranges_;
  std::mt19937 prefetch_rng_;

  Mutex mu_;
  CondVar cv_;  // Signals changes of free_, full_, stop_, error_.
  std::deque<std::unique_ptr<Batch>> free_ NEREUS_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Batch>> full_ NEREUS_GUARDED_BY(mu_);
  bool stop_ NEREUS_GUARDED_BY(mu_) = false;
  Status error_ NEREUS_GUARDED_BY(mu_);
  // Mirrors stop_ so the thread can leave a batch early without the lock.
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  // After the queues: destroyed first (it waits for its copy in flight).
  std::shared_ptr<GpuStaging> staging_;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_PREFETCHING_DATA_LAYER_H_

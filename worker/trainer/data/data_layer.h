// DataLayer: Caffe's "Data" layer. Reads Datum records from an LMDB
// (data_param.source) in key order, wrapping around at the end, applies
// transform_param (DataTransformer) and fills top[0] with
// batch_size x C x H x W floats and, when a second top is given, top[1] with
// the batch_size labels.
//
// Data parallelism: with num_shards = P and shard_index = k, this layer reads
// only the records at positions i (0-based, in key order, counted afresh each
// pass over the database) with i mod P == k, so P workers read disjoint parts
// that together cover the database. data_param.batch_size is per worker. The
// trainer passes the shard through DataLayerOptions (RegisterDataLayers with
// options, or set_options before SetUp); the default 0/1 reads everything.
//
// rand_skip: at set-up the layer skips rng() % rand_skip of its own records,
// so shards stay disjoint.
//
// Prefetching: SetUp starts one background thread, owned by the layer, that
// fills up to data_param.prefetch batches ahead (a bounded queue). Forward
// takes the oldest ready batch, blocking until one is ready. The destructor
// stops the thread (waking it wherever it waits) and joins it, so a layer may
// be destroyed at any time, mid-epoch included. The thread uses its own
// std::mt19937, seeded at SetUp with one draw from the Net's rng(), so runs
// are reproducible and the Net's engine is never touched off its thread.
//
// On a GPU (a layer with a device): the batches are prefetched into
// page-locked host buffers (allocated once, at set-up), and each Forward
// starts the copy of the *next* batch to a device staging buffer on the
// device's copy stream, so that it runs while this iteration computes; the
// next Forward waits (on the compute stream, through an event) for that
// copy and moves the batch into the tops by a device-to-device copy. The
// batches and their order are the CPU's.
//
// Errors: bad configuration, a missing or truncated database, an empty shard
// or a first record that cannot be used are Status errors from SetUp naming
// the layer. A record the prefetch thread cannot use (not a Datum, another
// shape, a data size that does not match its shape, an LMDB read error) ends
// the thread; the Forward that needs that record reports the error through
// Layer::forward_error (Net::Forward returns it), after the good batches
// before it. A label that a consumer of the label top cannot take (its
// Layer::AcceptedLabels, handed over by the Net) is reported by the Forward
// of its batch. Every message names the database and the record, e.g.
//   layer mnist (Data): LMDB database 'data/train_lmdb', record 2 (key
//   '00000002'): not a Datum (3 bytes that do not parse)
// On a GPU the next batch is taken one Forward ahead, but an error found in
// it is kept and reported by the Forward that needs the batch, as on the CPU.
//
// Not thread-safe (like every Layer); the prefetch thread is internal.
#ifndef NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_transformer.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/gpu/host_buffer.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {
namespace data {

struct DataLayerOptions {
  // This worker's index among num_shards readers; record i goes to worker
  // i mod num_shards. Requires 0 <= shard_index < num_shards.
  int shard_index = 0;
  int num_shards = 1;
  // A resumed job: batches of this shard the run before already consumed
  // (iterations x iter_size); SetUp skips their records (modulo the shard's
  // size, as every pass reads the shard in the same order), after rand_skip.
  std::uint64_t skip_batches = 0;
};

class DataLayer : public Layer {
 public:
  explicit DataLayer(const caffe::LayerParameter& param, DataLayerOptions options = {});
  // Stops and joins the prefetch thread.
  ~DataLayer() override;

  // Only before SetUp.
  void set_options(const DataLayerOptions& options);
  const DataLayerOptions& options() const { return options_; }

  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The tops are sized at set-up and by each Forward.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}

  const char* type() const override { return "Data"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }
  bool HasGpuCode() const override { return true; }

  // Records in this worker's shard (per pass over the database).
  std::size_t shard_size() const { return shard_size_; }

  // Top 1 (labels): each record's label must be one `range` accepts.
  void RestrictLabels(int top_index, const LabelRange& range) override;

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
#ifdef NEREUS_HAVE_CUDA
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
#endif

 private:
  struct Batch {
    gpu::HostBuffer data;  // Page-locked on a GPU.
    gpu::HostBuffer label;
    // Per item, for the label check and error messages: the record's label
    // as stored, its index in key order and its key.
    std::vector<std::int32_t> labels;
    std::vector<std::uint64_t> records;
    std::vector<std::string> keys;
  };
  // The device side of a GPU Data layer (data_layer.cu): staging buffers,
  // events, the batch whose copy is in flight.
  struct GpuStaging;

  // The oldest prefetched batch (waits for one) into *batch; the prefetch
  // thread's error once the good batches before it are taken, or the label
  // check's error (CheckLabels; the batch is given back).
  Status TakeBatch(std::unique_ptr<Batch>* batch) NEREUS_LOCKS_EXCLUDED(mu_);
  // Gives a batch back to the prefetch thread.
  void ReturnBatch(std::unique_ptr<Batch> batch) NEREUS_LOCKS_EXCLUDED(mu_);

  // Validates data_param; returns the error naming the bad field.
  Status CheckParam() const;
  // Reads this shard's next record into *datum (prefetch thread and SetUp);
  // *index is its position in key order.
  Status NextRecord(caffe::Datum* datum, std::string* key, std::uint64_t* index);
  // Reads past `count` records (rand_skip, a resumed job's batches); an
  // error names the layer.
  Status SkipRecords(std::uint64_t count);
  // "LMDB database '<path>', record <index> (key '<key>')".
  std::string Where(std::uint64_t index, const std::string& key) const;
  Status FillBatch(Batch* batch);
  // The first label of the batch that a consumer does not accept.
  Status CheckLabels(const Batch& batch) const;
  void PrefetchLoop() NEREUS_LOCKS_EXCLUDED(mu_);
  void StopPrefetch() NEREUS_LOCKS_EXCLUDED(mu_);

  DataLayerOptions options_;
  int batch_size_ = 0;
  bool output_labels_ = false;
  std::vector<int> datum_shape_;          // {1, C, H, W} after the transform.
  std::string first_shape_;               // "CxHxW" of the first record, before the transform.
  std::vector<LabelRange> label_ranges_;  // Of the label top's consumers (Net thread only).
  std::size_t shard_size_ = 0;

  std::unique_ptr<DataTransformer> transformer_;
  std::unique_ptr<LmdbDatabase> db_;
  // Used by SetUp, then only by the prefetch thread.
  std::unique_ptr<LmdbCursor> cursor_;
  std::uint64_t position_ = 0;  // Index of cursor_'s record in the current pass.
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

// Registers "Data" with the given sharding for every Data layer the registry
// builds (a distributed worker passes its rank and the worker count).
// RegisterDataLayers(registry) (layer_registry.h) uses the default 0 of 1.
void RegisterDataLayers(LayerRegistry* registry, const data::DataLayerOptions& options);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DATA_LAYER_H_

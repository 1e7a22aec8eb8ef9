// LayerPipeline: the layer-wise API (GradientsReady / WaitWeights).
#ifndef NEREUS_WORKER_CLIENT_LAYER_PIPELINE_H_
#define NEREUS_WORKER_CLIENT_LAYER_PIPELINE_H_

#include <cstdint>
#include <map>
#include <vector>

#include "common/base/mutex.h"
#include "nereus/client.h"
#include "worker/client/factor_exchange.h"
#include "worker/client/merge_profiler.h"
#include "worker/client/message_builder.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/tensor_registry.h"

namespace nereus {

// Owns the comm layers (the tensors of one user layer, numbered from the
// input), each layer's last pushed and requested clocks and the handles
// WaitWeights waits on, and the MergeProfiler. Decides, per schedule, when a
// layer's gradients leave (alone, as a merge group, or all at the end of
// backward) and when its weights are requested (riding on its push, or
// explicitly). User threads call it, concurrently; its lock guards all of
// the above and is taken before the TensorRegistry's and RequestTable's.
//
// Per-layer state of new features (e.g. sufficient factors exchanged
// between workers) belongs in CommLayer.
class LayerPipeline {
 public:
  // Every pointer must outlive this object.
  LayerPipeline(const ClientOptions& options, TensorRegistry* tensors, RequestTable* requests, MessageBuilder* builder,
                ServerQueues* queues, FactorExchange* factors = nullptr);

  // Init: freezes the registry (see TensorRegistry::Freeze) and groups the
  // tensors into comm layers, atomically for every other caller.
  Status Initialize(size_t num_initial, uint64_t partition_bytes, int num_servers, int rank) NEREUS_LOCKS_EXCLUDED(mu_);

  // Whether every tensor has data and diff buffers (the layer-wise API works).
  bool layered() const;
  // Queue priority of tensor `tensor`'s first partition (its comm layer's, or
  // its id's without layers), for Push and Pull.
  uint64_t TensorPriority(int tensor) const;
  void SetLink(const LinkModel& link);
  // After Initialize, before Prefetch: the tensors whose gradients travel as
  // sufficient factors (FactorExchange) instead of through the servers. Their
  // weights come from the servers for clock 0 only.
  void SetSfbTensors(const std::vector<int>& tensors);

  // Requests comm layer `layer`'s weights for clock 0 (Init's prefetch).
  void Prefetch(int layer);
  int num_layers() const;

  // See Client::GradientsReady / Client::WaitWeights.
  Status GradientsReady(int layer, int64_t clock) NEREUS_LOCKS_EXCLUDED(mu_);
  Status WaitWeights(int layer, int64_t clock) NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  struct CommLayer {
    std::vector<int> tensors;
    uint64_t bytes = 0;
    int64_t ready_clock = -1;   // Last clock GradientsReady was called for.
    int64_t pulled_clock = -1;  // Clock whose weights were requested.
    Handle pull;                // Weights for pulled_clock.
    Handle push;                // Gradients of pulled_clock - 1.
  };

  // The comm layer of Net layer `layer` (-1: it has no tensors), or why `op`
  // may not run now.
  StatusOr<int> CommLayerOf(const char* op, int layer) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Partitions of comm layer li's tensors (those through the servers, plus the
  // SFB tensors' when `with_sfb`).
  int Partitions(int li, bool with_sfb = false) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Sfb(int tensor) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !sfb_.empty() && sfb_[tensor]; }
  // Pushes the gradients of comm layers `which` for `clock`, each carrying
  // the pull of clock + 1.
  void BuildLayerPushes(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Explicit pulls of comm layers `which` for `clock`.
  void BuildLayerPulls(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientOptions options_;
  TensorRegistry* const tensors_;
  RequestTable* const requests_;
  MessageBuilder* const builder_;
  ServerQueues* const queues_;
  FactorExchange* const factors_;

  mutable Mutex mu_;
  bool initialized_ NEREUS_GUARDED_BY(mu_) = false;
  bool layered_ NEREUS_GUARDED_BY(mu_) = false;
  int rank_ NEREUS_GUARDED_BY(mu_) = -1;
  std::map<int, int> layer_index_ NEREUS_GUARDED_BY(mu_);  // User layer -> comm layer.
  std::vector<CommLayer> layers_ NEREUS_GUARDED_BY(mu_);
  std::vector<uint64_t> layer_bytes_ NEREUS_GUARDED_BY(mu_);  // Gradient bytes per comm layer.
  MergeProfiler merges_ NEREUS_GUARDED_BY(mu_);
  // The first clock asked for (0, or a resumed job's start clock): the merge
  // profiler counts clocks from it.
  int64_t first_clock_ NEREUS_GUARDED_BY(mu_) = -1;
  std::vector<bool> sfb_ NEREUS_GUARDED_BY(mu_);  // Per tensor.
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_LAYER_PIPELINE_H_

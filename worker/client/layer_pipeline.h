// LayerPipeline: the layer-wise API (GradientsReady / WaitWeights).
#ifndef NEREUS_WORKER_CLIENT_LAYER_PIPELINE_H_
#define NEREUS_WORKER_CLIENT_LAYER_PIPELINE_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "nereus/client.h"
#include "worker/client/factor_exchange.h"
#include "worker/client/merge_profiler.h"
#include "worker/client/message_builder.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/sfb_paths.h"
#include "worker/client/sfb_trials.h"
#include "worker/client/tensor_registry.h"
#include "worker/client/timeline.h"

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
  // `job`: the consistency WaitWeights's time-out message explains.
  Status Initialize(size_t num_initial, uint64_t partition_bytes, int num_servers, int rank, const JobInfo& job)
      NEREUS_LOCKS_EXCLUDED(mu_);

  // Whether every tensor has data and diff buffers (the layer-wise API works).
  bool layered() const;
  // Queue priority of tensor `tensor`'s first partition (its comm layer's, or
  // its id's without layers), for Push and Pull.
  uint64_t TensorPriority(int tensor) const;
  void SetLink(const LinkModel& link);

  // HybComm (docs/ARCHITECTURE.md): which tensors travel as sufficient
  // factors (FactorExchange, configured for them) instead of through the
  // servers, from the job's first clock, and how that may change.
  struct SfbSetup {
    int64_t start_clock = 0;
    std::vector<bool> start_sfb;  // Per tensor.
    // Measured switching: the trials and the layers they try.
    bool trials = false;
    SfbTrialsConfig trials_config;
    std::vector<TrialLayer> trial_layers;
    SfbTrials::Pricer pricer;
    // A forced schedule: (tensor, entry), in clock order.
    std::vector<std::pair<int, SfbScheduleEntry>> forced;
    // The job's agreement: Node::Barrier of WORKER with min_values, under
    // `name`; null when nothing is agreed (no trials).
    std::function<Status(const std::string& name, std::vector<double>* values)> agree;
    // ClientInternals::sfb_injected_costs, by tensor id.
    std::map<int, std::pair<double, double>> injected_costs;
    Timeline* timeline = nullptr;  // Marks the trials' clocks (null: none).
  };
  // After Initialize, before Prefetch. A tensor sent as factors from the
  // first clock takes its weights from the servers for that clock only.
  void ConfigureSfb(SfbSetup setup) NEREUS_LOCKS_EXCLUDED(mu_);
  // After ConfigureSfb, where paths may change: LENDs of every partition of
  // the tensors sent as factors from the first clock, so that the servers
  // hold their updates until a hand-back (none is needed otherwise). The
  // handle is done once every server took them.
  Handle LendAtStart() NEREUS_LOCKS_EXCLUDED(mu_);
  // Client::SfbAt, Client::sfb_tensors.
  bool SfbAt(int tensor, int64_t clock) const NEREUS_LOCKS_EXCLUDED(mu_);
  std::vector<int> SfbTensors() const NEREUS_LOCKS_EXCLUDED(mu_);
  // ClientStats::sfb_switches and sfb_trial_clocks.
  void CountSfb(ClientStats* stats) const NEREUS_LOCKS_EXCLUDED(mu_);

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

  using Clock = std::chrono::steady_clock;
  using Deadline = Clock::time_point;
  // Waits for `h` (WaitWeights's pull or push of `layer`) until `deadline`
  // (max: no bound); past it, TimedOut naming each request still open.
  Status Await(const Handle& h, Deadline deadline, int layer, int64_t clock, const char* what) const;
  // WaitWeights(layer, clock)'s DeadlineExceeded, naming what is `awaited`.
  Status TimedOut(int layer, int64_t clock, const std::string& awaited) const;

  // The comm layer of Net layer `layer` (-1: it has no tensors), or why `op`
  // may not run now.
  StatusOr<int> CommLayerOf(const char* op, int layer) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Partitions of comm layer li's tensors whose weights of `clock` come
  // from the servers.
  int PulledPartitions(int li, int64_t clock) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes the gradients of comm layers `which` for `clock`, each carrying
  // the pull of clock + 1; sends the factors of those travelling as factors,
  // and, on worker 0, hands back to the servers those that come back to them
  // at `clock`.
  Status BuildLayerPushes(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The start of `clock` (the first WaitWeights or GradientsReady of it):
  // HybComm's trials measure the last clock, agree where they must (the
  // barrier, without the lock) and decide the paths of clock + 1.
  Status StartClock(int64_t clock) NEREUS_LOCKS_EXCLUDED(mu_);
  TrialStep BeginClock(int64_t clock) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishClock(int64_t clock, const std::vector<double>& reduced, std::vector<QueuedMessage>* out)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tensor `t` travels `sfb` from `clock` on: a LEND of its partitions when
  // it leaves the servers (their history comes back to the FactorExchange).
  void Switch(int t, int64_t clock, bool sfb, const char* why, std::vector<QueuedMessage>* out)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // This worker's figures for the trials: per trial layer, the backward
  // time below it in the warm-up (median), and its wait in WaitWeights in
  // `clock`.
  std::vector<double> Overlaps() const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double WaitOf(int64_t clock, int tensor) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Explicit pulls of comm layers `which` for `clock`.
  void BuildLayerPulls(const std::vector<int>& which, int64_t clock, std::vector<QueuedMessage>* out)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientOptions options_;
  // Set by Initialize, then read-only (read without the lock by Await).
  int num_servers_ = 0;
  JobInfo job_;
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
  // HybComm: every tensor's path per clock, the trials, the forced switches
  // not yet made, what the trials read.
  SfbPaths paths_ NEREUS_GUARDED_BY(mu_);
  bool switching_ NEREUS_GUARDED_BY(mu_) = false;
  std::unique_ptr<SfbTrials> trials_ NEREUS_GUARDED_BY(mu_);
  int64_t trials_from_ NEREUS_GUARDED_BY(mu_) = 0;  // The clock of the prior's agreement.
  std::deque<std::pair<int, SfbScheduleEntry>> forced_ NEREUS_GUARDED_BY(mu_);
  std::function<Status(const std::string&, std::vector<double>*)> agree_;  // Set by ConfigureSfb, then read-only.
  std::map<int, std::pair<double, double>> injected_ NEREUS_GUARDED_BY(mu_);
  Timeline* timeline_ NEREUS_GUARDED_BY(mu_) = nullptr;
  int64_t started_clock_ NEREUS_GUARDED_BY(mu_) = -1;  // The last clock started.
  int64_t clock_start_us_ NEREUS_GUARDED_BY(mu_) = 0;
  // When the last WaitWeights or GradientsReady of started_clock_ ended (0:
  // none yet): the end of its busy span, so that a pause of the trainer's
  // between iterations (a test phase, a snapshot) is no part of the period.
  int64_t busy_end_us_ NEREUS_GUARDED_BY(mu_) = 0;
  bool deciding_ NEREUS_GUARDED_BY(mu_) = false;  // A clock's start is agreeing (without the lock).
  CondVar decided_cv_;
  std::map<int64_t, std::vector<int64_t>> wait_us_ NEREUS_GUARDED_BY(mu_);   // Clock -> per comm layer.
  std::map<int64_t, std::vector<int64_t>> ready_us_ NEREUS_GUARDED_BY(mu_);  // Clock -> per comm layer (warm-up).
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_LAYER_PIPELINE_H_

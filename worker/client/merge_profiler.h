// MergeProfiler: measures what MG-WFBP merging needs and plans the groups.
#ifndef NEREUS_WORKER_CLIENT_MERGE_PROFILER_H_
#define NEREUS_WORKER_CLIENT_MERGE_PROFILER_H_

#include <cstdint>
#include <map>
#include <vector>

#include "common/base/status.h"
#include "common/net/node.h"
#include "worker/client/merge_plan.h"
#include "worker/client/request_table.h"

namespace nereus {

// Times PING round trips of 32 KB..2 MB to every server (7 repeats of each
// size up to 256 KB, 3 above) and fits t(p) = alpha + beta * p through the
// per-server, per-size minima with FitLinkRobust (bounded; the default model
// where implausible). Blocking; runs on the thread of Init, before any
// layer-wise call.
StatusOr<LinkFit> CalibrateLink(Node* node, RequestTable* requests);

// Owns the link model, the backward timings of clocks 1..K and the merge
// groups of consecutive comm layers. Until the plan is made (at the first
// GradientsReady of clock K + 1) every layer is a group of its own. Not
// thread-safe: LayerPipeline calls it under its lock (user threads).
class MergeProfiler {
 public:
  // `enabled`: schedule kFull with merging on; otherwise one group per layer
  // for ever. `profile_iterations`: K.
  MergeProfiler(bool enabled, int profile_iterations) : enabled_(enabled), profile_iterations_(profile_iterations) {}

  // One group per layer, for `num_layers` comm layers (at Init).
  void Reset(int num_layers);
  void set_link(const LinkModel& link) { link_ = link; }

  // Whether backward times are still being recorded.
  bool profiling() const { return enabled_ && !planned_; }
  // GradientsReady(layer, clock) at `us` / the end of WaitWeights(_, clock).
  void RecordReady(int64_t clock, int layer, int64_t us);
  void RecordWaitEnd(int64_t clock, int64_t us);

  // Whether GradientsReady(_, clock) should plan the groups if it is the
  // first of its clock: merging is on, not planned yet and clocks 1..K are
  // timed.
  bool WantsPlan(int64_t clock) const;
  // Plans the groups, once, from `layer_bytes` (gradient bytes per comm
  // layer) and the median backward time of each layer over clocks 1..K.
  void Plan(const std::vector<uint64_t>& layer_bytes, int rank);

  // The group holding comm layer `layer`.
  const MergeGroup& group_of(int layer) const { return groups_[group_of_[layer]]; }

 private:
  struct ClockProfile {
    std::vector<int64_t> ready_us;  // By comm layer.
    int64_t last_wait_us = 0;
  };
  ClockProfile& Profile(int64_t clock);

  const bool enabled_;
  const int profile_iterations_;
  int num_layers_ = 0;
  LinkModel link_;
  bool planned_ = false;
  std::vector<MergeGroup> groups_;
  std::vector<int> group_of_;  // Comm layer -> index in groups_.
  std::map<int64_t, ClockProfile> profiles_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_MERGE_PROFILER_H_

// SfbPaths: which way each tensor's gradient of each clock travels (HybComm;
// docs/ARCHITECTURE.md, "HybComm"): through the servers (PS) or as
// sufficient factors among the workers (SFB). A tensor's path changes only
// at a clock boundary: from clock c on, every gradient of it takes the new
// path, and the weights of clock c come from the old one (the last update of
// the old path is the one of clock c - 1).
//
// Also the forced schedule (ClientOptions::sfb_schedule), parsed here.
//
// Not thread-safe: LayerPipeline keeps one under its lock.
#ifndef NEREUS_WORKER_CLIENT_SFB_PATHS_H_
#define NEREUS_WORKER_CLIENT_SFB_PATHS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {

class SfbPaths {
 public:
  // `start`: the job's first clock; `sfb_at_start`: per tensor, whether its
  // gradients travel as factors from there.
  void Reset(int64_t start, const std::vector<bool>& sfb_at_start);

  // Whether tensor `t`'s gradient of `clock` travels as factors (a clock
  // before the start: the start's path).
  bool At(int t, int64_t clock) const;
  // From `clock` on, tensor `t` travels `sfb`. `clock` must be after the
  // start and after every switch of `t` made so far (CHECKed: the client's
  // own bug otherwise).
  void Set(int t, int64_t clock, bool sfb);

  // The tensors whose gradients of `clock` travel as factors, in id order.
  std::vector<int> SfbTensors(int64_t clock) const;
  // Whether tensor `t`'s weights of `clock` come from the servers: the
  // start's, or the gradients of clock - 1 went through them.
  bool WeightsFromServers(int t, int64_t clock) const { return clock <= start_ || !At(t, clock - 1); }
  // Switches made so far (every tensor).
  int switches() const { return switches_; }
  int64_t start() const { return start_; }

 private:
  int64_t start_ = 0;
  std::vector<bool> initial_;
  std::vector<std::map<int64_t, bool>> switches_by_tensor_;  // clock -> path from there on.
  int switches_ = 0;
};

// One entry of a forced schedule: from `clock` on, the tensors of `layer`
// travel as factors (`sfb`) or through the servers.
struct SfbScheduleEntry {
  std::string layer;
  int64_t clock = 0;
  bool sfb = false;
};

// "layer:clock:path[,layer:clock:path...]", path "sfb" or "ps", clock >= 0
// (e.g. "fc6:10:sfb,fc6:20:ps"). Errors name the bad entry.
StatusOr<std::vector<SfbScheduleEntry>> ParseSfbSchedule(const std::string& text);

// Whether the schedule's `layer` names tensor `tensor_name`: the name
// itself, or its layer ("fc6" names "fc6/0", as the trainer names a layer's
// weight).
bool ScheduleNames(const std::string& layer, const std::string& tensor_name);

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_SFB_PATHS_H_

// MG-WFBP merging of consecutive layers' gradients (Shi et al., "MG-WFBP:
// Efficient Data Communication for Distributed Synchronous SGD Algorithms",
// INFOCOM 2019; docs/CLIENT.md).
#ifndef NEREUS_WORKER_CLIENT_MERGE_PLAN_H_
#define NEREUS_WORKER_CLIENT_MERGE_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace nereus {

// Cost of one message of p bytes: alpha + beta * p seconds.
struct LinkModel {
  double alpha = 0;  // Seconds.
  double beta = 0;   // Seconds per byte.
};

// Least-squares line through (bytes, seconds) samples, unbounded (alpha or
// beta may come out negative). Needs two distinct sizes.
StatusOr<LinkModel> FitLinkModel(const std::vector<std::pair<double, double>>& samples);

// What the planner assumes when the calibration is implausible: 100 us a
// message (the per-message cost measured on the emulated cluster, README) and
// 10 Gbit/s (0.8 ns/byte).
inline constexpr LinkModel kDefaultLinkModel{100e-6, 0.8e-9};

// One timed round trip of `bytes` to `target` (a server), in seconds.
struct PingSample {
  int target = 0;
  double bytes = 0;
  double seconds = 0;
};

struct LinkFit {
  LinkModel model;
  bool fell_back = false;      // Implausible: `model` is the fallback.
  bool alpha_bounded = false;  // The fitted alpha exceeded the smallest round trip.
  double fitted_alpha = 0;     // The unbounded least-squares figures (0 where there was no fit).
  double fitted_beta = 0;
  double min_round_trip = 0;  // The smallest per-(target, size) minimum, seconds.
  std::string note;           // The measured figures and what was bounded or replaced; empty if neither.
};

// Robust alpha/beta from repeated pings on a loaded machine. Scheduling
// delays only ever add to a round trip, so each (target, size) is reduced to
// its minimum (not the median: one wake-up of tens of ms in half the repeats
// moves a median, never a minimum). A least-squares line through those minima
// is then bounded: alpha is clamped to [0, smallest minimum] (a message can
// never cost more at start-up than the fastest round trip measured); a fit
// with beta <= 0 or not finite, or fewer than two distinct sizes, is
// implausible and `fallback` is used instead. Minima are per target, since the
// targets are not alike (a worker's own host's server is not behind the link).
LinkFit FitLinkRobust(const std::vector<PingSample>& pings, const LinkModel& fallback = kDefaultLinkModel);

// A group of consecutive layers [first, last] sent as one message.
struct MergeGroup {
  int first = 0;
  int last = 0;
};

// Layers are numbered from the input (0); backward runs L-1 down to 0.
// bytes[l]: gradient bytes of layer l; backward_s[l]: its backward time.
// Applies MG-WFBP's rule from l = L-1 down to 1 and returns the groups in
// layer order; every layer is in exactly one group.
std::vector<MergeGroup> PlanMerges(const LinkModel& link, const std::vector<double>& bytes,
                                   const std::vector<double>& backward_s);

// The modelled end of the last communication (tau_c[0] + t_c[0]) for a plan.
double ModelledFinish(const LinkModel& link, const std::vector<double>& bytes, const std::vector<double>& backward_s,
                      const std::vector<MergeGroup>& plan);

// One group per layer: no merging.
std::vector<MergeGroup> OnePerLayer(int layers);

// The smallest modelled gain (a fraction of the unmerged plan's modelled end)
// for which ChooseMerges takes MG-WFBP's plan.
inline constexpr double kMinMergeGain = 0.01;

struct MergeChoice {
  std::vector<MergeGroup> groups;
  double merged_end = 0;    // ModelledFinish of PlanMerges' plan.
  double unmerged_end = 0;  // ModelledFinish of one group per layer.
  bool merged = false;      // PlanMerges' plan was taken.
};

// PlanMerges' plan if it ends at least kMinMergeGain x unmerged_end sooner
// than one message per layer, else one group per layer. MG-WFBP's rule also
// merges a layer whose message would wait behind a busy link anyway, even
// when that saves no start-up cost (alpha 0): by its model, a tie. Merging has
// costs its model leaves out: a group's weights come back together, so the
// layers nearer the input wait for the group's largest, and a group's bytes
// travel at the priority of its most urgent layer. Measured on the emulated
// cluster (VGG19-22K, 8 hosts, 5 Gbit/s-equivalent, alpha 0): 19 layers merged
// into 3 groups for a modelled gain of 0 made the iteration 5-12% slower than
// no merging.
MergeChoice ChooseMerges(const LinkModel& link, const std::vector<double>& bytes,
                         const std::vector<double>& backward_s);

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_MERGE_PLAN_H_

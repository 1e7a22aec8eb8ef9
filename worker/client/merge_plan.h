// MG-WFBP merging of consecutive layers' gradients (REFERENCE.md section 3).
#ifndef NEREUS_WORKER_MERGE_PLAN_H_
#define NEREUS_WORKER_MERGE_PLAN_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "common/status.h"

namespace nereus {

// Cost of one message of p bytes: alpha + beta * p seconds.
struct LinkModel {
  double alpha = 0;  // Seconds.
  double beta = 0;   // Seconds per byte.
};

// Least-squares line through (bytes, seconds) samples. Needs two distinct sizes.
StatusOr<LinkModel> FitLinkModel(const std::vector<std::pair<double, double>>& samples);

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

}  // namespace nereus

#endif  // NEREUS_WORKER_MERGE_PLAN_H_

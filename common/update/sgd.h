// Caffe's solver semantics (Caffe's solver.cpp and solvers/*.cpp): the learning rate
// policies and the update rules of Caffe's SGD, Nesterov, AdaGrad, RMSProp,
// AdaDelta and Adam solvers, shared by the parameter servers and the
// standalone trainer so both apply bit-identical updates.
#ifndef NEREUS_COMMON_UPDATE_SGD_H_
#define NEREUS_COMMON_UPDATE_SGD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/update/sgd_rules.h"
#include "proto/nereus.pb.h"

namespace nereus {

// Checks that `config` names a known lr_policy and regularization type and
// carries the fields that policy needs (e.g. stepsize > 0 for "step"), and
// what Caffe's solvers check: no momentum with AdaGrad or RMSProp, rms_decay
// in [0, 1) for RMSProp.
Status ValidateSgdConfig(const pb::SgdConfig& config);

// Caffe's solver type names ("SGD", "Nesterov", "AdaGrad", "RMSProp",
// "AdaDelta", "Adam"; case-sensitive as in Caffe's solver registry).
// SolverTypeName also names SOLVER_AVERAGE ("Average"), which is not Caffe's
// and which SolverTypeFromName does not accept (no trainer runs it).
StatusOr<pb::SolverType> SolverTypeFromName(const std::string& name);
const char* SolverTypeName(pb::SolverType type);

// History blobs Caffe keeps per learnable parameter: 2 for AdaDelta (squared
// gradients, squared updates) and Adam (m, v), else 1.
int NumHistoryBlobs(pb::SolverType type);

// One Caffe solver step of `config.type()` on `n` elements at iteration
// `iter` (0-based; Adam's t is iter + 1): regularization, then Caffe's
// ComputeUpdateValue for the type, then data -= update (Net::Update). Each
// line below is one of Caffe's vector operations and rounds to float as it
// does; g = diff + local_decay * data (L2; L1 uses sign(data)),
// lr = rate * lr_mult, h = history, h2 = history2:
//   SGD       h = lr * g + momentum * h;              u = h
//   Nesterov  h' = lr * g + momentum * h;             u = (1 + momentum) * h' - momentum * h
//   AdaGrad   h = h + g * g;                          u = lr * (g / (pow(h, 0.5) + delta))
//   RMSProp   h = (1 - rms_decay) * g * g + rms_decay * h;
//             u = lr * (g / (pow(h, 0.5) + delta))
//   AdaDelta  h = (1 - momentum) * g * g + momentum * h;
//             s = g * pow((delta + h2) / (delta + h), 0.5);
//             h2 = (1 - momentum) * s * s + momentum * h2;  u = lr * s
//   Adam      h = (1 - momentum) * g + momentum * h;
//             h2 = (1 - momentum2) * g * g + momentum2 * h2;
//             c = float(sqrt(1 - momentum2^t) / (1 - momentum^t)) (in double)
//             u = (lr * c) * (h / (pow(h2, 0.5) + delta))
//   Average   data = g as given (not Caffe's: rate, decay and history unused;
//             the servers' average of the workers' gradients becomes the
//             tensor's values, for trainers that run their own optimizer)
// `history2` must hold n floats for AdaDelta and Adam and may be null
// otherwise. `diff` is read only. Deterministic: the same inputs give the
// same bits.
void SolverStep(const pb::SgdConfig& config, int64_t iter, float rate, float lr_mult, float decay_mult,
                const float* diff, float* data, float* history, float* history2, size_t n);

// What one SolverStep of a parameter amounts to per element (sgd_rules.h):
// SolverStep runs it on the CPU, the GPU trainer (worker/trainer/gpu/
// solver_step.cu) runs the same element functions on the device.
sgd_rules::StepPlan PlanSolverStep(const pb::SgdConfig& config, int64_t iter, float rate, float lr_mult,
                                   float decay_mult);

// Caffe's learning rate at iteration `iter` (0-based, the value before the
// iteration's increment). `config` must have passed ValidateSgdConfig.
float LearningRate(const pb::SgdConfig& config, int64_t iter);

// SolverStep for type SGD (history2 unused). One Caffe SGD step on `n`
// elements, in Caffe's order:
//   diff    += local_decay * data          (L2; L1 uses sign(data))
//   history  = local_rate * diff + momentum * history
//   data    -= history
// where local_rate = rate * lr_mult and local_decay = weight_decay * decay_mult.
// `diff` is read only. Deterministic: the same inputs give the same bits.
// The loops are vectorised element-wise (every lane does the scalar loop's
// operations in the same order, no fused multiply-add), so the result is
// bitwise that of the scalar loop. `diff` must not overlap `data` or
// `history`.
void SgdStep(const pb::SgdConfig& config, float rate, float lr_mult, float decay_mult, const float* diff, float* data,
             float* history, size_t n);

// SgdStep on the average of `k` gradients, made on the fly, reading the
// weights from `data_in` and writing them to `data_out` (the same array for
// an in-place step; otherwise not overlapping), `history` in place. Bitwise
// equal to AverageInOrder(srcs, k, avg, n) and then SgdStep(..., avg, ...) on
// a copy of `data_in`, in one pass over the data instead of two (the average
// is never written out; k == 1 steps on srcs[0] itself). Out of place saves
// the copy when the old weights must stay readable (a reply still sending
// them). The gradients may overlap neither array. `divisor` (0: k) scales
// the sum by 1/divisor instead of 1/k: host-local aggregation's host sums
// stand for more workers than there are sums.
void SgdStepAveraged(const pb::SgdConfig& config, float rate, float lr_mult, float decay_mult, const float* const* srcs,
                     size_t k, const float* data_in, float* data_out, float* history, size_t n, size_t divisor = 0);

// One update of weights that zero-copy replies may still hold (a server's
// partition): `step(in, out)` writes the new weights. When nothing else holds
// `*weights` the step is in place (in == out); else it reads `*weights` and
// writes `*spare` (reused when nothing holds it any more, else made anew),
// which then becomes the weights, so a held reply keeps its version's values.
template <class Step>
void UpdateHeldWeights(std::shared_ptr<std::vector<float>>* weights, std::shared_ptr<std::vector<float>>* spare,
                       Step step) {
  float* data = (*weights)->data();
  if (weights->use_count() == 1) {
    step(static_cast<const float*>(data), data);
    return;
  }
  if (*spare == nullptr || spare->use_count() > 1) *spare = std::make_shared<std::vector<float>>((*weights)->size());
  step(static_cast<const float*>(data), (*spare)->data());
  std::swap(*weights, *spare);
}

// dst[i] = (src_0[i] + src_1[i] + ... + src_{k-1}[i]) * (1 / k), summed in the
// order given. Servers average the workers' gradients with this, in worker-rank
// order, so a run's result does not depend on message arrival order.
// `divisor` (0: k) scales by 1 / divisor instead: the sums of host-local
// aggregation, each of several workers' gradients.
void AverageInOrder(const float* const* srcs, size_t k, float* dst, size_t n, size_t divisor = 0);

}  // namespace nereus

#endif  // NEREUS_COMMON_UPDATE_SGD_H_

// Caffe's SGD semantics (REFERENCE.md section 1), shared by the parameter
// servers and the standalone trainer so both apply bit-identical updates.
#ifndef NEREUS_COMMON_SGD_H_
#define NEREUS_COMMON_SGD_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "proto/nereus.pb.h"

namespace nereus {

// Checks that `config` names a known lr_policy and regularization type and
// carries the fields that policy needs (e.g. stepsize > 0 for "step").
Status ValidateSgdConfig(const pb::SgdConfig& config);

// Caffe's learning rate at iteration `iter` (0-based, the value before the
// iteration's increment). `config` must have passed ValidateSgdConfig.
float LearningRate(const pb::SgdConfig& config, int64_t iter);

// One Caffe SGD step on `n` elements, in Caffe's order:
//   diff    += local_decay * data          (L2; L1 uses sign(data))
//   history  = local_rate * diff + momentum * history
//   data    -= history
// where local_rate = rate * lr_mult and local_decay = weight_decay * decay_mult.
// `diff` is read only. Deterministic: the same inputs give the same bits.
// The loops are vectorised element-wise (every lane does the scalar loop's
// operations in the same order, no fused multiply-add), so the result is
// bitwise that of the scalar loop. `diff` must not overlap `data` or
// `history`.
void SgdStep(const pb::SgdConfig& config, float rate, float lr_mult, float decay_mult,
             const float* diff, float* data, float* history, size_t n);

// The same step out of place: reads the weights from `data_in`, writes the
// new ones to `data_out` (which must not overlap `data_in`), updates
// `history` in place. Bitwise equal to SgdStep on a copy of `data_in`; it
// saves that copy when the old weights must stay readable (a reply still
// sending them).
void SgdStepTo(const pb::SgdConfig& config, float rate, float lr_mult, float decay_mult, const float* diff,
               const float* data_in, float* data_out, float* history, size_t n);

// dst[i] = (src_0[i] + src_1[i] + ... + src_{k-1}[i]) * (1 / k), summed in the
// order given. Servers average the workers' gradients with this, in worker-rank
// order, so a run's result does not depend on message arrival order.
void AverageInOrder(const float* const* srcs, size_t k, float* dst, size_t n);

}  // namespace nereus

#endif  // NEREUS_COMMON_SGD_H_

// The GPU half of common/update/sgd.h's SolverStep: one solver step of one
// parameter on device memory, each element by the sgd_rules function the CPU
// runs (common/update/sgd_rules.h), on `device`'s compute stream. The plan comes
// from PlanSolverStep (common/update/sgd.h). Built with --fmad=false, SGD and
// Nesterov give the CPU's bits; the adaptive solvers differ where CUDA's
// powf differs from glibc's (at most 2 ulp, CUDA's programming guide).
// Only in a CUDA build.
#ifndef NEREUS_WORKER_TRAINER_GPU_SOLVER_STEP_H_
#define NEREUS_WORKER_TRAINER_GPU_SOLVER_STEP_H_

#include "common/update/sgd_rules.h"
#include "worker/trainer/gpu/device.h"

namespace nereus {
namespace gpu {

// `history2` is used by AdaDelta and Adam and may be null otherwise. `diff`
// is read only.
void SolverStepGpu(Device* device, const sgd_rules::StepPlan& plan, const float* diff, float* data, float* history,
                   float* history2, int n);

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_SOLVER_STEP_H_

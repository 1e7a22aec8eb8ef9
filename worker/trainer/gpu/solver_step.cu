#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/gpu/solver_step.h"

namespace nereus {
namespace gpu {
namespace {

using sgd_rules::Reg;
using sgd_rules::Rule;
using sgd_rules::StepConstants;

// One thread an element, running a rule's element function (sgd_rules.h)
// on the weight and its one history, or (StepKernel2) two.
template <void (*Element)(const StepConstants&, float, float*, float*)>
__global__ void StepKernel(int n, StepConstants k, const float* diff, float* data, float* h) {
  NEREUS_KERNEL_LOOP(i, n) Element(k, diff[i], data + i, h + i);
}
template <void (*Element)(const StepConstants&, float, float*, float*, float*)>
__global__ void StepKernel2(int n, StepConstants k, const float* diff, float* data, float* h, float* h2) {
  NEREUS_KERNEL_LOOP(i, n) Element(k, diff[i], data + i, h + i, h2 + i);
}

template <Reg R>
void Step(Device* device, Rule rule, const StepConstants& k, const float* diff, float* data, float* h, float* h2,
          int n) {
  switch (rule) {
    case Rule::kSgd:
      Launch(device, "SgdUpdate", n, StepKernel<sgd_rules::SgdElement<R>>, k, diff, data, h);
      break;
    case Rule::kNesterov:
      Launch(device, "NesterovUpdate", n, StepKernel<sgd_rules::NesterovElement<R>>, k, diff, data, h);
      break;
    case Rule::kAdaGrad:
      Launch(device, "AdaGradUpdate", n, StepKernel<sgd_rules::AdaGradElement<R>>, k, diff, data, h);
      break;
    case Rule::kRmsProp:
      Launch(device, "RMSPropUpdate", n, StepKernel<sgd_rules::RmsPropElement<R>>, k, diff, data, h);
      break;
    case Rule::kAdaDelta:
      Launch(device, "AdaDeltaUpdate", n, StepKernel2<sgd_rules::AdaDeltaElement<R>>, k, diff, data, h, h2);
      break;
    case Rule::kAdam:
      Launch(device, "AdamUpdate", n, StepKernel2<sgd_rules::AdamElement<R>>, k, diff, data, h, h2);
      break;
  }
}

}  // namespace

void SolverStepGpu(Device* device, const sgd_rules::StepPlan& plan, const float* diff, float* data, float* history,
                   float* history2, int n) {
  switch (plan.reg) {
    case Reg::kNone:
      Step<Reg::kNone>(device, plan.rule, plan.constants, diff, data, history, history2, n);
      break;
    case Reg::kL2:
      Step<Reg::kL2>(device, plan.rule, plan.constants, diff, data, history, history2, n);
      break;
    case Reg::kL1:
      Step<Reg::kL1>(device, plan.rule, plan.constants, diff, data, history, history2, n);
      break;
  }
}

}  // namespace gpu
}  // namespace nereus

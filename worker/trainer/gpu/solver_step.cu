#include "worker/trainer/gpu/kernel.h"
#include "worker/trainer/gpu/solver_step.h"

namespace nereus {
namespace gpu {
namespace {

using sgd_rules::Reg;
using sgd_rules::Rule;
using sgd_rules::StepConstants;

template <Reg R>
__global__ void SgdKernel(int n, StepConstants k, const float* diff, float* data, float* h) {
  NEREUS_KERNEL_LOOP(i, n) sgd_rules::SgdElement<R>(k, diff[i], data + i, h + i);
}
template <Reg R>
__global__ void NesterovKernel(int n, StepConstants k, const float* diff, float* data, float* h) {
  NEREUS_KERNEL_LOOP(i, n) sgd_rules::NesterovElement<R>(k, diff[i], data + i, h + i);
}
template <Reg R>
__global__ void AdaGradKernel(int n, StepConstants k, const float* diff, float* data, float* h) {
  NEREUS_KERNEL_LOOP(i, n) sgd_rules::AdaGradElement<R>(k, diff[i], data + i, h + i);
}
template <Reg R>
__global__ void RmsPropKernel(int n, StepConstants k, const float* diff, float* data, float* h) {
  NEREUS_KERNEL_LOOP(i, n) sgd_rules::RmsPropElement<R>(k, diff[i], data + i, h + i);
}
template <Reg R>
__global__ void AdaDeltaKernel(int n, StepConstants k, const float* diff, float* data, float* h, float* h2) {
  NEREUS_KERNEL_LOOP(i, n) sgd_rules::AdaDeltaElement<R>(k, diff[i], data + i, h + i, h2 + i);
}
template <Reg R>
__global__ void AdamKernel(int n, StepConstants k, const float* diff, float* data, float* m, float* v) {
  NEREUS_KERNEL_LOOP(i, n) sgd_rules::AdamElement<R>(k, diff[i], data + i, m + i, v + i);
}

template <Reg R>
void Step(Device* device, Rule rule, const StepConstants& k, const float* diff, float* data, float* h, float* h2,
          int n) {
  switch (rule) {
    case Rule::kSgd:
      Launch(device, "SgdUpdate", n, SgdKernel<R>, k, diff, data, h);
      break;
    case Rule::kNesterov:
      Launch(device, "NesterovUpdate", n, NesterovKernel<R>, k, diff, data, h);
      break;
    case Rule::kAdaGrad:
      Launch(device, "AdaGradUpdate", n, AdaGradKernel<R>, k, diff, data, h);
      break;
    case Rule::kRmsProp:
      Launch(device, "RMSPropUpdate", n, RmsPropKernel<R>, k, diff, data, h);
      break;
    case Rule::kAdaDelta:
      Launch(device, "AdaDeltaUpdate", n, AdaDeltaKernel<R>, k, diff, data, h, h2);
      break;
    case Rule::kAdam:
      Launch(device, "AdamUpdate", n, AdamKernel<R>, k, diff, data, h, h2);
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

#include "common/update/sgd.h"

#include <cmath>
#include <cstring>
#include <string>

#include "common/update/sgd_rules.h"

namespace nereus {

Status ValidateSgdConfig(const pb::SgdConfig& c) {
  const std::string& p = c.lr_policy();
  if (p == "fixed" || p == "exp" || p == "inv") {
  } else if (p == "step" || p == "sigmoid") {
    if (p == "step" && c.stepsize() <= 0)
      return InvalidArgumentError("lr_policy \"step\" needs stepsize > 0, got " + std::to_string(c.stepsize()));
  } else if (p == "multistep") {
    for (int i = 1; i < c.stepvalue_size(); ++i) {
      if (c.stepvalue(i) <= c.stepvalue(i - 1))
        return InvalidArgumentError("lr_policy \"multistep\" needs increasing stepvalue entries");
    }
  } else if (p == "poly") {
    if (c.max_iter() <= 0)
      return InvalidArgumentError("lr_policy \"poly\" needs max_iter > 0, got " + std::to_string(c.max_iter()));
  } else {
    return InvalidArgumentError("unknown lr_policy \"" + p +
                                "\" (expected fixed, step, exp, inv, multistep, poly or sigmoid)");
  }
  const std::string& r = c.regularization_type();
  if (!r.empty() && r != "L2" && r != "L1")
    return InvalidArgumentError("unknown regularization_type \"" + r + "\" (expected L1 or L2)");
  if (c.momentum() < 0) return InvalidArgumentError("momentum must be >= 0");
  if (!pb::SolverType_IsValid(c.type()))
    return InvalidArgumentError("unknown solver type " + std::to_string(static_cast<int>(c.type())));
  // Caffe's constructor checks of AdaGrad and RMSProp.
  if ((c.type() == pb::SOLVER_ADAGRAD || c.type() == pb::SOLVER_RMSPROP) && c.momentum() != 0)
    return InvalidArgumentError(std::string("momentum cannot be used with ") + SolverTypeName(c.type()) +
                                " (got momentum " + std::to_string(c.momentum()) + ")");
  if (c.type() == pb::SOLVER_RMSPROP && !(c.rms_decay() >= 0 && c.rms_decay() < 1))
    return InvalidArgumentError("rms_decay should lie between 0 and 1 (RMSProp), got " + std::to_string(c.rms_decay()));
  return Status::OK();
}

namespace {
struct SolverName {
  pb::SolverType type;
  const char* name;
};
constexpr SolverName kSolverNames[] = {
    {pb::SOLVER_SGD, "SGD"},         {pb::SOLVER_NESTEROV, "Nesterov"}, {pb::SOLVER_ADAGRAD, "AdaGrad"},
    {pb::SOLVER_RMSPROP, "RMSProp"}, {pb::SOLVER_ADADELTA, "AdaDelta"}, {pb::SOLVER_ADAM, "Adam"},
};
}  // namespace

StatusOr<pb::SolverType> SolverTypeFromName(const std::string& name) {
  for (const SolverName& s : kSolverNames) {
    if (name == s.name) return s.type;
  }
  return InvalidArgumentError("unknown solver type \"" + name +
                              "\" (expected SGD, Nesterov, AdaGrad, RMSProp, AdaDelta or Adam)");
}

const char* SolverTypeName(pb::SolverType type) {
  for (const SolverName& s : kSolverNames) {
    if (type == s.type) return s.name;
  }
  if (type == pb::SOLVER_AVERAGE) return "Average";  // Not Caffe's: no SolverTypeFromName for it.
  return "unknown";
}

int NumHistoryBlobs(pb::SolverType type) { return type == pb::SOLVER_ADADELTA || type == pb::SOLVER_ADAM ? 2 : 1; }

float LearningRate(const pb::SgdConfig& c, int64_t iter) {
  const std::string& p = c.lr_policy();
  const double base = c.base_lr();
  const double it = static_cast<double>(iter);
  double rate = base;
  if (p == "fixed") {
    rate = base;
  } else if (p == "step") {
    const int64_t current_step = iter / c.stepsize();
    rate = base * std::pow(c.gamma(), static_cast<double>(current_step));
  } else if (p == "exp") {
    rate = base * std::pow(c.gamma(), it);
  } else if (p == "inv") {
    rate = base * std::pow(1.0 + c.gamma() * it, -static_cast<double>(c.power()));
  } else if (p == "multistep") {
    int current_step = 0;
    while (current_step < c.stepvalue_size() && iter >= c.stepvalue(current_step)) ++current_step;
    rate = base * std::pow(c.gamma(), current_step);
  } else if (p == "poly") {
    rate = base * std::pow(1.0 - it / static_cast<double>(c.max_iter()), static_cast<double>(c.power()));
  } else if (p == "sigmoid") {
    rate = base * (1.0 / (1.0 + std::exp(-static_cast<double>(c.gamma()) * (it - c.stepsize()))));
  } else {
    LOG(FATAL) << "LearningRate called with unvalidated lr_policy " << p;
  }
  return static_cast<float>(rate);
}

namespace {

// Four floats; arithmetic on it is element-wise IEEE single precision, the
// same operations as the scalar loops lane by lane (-ffp-contract=off: no
// fused multiply-add), so vector and scalar results are bitwise equal.
typedef float V4 __attribute__((vector_size(16)));

inline V4 Load(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void Store(float* p, V4 v) { std::memcpy(p, &v, sizeof(v)); }

// Where a step's gradient comes from: one array as it is, or the average of
// several, made element by element with exactly AverageInOrder's operations
// (summed in the order given, then times 1/k), so that a step on it is bitwise
// a step on AverageInOrder's output, without writing that out and reading it
// back.
struct OneGradient {
  const float* diff;
  V4 Vec(size_t k) const { return Load(diff + k); }
  float At(size_t i) const { return diff[i]; }
};
struct AveragedGradient {
  const float* const* srcs;
  size_t count;
  float scale;
  V4 Vec(size_t k) const {
    V4 s = Load(srcs[0] + k);
    for (size_t j = 1; j < count; ++j) s += Load(srcs[j] + k);
    return s * scale;
  }
  float At(size_t i) const {
    float s = srcs[0][i];
    for (size_t j = 1; j < count; ++j) s += srcs[j][i];
    return s * scale;
  }
};

// history = rate * (decay * in + diff) + momentum * history; out = in - history
// (decay == 0: the gradient is diff alone, as Caffe skips regularisation).
// `in` and `out` may be the same array (in place); the gradient's arrays may
// alias neither.
template <bool kDecay, class Gradient>
void StepL2(float rate, float decay, float momentum, const Gradient& grad, const float* in, float* out, float* history,
            size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t k = i; k < i + 8; k += 4) {
      V4 g = grad.Vec(k);
      const V4 x = Load(in + k);
      if (kDecay) g = sgd_rules::L2Regularized(g, x, decay);
      const V4 h = sgd_rules::SgdHistory(g, Load(history + k), rate, momentum);
      Store(history + k, h);
      Store(out + k, x - h);
    }
  }
  for (; i < n; ++i) {
    const float g = kDecay ? sgd_rules::L2Regularized(grad.At(i), in[i], decay) : grad.At(i);
    const float h = sgd_rules::SgdHistory(g, history[i], rate, momentum);
    history[i] = h;
    out[i] = in[i] - h;
  }
}

template <class Gradient>
void Step(const pb::SgdConfig& c, float rate, float lr_mult, float decay_mult, const Gradient& grad, const float* in,
          float* out, float* history, size_t n) {
  const float local_rate = rate * lr_mult;
  const float local_decay = c.weight_decay() * decay_mult;
  const float momentum = c.momentum();
  const bool l1 = c.regularization_type() == "L1";
  if (local_decay == 0.0f) {
    StepL2<false>(local_rate, local_decay, momentum, grad, in, out, history, n);
  } else if (!l1) {
    StepL2<true>(local_rate, local_decay, momentum, grad, in, out, history, n);
  } else {
    for (size_t i = 0; i < n; ++i) {
      const float g = sgd_rules::Regularized<sgd_rules::Reg::kL1>(grad.At(i), in[i], local_decay);
      const float h = sgd_rules::SgdHistory(g, history[i], local_rate, momentum);
      history[i] = h;
      out[i] = in[i] - h;
    }
  }
}

}  // namespace

void SgdStep(const pb::SgdConfig& c, float rate, float lr_mult, float decay_mult, const float* diff, float* data,
             float* history, size_t n) {
  Step(c, rate, lr_mult, decay_mult, OneGradient{diff}, data, data, history, n);
}

void SgdStepAveraged(const pb::SgdConfig& c, float rate, float lr_mult, float decay_mult, const float* const* srcs,
                     size_t k, const float* data_in, float* data_out, float* history, size_t n, size_t divisor) {
  CHECK_GT(k, 0u);
  if (divisor == 0) divisor = k;
  if (k == 1 && divisor == 1) {
    Step(c, rate, lr_mult, decay_mult, OneGradient{srcs[0]}, data_in, data_out, history, n);
    return;
  }
  Step(c, rate, lr_mult, decay_mult, AveragedGradient{srcs, k, 1.0f / static_cast<float>(divisor)}, data_in, data_out,
       history, n);
}

namespace {

using sgd_rules::Reg;
using sgd_rules::Rule;
using sgd_rules::StepConstants;

// The adaptive solvers' loops: one sgd_rules element per index, the same
// functions the GPU trainer's kernels run.
template <Reg R>
void AdaptiveStep(Rule rule, const StepConstants& k, const float* diff, float* data, float* h, float* h2, size_t n) {
  switch (rule) {
    case Rule::kNesterov:
      for (size_t i = 0; i < n; ++i) sgd_rules::NesterovElement<R>(k, diff[i], data + i, h + i);
      break;
    case Rule::kAdaGrad:
      for (size_t i = 0; i < n; ++i) sgd_rules::AdaGradElement<R>(k, diff[i], data + i, h + i);
      break;
    case Rule::kRmsProp:
      for (size_t i = 0; i < n; ++i) sgd_rules::RmsPropElement<R>(k, diff[i], data + i, h + i);
      break;
    case Rule::kAdaDelta:
      for (size_t i = 0; i < n; ++i) sgd_rules::AdaDeltaElement<R>(k, diff[i], data + i, h + i, h2 + i);
      break;
    case Rule::kAdam:
      for (size_t i = 0; i < n; ++i) sgd_rules::AdamElement<R>(k, diff[i], data + i, h + i, h2 + i);
      break;
    case Rule::kSgd:
      LOG(FATAL) << "AdaptiveStep called for SGD";
  }
}

Rule RuleOf(pb::SolverType type) {
  switch (type) {
    case pb::SOLVER_SGD:
      return Rule::kSgd;
    case pb::SOLVER_NESTEROV:
      return Rule::kNesterov;
    case pb::SOLVER_ADAGRAD:
      return Rule::kAdaGrad;
    case pb::SOLVER_RMSPROP:
      return Rule::kRmsProp;
    case pb::SOLVER_ADADELTA:
      return Rule::kAdaDelta;
    case pb::SOLVER_ADAM:
      return Rule::kAdam;
    default:
      LOG(FATAL) << "unknown solver type " << static_cast<int>(type);
  }
  return Rule::kSgd;
}

}  // namespace

sgd_rules::StepPlan PlanSolverStep(const pb::SgdConfig& c, int64_t iter, float rate, float lr_mult, float decay_mult) {
  sgd_rules::StepPlan plan;
  plan.rule = RuleOf(c.type());
  StepConstants& k = plan.constants;
  k.lr = rate * lr_mult;
  k.decay = c.weight_decay() * decay_mult;
  k.momentum = c.momentum();
  k.momentum2 = c.momentum2();
  k.delta = c.delta();
  k.rms_decay = c.rms_decay();
  if (k.decay == 0.0f) {
    plan.reg = Reg::kNone;
  } else if (c.regularization_type() != "L1") {
    plan.reg = Reg::kL2;
  } else {
    plan.reg = Reg::kL1;
  }
  if (c.type() == pb::SOLVER_ADAM) {
    // Caffe computes the bias correction in double (pow of a float and an
    // int) and keeps it as a float.
    const double t = static_cast<double>(iter + 1);
    const float correction = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(c.momentum2()), t)) /
                                                (1.0 - std::pow(static_cast<double>(c.momentum()), t)));
    k.lr = k.lr * correction;
  }
  return plan;
}

void SolverStep(const pb::SgdConfig& c, int64_t iter, float rate, float lr_mult, float decay_mult, const float* diff,
                float* data, float* history, float* history2, size_t n) {
  if (c.type() == pb::SOLVER_SGD) {
    SgdStep(c, rate, lr_mult, decay_mult, diff, data, history, n);
    return;
  }
  if (c.type() == pb::SOLVER_AVERAGE) {
    if (n > 0 && data != diff) std::memcpy(data, diff, n * sizeof(float));
    return;
  }
  if (NumHistoryBlobs(c.type()) == 2) CHECK(history2 != nullptr || n == 0) << SolverTypeName(c.type());
  const sgd_rules::StepPlan plan = PlanSolverStep(c, iter, rate, lr_mult, decay_mult);
  switch (plan.reg) {
    case Reg::kNone:
      AdaptiveStep<Reg::kNone>(plan.rule, plan.constants, diff, data, history, history2, n);
      break;
    case Reg::kL2:
      AdaptiveStep<Reg::kL2>(plan.rule, plan.constants, diff, data, history, history2, n);
      break;
    case Reg::kL1:
      AdaptiveStep<Reg::kL1>(plan.rule, plan.constants, diff, data, history, history2, n);
      break;
  }
}

void AverageInOrder(const float* const* srcs, size_t k, float* dst, size_t n, size_t divisor) {
  CHECK_GT(k, 0u);
  const float scale = 1.0f / static_cast<float>(divisor == 0 ? k : divisor);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    V4 s = Load(srcs[0] + i);
    for (size_t j = 1; j < k; ++j) s += Load(srcs[j] + i);
    Store(dst + i, s * scale);
  }
  for (; i < n; ++i) {
    float s = srcs[0][i];
    for (size_t j = 1; j < k; ++j) s += srcs[j][i];
    dst[i] = s * scale;
  }
}

}  // namespace nereus

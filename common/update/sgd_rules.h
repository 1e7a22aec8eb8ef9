// The per-element arithmetic of Caffe's solver updates (common/update/sgd.h has
// the rules in words), one __host__ __device__ function per solver type, so
// that the servers and the CPU trainer (common/update/sgd.cc) and the GPU trainer
// (worker/trainer/solver.cu) run the same operations in the same order. Each
// line is one of Caffe's vector operations rounded to float, as in sgd.h;
// nothing here may be reordered or fused: the servers' results are compared
// bit for bit with the trainer's (sgd_test, sgd_vector_test), and on the GPU
// (built with --fmad=false) SGD and Nesterov give the CPU's bits too.
//
// SgdHistory and L2Regularized are templates so that sgd.cc can run them on
// vectors of four floats lane by lane (GCC vector extensions); every other
// caller uses float.
#ifndef NEREUS_COMMON_UPDATE_SGD_RULES_H_
#define NEREUS_COMMON_UPDATE_SGD_RULES_H_

#include <cmath>

#include "common/base/host_device.h"

namespace nereus {
namespace sgd_rules {

// How the gradient is regularized: not at all (weight decay 0, which Caffe
// skips), L2 (g = decay * x + g) or L1 (g = decay * sign(x) + g).
enum class Reg { kNone, kL2, kL1 };

// Caffe's solver types (pb::SolverType, without the protobuf header).
enum class Rule { kSgd, kNesterov, kAdaGrad, kRmsProp, kAdaDelta, kAdam };

// The constants of one parameter's step, derived once from the solver
// configuration (PlanSolverStep in common/update/sgd.h).
struct StepConstants {
  float lr = 0;         // rate * lr_mult; Adam: times its bias correction.
  float decay = 0;      // weight_decay * decay_mult.
  float momentum = 0;   // SGD, Nesterov; AdaDelta's decay; Adam's beta1.
  float momentum2 = 0;  // Adam's beta2.
  float delta = 0;      // AdaGrad, RMSProp, AdaDelta, Adam.
  float rms_decay = 0;  // RMSProp.
};

// What one step of a parameter amounts to per element: the rule, the
// regularization and the constants (Adam's bias correction folded into lr).
struct StepPlan {
  Rule rule = Rule::kSgd;
  Reg reg = Reg::kNone;
  StepConstants constants;
};

template <class T>
NEREUS_HOST_DEVICE inline T L2Regularized(T diff, T data, float decay) {
  return decay * data + diff;
}

// Caffe's caffe_cpu_sign on one element.
NEREUS_HOST_DEVICE inline float Sign(float x) { return static_cast<float>((x > 0.0f) - (x < 0.0f)); }

// Caffe's Regularize on one element (caffe_axpy: diff = decay * x + diff).
template <Reg R>
NEREUS_HOST_DEVICE inline float Regularized(float diff, float data, float decay) {
  if (R == Reg::kNone) return diff;
  if (R == Reg::kL2) return L2Regularized(diff, data, decay);
  return decay * Sign(data) + diff;
}

// SGD's new history: rate * g + momentum * history.
template <class T>
NEREUS_HOST_DEVICE inline T SgdHistory(T g, T history, float rate, float momentum) {
  return rate * g + momentum * history;
}

// Caffe's caffe_powx(x, 0.5): std::pow on floats on the host (glibc's powf);
// CUDA's powf on the device (within 2 ulp of it, CUDA's programming guide,
// appendix "Mathematical Functions").
NEREUS_HOST_DEVICE inline float PowHalf(float x) {
#if NEREUS_DEVICE_PASS
  return powf(x, 0.5f);
#else
  return std::pow(x, 0.5f);
#endif
}

// One element of each solver's step: reads the gradient `diff`, updates the
// weight and the history (or histories) in place.
template <Reg R>
NEREUS_HOST_DEVICE inline void SgdElement(const StepConstants& k, float diff, float* data, float* h) {
  const float g = Regularized<R>(diff, *data, k.decay);
  const float hist = SgdHistory(g, *h, k.lr, k.momentum);
  *h = hist;
  *data = *data - hist;
}

template <Reg R>
NEREUS_HOST_DEVICE inline void NesterovElement(const StepConstants& k, float diff, float* data, float* h) {
  const float one_plus = 1.0f + k.momentum;
  const float g = Regularized<R>(diff, *data, k.decay);
  const float old = *h;
  const float now = k.lr * g + k.momentum * old;
  *h = now;
  const float u = one_plus * now - k.momentum * old;
  *data = *data - u;
}

template <Reg R>
NEREUS_HOST_DEVICE inline void AdaGradElement(const StepConstants& k, float diff, float* data, float* h) {
  const float g = Regularized<R>(diff, *data, k.decay);
  const float hist = g * g + *h;
  *h = hist;
  const float u = k.lr * (g / (PowHalf(hist) + k.delta));
  *data = *data - u;
}

template <Reg R>
NEREUS_HOST_DEVICE inline void RmsPropElement(const StepConstants& k, float diff, float* data, float* h) {
  const float keep = 1.0f - k.rms_decay;
  const float g = Regularized<R>(diff, *data, k.decay);
  const float hist = keep * (g * g) + k.rms_decay * *h;
  *h = hist;
  const float u = k.lr * (g / (PowHalf(hist) + k.delta));
  *data = *data - u;
}

template <Reg R>
NEREUS_HOST_DEVICE inline void AdaDeltaElement(const StepConstants& k, float diff, float* data, float* h, float* h2) {
  const float keep = 1.0f - k.momentum;
  const float g = Regularized<R>(diff, *data, k.decay);
  const float hist = keep * (g * g) + k.momentum * *h;
  *h = hist;
  const float s = g * PowHalf((k.delta + *h2) / (k.delta + hist));
  *h2 = keep * (s * s) + k.momentum * *h2;
  *data = *data - k.lr * s;
}

// k.lr is the rate already scaled by Adam's bias correction.
template <Reg R>
NEREUS_HOST_DEVICE inline void AdamElement(const StepConstants& k, float diff, float* data, float* m, float* v) {
  const float keep1 = 1.0f - k.momentum;
  const float keep2 = 1.0f - k.momentum2;
  const float g = Regularized<R>(diff, *data, k.decay);
  const float mi = keep1 * g + k.momentum * *m;
  *m = mi;
  const float vi = keep2 * (g * g) + k.momentum2 * *v;
  *v = vi;
  const float u = k.lr * (mi / (PowHalf(vi) + k.delta));
  *data = *data - u;
}

}  // namespace sgd_rules
}  // namespace nereus

#endif  // NEREUS_COMMON_UPDATE_SGD_RULES_H_

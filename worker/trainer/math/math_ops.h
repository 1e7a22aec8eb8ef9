// The per-element operations of math_functions.h's element-wise functions
// (caffe_add, caffe_powx, ...), shared by their CPU loops (math_functions.cc)
// and their GPU kernels (gpu_math_functions.cu): one definition, so the two
// compute the same thing (bit for bit for + - * /, and within the device's
// documented error for exp, log and pow, whose host versions are glibc's).
#ifndef NEREUS_WORKER_TRAINER_MATH_MATH_OPS_H_
#define NEREUS_WORKER_TRAINER_MATH_MATH_OPS_H_

#include <cmath>

#include "common/base/host_device.h"

namespace nereus {
namespace ops {

struct Add {
  NEREUS_HOST_DEVICE float operator()(float a, float b) const { return a + b; }
};
struct Sub {
  NEREUS_HOST_DEVICE float operator()(float a, float b) const { return a - b; }
};
struct Mul {
  NEREUS_HOST_DEVICE float operator()(float a, float b) const { return a * b; }
};
struct Div {
  NEREUS_HOST_DEVICE float operator()(float a, float b) const { return a / b; }
};

NEREUS_HOST_DEVICE inline float Sqr(float a) { return a * a; }
NEREUS_HOST_DEVICE inline float Sign(float x) { return static_cast<float>((0.0f < x) - (x < 0.0f)); }
// Host: std:: (glibc); device: CUDA's single-precision functions.
#if NEREUS_DEVICE_PASS
#define NEREUS_OPS_HOST_OR_DEVICE_(host_fn, device_fn) device_fn
#else
#define NEREUS_OPS_HOST_OR_DEVICE_(host_fn, device_fn) host_fn
#endif
NEREUS_HOST_DEVICE inline float Exp(float a) { return NEREUS_OPS_HOST_OR_DEVICE_(std::exp, expf)(a); }
NEREUS_HOST_DEVICE inline float Log(float a) { return NEREUS_OPS_HOST_OR_DEVICE_(std::log, logf)(a); }
NEREUS_HOST_DEVICE inline float Pow(float a, float b) { return NEREUS_OPS_HOST_OR_DEVICE_(std::pow, powf)(a, b); }
NEREUS_HOST_DEVICE inline float Abs(float a) { return NEREUS_OPS_HOST_OR_DEVICE_(std::fabs, fabsf)(a); }
NEREUS_HOST_DEVICE inline float Sqrt(float a) { return NEREUS_OPS_HOST_OR_DEVICE_(std::sqrt, sqrtf)(a); }
NEREUS_HOST_DEVICE inline float Tanh(float a) { return NEREUS_OPS_HOST_OR_DEVICE_(std::tanh, tanhf)(a); }
#undef NEREUS_OPS_HOST_OR_DEVICE_
// std::max and std::min on floats: the first argument unless the second is
// strictly greater (smaller).
NEREUS_HOST_DEVICE inline float Max(float a, float b) { return a < b ? b : a; }
NEREUS_HOST_DEVICE inline float Min(float a, float b) { return b < a ? b : a; }
NEREUS_HOST_DEVICE inline int MaxInt(int a, int b) { return a < b ? b : a; }
NEREUS_HOST_DEVICE inline int MinInt(int a, int b) { return b < a ? b : a; }

}  // namespace ops
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_MATH_MATH_OPS_H_

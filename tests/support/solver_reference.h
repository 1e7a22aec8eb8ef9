// A reference for the solver tests: Caffe's update rules written from the
// formulas in double, independent of common/update/sgd.h's code.
#ifndef NEREUS_TESTS_SUPPORT_SOLVER_REFERENCE_H_
#define NEREUS_TESTS_SUPPORT_SOLVER_REFERENCE_H_

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/update/sgd.h"

namespace nereus {
namespace test {

// Caffe's update rules, textbook form, in double.
struct Reference {
  std::string type;
  double lr = 0.1, momentum = 0, momentum2 = 0.999, delta = 1e-8, rms_decay = 0.99, weight_decay = 0;
  std::vector<double> w, h, h2;

  void Step(int64_t iter, const std::vector<double>& diff, double lr_mult, double decay_mult) {
    if (h.empty()) h.assign(w.size(), 0.0), h2.assign(w.size(), 0.0);
    const double rate = lr * lr_mult;
    for (size_t i = 0; i < w.size(); ++i) {
      const double g = diff[i] + weight_decay * decay_mult * w[i];
      double u = 0;
      if (type == "SGD") {
        h[i] = momentum * h[i] + rate * g;
        u = h[i];
      } else if (type == "Nesterov") {
        const double old = h[i];
        h[i] = momentum * h[i] + rate * g;
        u = (1 + momentum) * h[i] - momentum * old;  // Step back, then over.
      } else if (type == "AdaGrad") {
        h[i] += g * g;
        u = rate * g / (std::sqrt(h[i]) + delta);
      } else if (type == "RMSProp") {
        h[i] = rms_decay * h[i] + (1 - rms_decay) * g * g;
        u = rate * g / (std::sqrt(h[i]) + delta);
      } else if (type == "AdaDelta") {
        h[i] = momentum * h[i] + (1 - momentum) * g * g;
        const double s = g * std::sqrt((h2[i] + delta) / (h[i] + delta));
        h2[i] = momentum * h2[i] + (1 - momentum) * s * s;
        u = rate * s;
      } else if (type == "Adam") {
        const double t = static_cast<double>(iter + 1);
        h[i] = momentum * h[i] + (1 - momentum) * g;
        h2[i] = momentum2 * h2[i] + (1 - momentum2) * g * g;
        const double correction = std::sqrt(1 - std::pow(momentum2, t)) / (1 - std::pow(momentum, t));
        u = rate * correction * h[i] / (std::sqrt(h2[i]) + delta);
      } else {
        ADD_FAILURE() << "reference has no rule for " << type;
      }
      w[i] -= u;
    }
  }
};

// Typical settings of Caffe's example solvers for each type.
inline Reference Settings(const std::string& type) {
  Reference r;
  r.type = type;
  r.weight_decay = 0.01;
  if (type == "SGD" || type == "Nesterov") r.momentum = 0.9;
  if (type == "AdaDelta") r.lr = 1.0, r.momentum = 0.95, r.delta = 1e-6;
  if (type == "Adam") r.momentum = 0.9;
  // Caffe's settings are floats: the reference starts from the same values
  // (1 - 0.999f differs from 1 - 0.999 by 5e-5 relative).
  for (double* v : {&r.lr, &r.momentum, &r.momentum2, &r.delta, &r.rms_decay, &r.weight_decay})
    *v = static_cast<float>(*v);
  return r;
}

inline pb::SgdConfig Config(const Reference& r) {
  pb::SgdConfig c;
  c.set_type(SolverTypeFromName(r.type).value());
  c.set_base_lr(static_cast<float>(r.lr));
  c.set_lr_policy("fixed");
  c.set_momentum(static_cast<float>(r.momentum));
  c.set_momentum2(static_cast<float>(r.momentum2));
  c.set_delta(static_cast<float>(r.delta));
  c.set_rms_decay(static_cast<float>(r.rms_decay));
  c.set_weight_decay(static_cast<float>(r.weight_decay));
  return c;
}

// Every solver type, for tests that run each one.
inline const std::vector<pb::SolverType> kEverySolverType = {
    pb::SOLVER_SGD, pb::SOLVER_NESTEROV, pb::SOLVER_ADAGRAD, pb::SOLVER_RMSPROP, pb::SOLVER_ADADELTA, pb::SOLVER_ADAM};

// Settings under which every term of solver `type`'s step moves the weights
// (momentum 0.9 where the type takes one, weight decay 0.004), with
// regularization `reg`: "L2", "L1", or "none" (L2 at weight decay 0).
inline pb::SgdConfig EveryTermSettings(pb::SolverType type, const std::string& reg) {
  pb::SgdConfig c;
  c.set_type(type);
  c.set_momentum(type == pb::SOLVER_ADAGRAD || type == pb::SOLVER_RMSPROP ? 0.0f : 0.9f);
  c.set_momentum2(0.999f);
  c.set_delta(1e-6f);
  c.set_rms_decay(0.98f);
  c.set_weight_decay(reg == "none" ? 0.0f : 0.004f);
  c.set_regularization_type(reg == "L1" ? "L1" : "L2");
  return c;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_SOLVER_REFERENCE_H_

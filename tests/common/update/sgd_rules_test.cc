// common/update/sgd_rules.h: each solver's per-element step on values whose every
// intermediate is exact in binary floating point (worked by hand below), so
// the expected results are exact; and PlanSolverStep's constants. The same
// functions run on the servers, in the CPU trainer and in the GPU trainer's
// kernels (worker/trainer/gpu/solver_step.cu).
#include "common/update/sgd_rules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/update/sgd.h"
#include "tests/support/solver_reference.h"

namespace nereus {
namespace {

using sgd_rules::Reg;
using sgd_rules::StepConstants;

// diff 0.5, weight 2, lr 0.25, weight decay 0.5 (L2: g = 0.5 * 2 + 0.5 = 1.5).
// In field order: lr, decay, momentum, momentum2, delta, rms_decay.
const StepConstants kConstants{0.25f, 0.5f, 0.5f, 0.5f, 0.0f, 0.5f};

// One element's step by `step` from weight 2, diff 0.5 and history `h`: the
// history and weight it leaves.
void ExpectElementStep(void (*step)(const StepConstants&, float, float*, float*), float h, float want_h,
                       float want_data) {
  float data = 2.0f;
  step(kConstants, 0.5f, &data, &h);
  EXPECT_EQ(want_h, h);
  EXPECT_EQ(want_data, data);
}

TEST(SgdRulesTest, Regularization) {
  EXPECT_EQ(0.5f, sgd_rules::Regularized<Reg::kNone>(0.5f, 2.0f, 0.5f));
  EXPECT_EQ(1.5f, sgd_rules::Regularized<Reg::kL2>(0.5f, 2.0f, 0.5f));   // 0.5 * 2 + 0.5
  EXPECT_EQ(1.0f, sgd_rules::Regularized<Reg::kL1>(0.5f, 2.0f, 0.5f));   // 0.5 * sign(2) + 0.5
  EXPECT_EQ(0.0f, sgd_rules::Regularized<Reg::kL1>(0.5f, -3.0f, 0.5f));  // 0.5 * -1 + 0.5
  EXPECT_EQ(0.5f, sgd_rules::Regularized<Reg::kL1>(0.5f, 0.0f, 0.5f));   // sign(0) = 0
  EXPECT_EQ(0.0f, sgd_rules::Sign(-0.0f));
}

TEST(SgdRulesTest, SgdAndNesterov) {
  // h = 0.25 * 1.5 + 0.5 * 1; data = 2 - h.
  ExpectElementStep(sgd_rules::SgdElement<Reg::kL2>, 1.0f, 0.875f, 1.125f);
  // h as SGD; data = 2 - (1.5 * 0.875 - 0.5 * 1).
  ExpectElementStep(sgd_rules::NesterovElement<Reg::kL2>, 1.0f, 0.875f, 1.1875f);
  // h = 0.25 * 1 + 0.5 * 1.
  ExpectElementStep(sgd_rules::SgdElement<Reg::kL1>, 1.0f, 0.75f, 1.25f);
}

TEST(SgdRulesTest, AdaGradAndRmsProp) {
  // h = 1.5^2 + 1.75; data = 2 - 0.25 * (1.5 / (4^0.5 + 0)).
  ExpectElementStep(sgd_rules::AdaGradElement<Reg::kL2>, 1.75f, 4.0f, 1.8125f);
  // h = 0.5 * 2.25 + 0.5 * 5.75.
  ExpectElementStep(sgd_rules::RmsPropElement<Reg::kL2>, 5.75f, 4.0f, 1.8125f);
}

TEST(SgdRulesTest, AdaDeltaAndAdam) {
  float data = 2.0f, h = 5.75f, h2 = 1.0f;
  sgd_rules::AdaDeltaElement<Reg::kL2>(kConstants, 0.5f, &data, &h, &h2);
  EXPECT_EQ(4.0f, h);        // 0.5 * 2.25 + 0.5 * 5.75
  EXPECT_EQ(0.78125f, h2);   // s = 1.5 * ((0 + 1) / (0 + 4))^0.5 = 0.75; 0.5 * 0.5625 + 0.5 * 1
  EXPECT_EQ(1.8125f, data);  // 2 - 0.25 * 0.75
  data = 2.0f;
  float m = 0.5f, v = 5.75f;
  sgd_rules::AdamElement<Reg::kL2>(kConstants, 0.5f, &data, &m, &v);
  EXPECT_EQ(1.0f, m);       // 0.5 * 1.5 + 0.5 * 0.5
  EXPECT_EQ(4.0f, v);       // 0.5 * 2.25 + 0.5 * 5.75
  EXPECT_EQ(1.875f, data);  // 2 - 0.25 * (1 / (2 + 0))
}

TEST(SgdRulesTest, PlanSolverStepFoldsConstants) {
  pb::SgdConfig c;
  c.set_type(pb::SOLVER_ADAM);
  c.set_momentum(0.9f);
  c.set_momentum2(0.999f);
  c.set_delta(1e-8f);
  c.set_weight_decay(0.0005f);
  c.set_regularization_type("L2");
  const sgd_rules::StepPlan plan =
      PlanSolverStep(c, /*iter=*/0, /*rate=*/0.001f, /*lr_mult=*/2.0f, /*decay_mult=*/1.0f);
  EXPECT_EQ(sgd_rules::Rule::kAdam, plan.rule);
  EXPECT_EQ(Reg::kL2, plan.reg);
  EXPECT_EQ(0.0005f, plan.constants.decay);
  // Caffe's bias correction at t = 1, computed in double and kept as a float.
  const float correction = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(0.999f), 1.0)) /
                                              (1.0 - std::pow(static_cast<double>(0.9f), 1.0)));
  EXPECT_EQ(0.001f * 2.0f * correction, plan.constants.lr);
  c.set_type(pb::SOLVER_SGD);
  c.set_weight_decay(0.0f);
  const sgd_rules::StepPlan sgd = PlanSolverStep(c, 5, 0.01f, 1.0f, 1.0f);
  EXPECT_EQ(sgd_rules::Rule::kSgd, sgd.rule);
  EXPECT_EQ(Reg::kNone, sgd.reg);  // Caffe skips regularization at weight decay 0.
  EXPECT_EQ(0.01f, sgd.constants.lr);
  c.set_weight_decay(0.1f);
  c.set_regularization_type("L1");
  EXPECT_EQ(Reg::kL1, PlanSolverStep(c, 5, 0.01f, 1.0f, 1.0f).reg);
}

// One element's step by the element function of `plan`'s rule: those of one
// history (SGD, Nesterov, AdaGrad, RMSProp) leave `h2` alone.
template <Reg R>
void ElementStep(const sgd_rules::StepPlan& plan, float diff, float* data, float* h, float* h2) {
  using sgd_rules::Rule;
  const std::map<Rule, void (*)(const StepConstants&, float, float*, float*)> one_history = {
      {Rule::kSgd, sgd_rules::SgdElement<R>},
      {Rule::kNesterov, sgd_rules::NesterovElement<R>},
      {Rule::kAdaGrad, sgd_rules::AdaGradElement<R>},
      {Rule::kRmsProp, sgd_rules::RmsPropElement<R>}};
  const std::map<Rule, void (*)(const StepConstants&, float, float*, float*, float*)> two_histories = {
      {Rule::kAdaDelta, sgd_rules::AdaDeltaElement<R>}, {Rule::kAdam, sgd_rules::AdamElement<R>}};
  if (one_history.count(plan.rule)) {
    one_history.at(plan.rule)(plan.constants, diff, data, h);
  } else {
    two_histories.at(plan.rule)(plan.constants, diff, data, h, h2);
  }
}

// SolverStep (the CPU loops the servers and the trainer run) gives what the
// element functions give, element by element, bit for bit.
TEST(SgdRulesTest, SolverStepIsTheElementFunctions) {
  for (pb::SolverType type : test::kEverySolverType) {
    for (const char* reg : {"L2", "L1"}) {
      const pb::SgdConfig c = test::EveryTermSettings(type, reg);
      const int n = 37;  // Not a multiple of the vector width: both paths of SgdStep.
      std::vector<float> diff(n), data(n), h(n), h2(n);
      for (int i = 0; i < n; ++i) {
        diff[i] = 0.01f * static_cast<float>((i * 7) % 11 - 5);
        data[i] = 0.1f * static_cast<float>((i * 3) % 13 - 6);
        h[i] = 0.001f * static_cast<float>(i % 5);
        h2[i] = 0.002f * static_cast<float>(i % 7);
      }
      std::vector<float> data2 = data, hist = h, hist2 = h2;
      SolverStep(c, /*iter=*/3, 0.05f, 1.0f, 1.0f, diff.data(), data.data(), h.data(), h2.data(), n);
      const sgd_rules::StepPlan plan = PlanSolverStep(c, 3, 0.05f, 1.0f, 1.0f);
      for (int i = 0; i < n; ++i) {
        if (plan.reg == Reg::kL2) {
          ElementStep<Reg::kL2>(plan, diff[i], &data2[i], &hist[i], &hist2[i]);
        } else {
          ElementStep<Reg::kL1>(plan, diff[i], &data2[i], &hist[i], &hist2[i]);
        }
        ASSERT_EQ(data[i], data2[i]) << SolverTypeName(type) << " " << reg << " element " << i;
        ASSERT_EQ(h[i], hist[i]) << SolverTypeName(type) << " " << reg << " element " << i;
        ASSERT_EQ(h2[i], hist2[i]) << SolverTypeName(type) << " " << reg << " element " << i;
      }
    }
  }
}

}  // namespace
}  // namespace nereus

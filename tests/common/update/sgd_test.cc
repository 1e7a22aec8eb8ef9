#include "common/update/sgd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace nereus {
namespace {

pb::SgdConfig Policy(const std::string& p, float base, float gamma = 0, float power = 0, int stepsize = 0) {
  pb::SgdConfig c;
  c.set_lr_policy(p);
  c.set_base_lr(base);
  c.set_gamma(gamma);
  c.set_power(power);
  c.set_stepsize(stepsize);
  return c;
}

// The rate at one iteration: exactly (EXPECT_FLOAT_EQ) when `tolerance` is
// 0, else within it.
struct RateAt {
  int64_t iter;
  float rate;
  double tolerance = 0;
};

void ExpectRates(const pb::SgdConfig& c, const std::vector<RateAt>& rates) {
  for (const RateAt& r : rates) {
    if (r.tolerance == 0) {
      EXPECT_FLOAT_EQ(LearningRate(c, r.iter), r.rate) << "iteration " << r.iter;
    } else {
      EXPECT_NEAR(LearningRate(c, r.iter), r.rate, r.tolerance) << "iteration " << r.iter;
    }
  }
}

TEST(LearningRateTest, Fixed) {
  auto c = Policy("fixed", 0.01f);
  ASSERT_TRUE(ValidateSgdConfig(c).ok());
  ExpectRates(c, {{0, 0.01f}, {123456, 0.01f}});
}

TEST(LearningRateTest, Step) {
  auto c = Policy("step", 0.01f, 0.1f, 0, 100);
  ASSERT_TRUE(ValidateSgdConfig(c).ok());
  ExpectRates(c, {{99, 0.01f}, {100, 0.001f}, {250, 0.0001f}});
}

TEST(LearningRateTest, Exp) { ExpectRates(Policy("exp", 0.01f, 0.99f), {{0, 0.01f}, {10, 0.0090438208f, 1e-9}}); }

TEST(LearningRateTest, InvMatchesLeNetCheckValue) {
  auto c = Policy("inv", 0.01f, 1e-4f, 0.75f);
  ASSERT_TRUE(ValidateSgdConfig(c).ok());
  ExpectRates(c, {{100, 0.00992565f, 5e-9}, {0, 0.01f}});
}

TEST(LearningRateTest, Multistep) {
  auto c = Policy("multistep", 0.1f, 0.5f);
  c.add_stepvalue(10);
  c.add_stepvalue(20);
  ASSERT_TRUE(ValidateSgdConfig(c).ok());
  ExpectRates(c, {{9, 0.1f}, {10, 0.05f}, {19, 0.05f}, {25, 0.025f}});
}

TEST(LearningRateTest, Poly) {
  auto c = Policy("poly", 0.1f, 0, 2.0f);
  c.set_max_iter(100);
  ASSERT_TRUE(ValidateSgdConfig(c).ok());
  ExpectRates(c, {{50, 0.025f}, {100, 0.0f}});
}

TEST(LearningRateTest, Sigmoid) {
  auto c = Policy("sigmoid", 0.1f, 0.1f, 0, 50);
  ASSERT_TRUE(ValidateSgdConfig(c).ok());
  ExpectRates(c, {{50, 0.05f}, {60, 0.07310586f, 1e-8}});
}

TEST(ValidateSgdConfigTest, RejectsBadPolicies) {
  Status s = ValidateSgdConfig(Policy("cosine", 0.1f));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown lr_policy \"cosine\""), std::string::npos) << s;
  s = ValidateSgdConfig(Policy("step", 0.1f, 0.1f, 0, 0));
  EXPECT_NE(s.message().find("stepsize"), std::string::npos) << s;
  s = ValidateSgdConfig(Policy("poly", 0.1f));
  EXPECT_NE(s.message().find("max_iter"), std::string::npos) << s;
  auto c = Policy("fixed", 0.1f);
  c.set_regularization_type("L3");
  s = ValidateSgdConfig(c);
  EXPECT_NE(s.message().find("regularization_type \"L3\""), std::string::npos) << s;
}

TEST(SgdStepTest, L2MomentumLrMultDecayMultByHand) {
  pb::SgdConfig c = Policy("fixed", 0.1f);
  c.set_momentum(0.9f);
  c.set_weight_decay(0.01f);
  float data[2] = {1.0f, -2.0f};
  float history[2] = {0.1f, 0.0f};
  const float diff[2] = {0.5f, 0.25f};
  SgdStep(c, 0.1f, /*lr_mult=*/2.0f, /*decay_mult=*/1.0f, diff, data, history, 2);
  // g = 0.01*1 + 0.5 = 0.51; h = 0.2*0.51 + 0.9*0.1 = 0.192; w = 1 - 0.192.
  EXPECT_FLOAT_EQ(history[0], 0.192f);
  EXPECT_FLOAT_EQ(data[0], 0.808f);
  // g = 0.01*-2 + 0.25 = 0.23; h = 0.2*0.23 = 0.046; w = -2 - 0.046.
  EXPECT_FLOAT_EQ(history[1], 0.046f);
  EXPECT_FLOAT_EQ(data[1], -2.046f);
}

TEST(SgdStepTest, L1UsesSignOfData) {
  pb::SgdConfig c = Policy("fixed", 0.1f);
  c.set_weight_decay(0.5f);
  c.set_regularization_type("L1");
  float data[3] = {2.0f, -3.0f, 0.0f};
  float history[3] = {0, 0, 0};
  const float diff[3] = {0, 0, 1.0f};
  SgdStep(c, 0.1f, 1.0f, /*decay_mult=*/2.0f, diff, data, history, 3);
  // local_decay = 1: g = sign(w) (+ diff); h = 0.1*g.
  EXPECT_FLOAT_EQ(data[0], 1.9f);
  EXPECT_FLOAT_EQ(data[1], -2.9f);
  EXPECT_FLOAT_EQ(data[2], -0.1f);
}

TEST(SgdStepTest, ZeroLrMultFreezes) {
  pb::SgdConfig c = Policy("fixed", 0.1f);
  c.set_momentum(0.9f);
  float data[1] = {3.0f}, history[1] = {0.0f};
  const float diff[1] = {7.0f};
  SgdStep(c, 0.1f, 0.0f, 1.0f, diff, data, history, 1);
  EXPECT_EQ(data[0], 3.0f);
}

TEST(AverageInOrderTest, SumsInGivenOrderThenScales) {
  const float a[2] = {1e8f, 1.0f}, b[2] = {1.0f, 2.0f}, c[2] = {-1e8f, 3.0f};
  const float* order1[3] = {a, b, c};
  const float* order2[3] = {a, c, b};
  float out1[2], out2[2];
  AverageInOrder(order1, 3, out1, 2);
  AverageInOrder(order2, 3, out2, 2);
  // (1e8 + 1) - 1e8 == 0 in float, but (1e8 - 1e8) + 1 == 1: order matters.
  EXPECT_EQ(out1[0], 0.0f);
  EXPECT_EQ(out2[0], 1.0f * (1.0f / 3.0f));
  EXPECT_EQ(out1[1], 6.0f * (1.0f / 3.0f));
}

// Host-local aggregation: k host sums stand for more workers; the sum is
// scaled by 1/divisor, and a single sum (k = 1) is scaled too. The step on
// the fly (SgdStepAveraged) is bitwise the step on that average.
TEST(AverageInOrderTest, ADivisorScalesTheSumOfFewerGradients) {
  const float s01[3] = {3.0f, 1.0f, 0.3f}, s23[3] = {5.0f, 2.0f, 0.7f};
  const float* srcs[2] = {s01, s23};
  float out[3];
  AverageInOrder(srcs, 2, out, 3, /*divisor=*/4);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 0.75f);
  EXPECT_EQ(out[2], (0.3f + 0.7f) * 0.25f);
  AverageInOrder(srcs, 1, out, 3, /*divisor=*/4);
  EXPECT_EQ(out[0], 0.75f);
  pb::SgdConfig c;
  c.set_base_lr(0.1f);
  c.set_momentum(0.9f);
  c.set_weight_decay(0.01f);
  float by_hand[3] = {1, 2, 3}, h1[3] = {0.5f, 0, -1}, on_fly[3] = {1, 2, 3}, h2[3] = {0.5f, 0, -1};
  AverageInOrder(srcs, 2, out, 3, 4);
  SgdStep(c, 0.1f, 1.0f, 1.0f, out, by_hand, h1, 3);
  SgdStepAveraged(c, 0.1f, 1.0f, 1.0f, srcs, 2, on_fly, on_fly, h2, 3, /*divisor=*/4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(on_fly[i], by_hand[i]) << i;
    EXPECT_EQ(h2[i], h1[i]) << i;
  }
}

}  // namespace
}  // namespace nereus

// LSTMUnit: exact values of one step (a continuing stream and one that
// starts over), the zero gradients a restart gives, numeric gradients of
// c_prev and the gate inputs, cont's lack of a gradient, and bad shapes.
#include "worker/trainer/layers/lstm_unit_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

// Two streams of two units: stream 0 continues (cont 1), stream 1 starts
// over (cont 0).
struct Step {
  Blob c_prev{std::vector<int>{1, 2, 2}};
  Blob x{std::vector<int>{1, 2, 8}};
  Blob cont{std::vector<int>{1, 2}};
  Blob c, h;
  LSTMUnitLayer layer{ParseLayerParameter("name: 'u' type: 'LSTMUnit'")};
  Step() {
    SetBlobData(&c_prev, {0.5f, -1, 2, -1});
    SetBlobData(&x, {1, -2, 0.5f, 0, -1, 2, 0.3f, -0.7f, 0.2f, 0.1f, 3, -3, 1, 1, 0.5f, -0.5f});
    SetBlobData(&cont, {1, 0});
  }
};

TEST(LSTMUnitLayerTest, ForwardValues) {
  Step s;
  ASSERT_TRUE(s.layer.SetUp({&s.c_prev, &s.x, &s.cont}, {&s.c, &s.h}).ok());
  s.layer.Forward({&s.c_prev, &s.x, &s.cont}, {&s.c, &s.h});
  // c = f c_prev + i g, h = o tanh(c), worked in double from the formulas;
  // stream 1 forgets its c_prev (f = 0).
  ExpectBlobNear({0.52419625f, -0.57204241f, 0.25408772f, -0.24260189f}, s.c, 1e-6f);
  ExpectBlobNear({0.12934259f, -0.45524671f, 0.18185617f, -0.17395673f}, s.h, 1e-6f);
  EXPECT_EQ((std::vector<int>{1, 2, 2}), s.h.shape());
}

TEST(LSTMUnitLayerTest, ARestartPassesNoGradientToThePreviousCell) {
  Step s;
  ASSERT_TRUE(s.layer.SetUp({&s.c_prev, &s.x, &s.cont}, {&s.c, &s.h}).ok());
  s.layer.Forward({&s.c_prev, &s.x, &s.cont}, {&s.c, &s.h});
  std::fill(s.c.mutable_cpu_diff(), s.c.mutable_cpu_diff() + 4, 1.0f);
  std::fill(s.h.mutable_cpu_diff(), s.h.mutable_cpu_diff() + 4, 1.0f);
  s.layer.Backward({&s.c, &s.h}, {true, true, false}, {&s.c_prev, &s.x, &s.cont});
  // Stream 1 (cont 0): neither c_prev nor the forget gate gets a gradient.
  EXPECT_EQ(0.0f, s.c_prev.cpu_diff()[2]);
  EXPECT_EQ(0.0f, s.c_prev.cpu_diff()[3]);
  EXPECT_EQ(0.0f, s.x.cpu_diff()[8 + 2]);
  EXPECT_EQ(0.0f, s.x.cpu_diff()[8 + 3]);
  // Stream 0: d c / d c_prev = f = sigmoid(x_f), plus h's path through c.
  EXPECT_NE(0.0f, s.c_prev.cpu_diff()[0]);
  EXPECT_FALSE(s.layer.AllowForceBackward(2));
  EXPECT_TRUE(s.layer.AllowForceBackward(0));
  EXPECT_TRUE(s.layer.AllowForceBackward(1));
}

TEST(LSTMUnitLayerTest, Gradients) {
  for (int check_bottom : {0, 1}) {
    SCOPED_TRACE(check_bottom);
    std::mt19937 rng(19);
    Blob c_prev(std::vector<int>{1, 3, 4}), x(std::vector<int>{1, 3, 16}), cont(std::vector<int>{1, 3}), c, h;
    FillGaussian(&c_prev, &rng);
    FillGaussian(&x, &rng);
    SetBlobData(&cont, {1, 0, 1});
    LSTMUnitLayer layer(ParseLayerParameter("name: 'u' type: 'LSTMUnit'"));
    ExpectGradient(&layer, {&c_prev, &x, &cont}, {&c, &h},
                   {GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, check_bottom});
  }
}

TEST(LSTMUnitLayerTest, AskingForContsGradientIsFatal) {
  Step s;
  ASSERT_TRUE(s.layer.SetUp({&s.c_prev, &s.x, &s.cont}, {&s.c, &s.h}).ok());
  s.layer.Forward({&s.c_prev, &s.x, &s.cont}, {&s.c, &s.h});
  EXPECT_DEATH(s.layer.Backward({&s.c, &s.h}, {true, true, true}, {&s.c_prev, &s.x, &s.cont}),
               "layer u \\(LSTMUnit\\): cont \\(bottom 2\\) has no gradient");
}

TEST(LSTMUnitLayerTest, BadShapesAreErrors) {
  auto set_up = [](const std::vector<std::vector<int>>& shapes) {
    LSTMUnitLayer layer(ParseLayerParameter("name: 'u' type: 'LSTMUnit'"));
    return SetUpOn(&layer, shapes, 2);
  };
  EXPECT_TRUE(set_up({{1, 2, 3}, {1, 2, 12}, {1, 2}}).ok());
  ExpectErrorContains(set_up({{1, 2, 3}, {1, 2, 11}, {1, 2}}), {"layer u (LSTMUnit)", "4 * D = 12"});
  ExpectErrorContains(set_up({{2, 2, 3}, {1, 2, 12}, {1, 2}}), {"layer u (LSTMUnit)", "c_prev (bottom 0) must be"});
  ExpectErrorContains(set_up({{1, 2, 3}, {1, 3, 12}, {1, 2}}), {"layer u (LSTMUnit)", "x (bottom 1) must be"});
  ExpectErrorContains(set_up({{1, 2, 3}, {1, 2, 12}, {1, 2, 1}}), {"layer u (LSTMUnit)", "cont (bottom 2) must be"});
  ExpectErrorContains(set_up({{2, 3}, {1, 2, 12}, {1, 2}}), {"layer u (LSTMUnit)", "c_prev (bottom 0) must be"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

// Reduction: exact values of every operation forward and backward, with a
// coeff and on several axes, numeric gradients, and configuration errors.
#include "worker/trainer/layers/reduction_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

const std::vector<float> kReductionInput = {1, -2, 3, -4, 5, 0};  // [2, 3]

// Forward of `param` on kReductionInput along axis 1, then backward of top gradients
// (1, 2): returns the bottom's gradient.
std::vector<float> RunOnInput(const std::string& param, const std::vector<float>& expected_top) {
  Blob bottom(std::vector<int>{2, 3}), top;
  SetBlobData(&bottom, kReductionInput);
  ReductionLayer layer(ParseLayerParameter("name: 'r' type: 'Reduction' reduction_param { axis: 1 " + param + " }"));
  const Status s = layer.SetUp({&bottom}, {&top});
  EXPECT_TRUE(s.ok()) << s;
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ(std::vector<int>{2}, top.shape());
  ExpectBlobNear(expected_top, top, 0.0f);
  SetBlobData(&top, {0, 0});  // backward reads the bottom, not the top
  top.mutable_cpu_diff()[0] = 1.0f;
  top.mutable_cpu_diff()[1] = 2.0f;
  layer.Backward({&top}, {true}, {&bottom});
  return BlobDiff(bottom);
}

TEST(ReductionLayerTest, EveryOperationForwardAndBackward) {
  EXPECT_EQ((std::vector<float>{1, 1, 1, 2, 2, 2}), RunOnInput("operation: SUM", {2, 1}));
  EXPECT_EQ((std::vector<float>{1, -1, 1, -2, 2, 0}), RunOnInput("operation: ASUM", {6, 9}));
  EXPECT_EQ((std::vector<float>{2, -4, 6, -16, 20, 0}), RunOnInput("operation: SUMSQ", {14, 41}));
  const float third = 1.0f / 3.0f;
  EXPECT_EQ((std::vector<float>{third, third, third, 2 * third, 2 * third, 2 * third}),
            RunOnInput("operation: MEAN", {2 * third, 1 * third}));
  // coeff scales both ways (MEAN's coeff is divided by the count).
  EXPECT_EQ((std::vector<float>{-3, -3, -3, -6, -6, -6}), RunOnInput("operation: SUM coeff: -3", {-6, -3}));
  EXPECT_EQ((std::vector<float>{4, -8, 12, -32, 40, 0}), RunOnInput("operation: SUMSQ coeff: 2", {28, 82}));
  const float two_thirds = 2.0f / 3.0f;
  EXPECT_EQ((std::vector<float>{two_thirds, two_thirds, two_thirds, 2 * two_thirds, 2 * two_thirds, 2 * two_thirds}),
            RunOnInput("operation: MEAN coeff: 2", {2 * two_thirds, two_thirds}));
}

TEST(ReductionLayerTest, TheAxisKeepsTheAxesBeforeIt) {
  // Axis 0 (the default): the whole blob to a scalar of shape [].
  ExpectLayerForward<ReductionLayer>("name: 'r' type: 'Reduction'", {2, 3}, kReductionInput, {}, {3});
  // Axis -1 of [2, 2, 2]: one value per last-axis row, shape [2, 2].
  ExpectLayerForward<ReductionLayer>("name: 'r' type: 'Reduction' reduction_param { axis: -1 operation: ASUM }",
                                     {2, 2, 2}, {1, -2, 3, 4, -5, 6, 7, 8}, {2, 2}, {3, 7, 11, 15});
  // Axis 1 of [2, 2, 2]: the last two axes of each item.
  ExpectLayerForward<ReductionLayer>("name: 'r' type: 'Reduction' reduction_param { axis: 1 operation: MEAN }",
                                     {2, 2, 2}, {1, -2, 3, 4, -5, 6, 7, 8}, {2}, {1.5f, 4});
}

TEST(ReductionLayerTest, Gradients) {
  for (const char* param : {"operation: SUM", "operation: SUM axis: 2 coeff: -0.5", "operation: ASUM axis: 1",
                            "operation: SUMSQ axis: -1", "operation: MEAN axis: 1 coeff: 3", "operation: MEAN"}) {
    SCOPED_TRACE(param);
    // ASUM's kink at 0: inputs within 0.02 of it are not compared.
    ExpectLayerGradient<ReductionLayer>(std::string("name: 'r' type: 'Reduction' reduction_param { ") + param + " }",
                                        {2, 3, 2, 2}, 12, BottomFill::kGaussian,
                                        {GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, 0.02f});
  }
}

TEST(ReductionLayerTest, BadAxisIsAnError) {
  ReductionLayer layer(ParseLayerParameter("name: 'r' type: 'Reduction' reduction_param { axis: 3 }"));
  ExpectErrorContains(SetUpOn(&layer, {{2, 3}}), {"layer r (Reduction)", "axis 3 is out of range", "2 3"});
  ReductionLayer negative(ParseLayerParameter("name: 'r' type: 'Reduction' reduction_param { axis: -3 }"));
  ExpectErrorContains(SetUpOn(&negative, {{2, 3}}), {"layer r (Reduction)", "axis -3 is out of range"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

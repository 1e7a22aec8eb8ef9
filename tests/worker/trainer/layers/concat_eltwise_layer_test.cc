// Concat and Eltwise: exact values, numeric gradients, shape errors.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/concat_eltwise_layers.h"

namespace nereus {
namespace {

using test::BlobDiff;
using test::ExpectBlobNear;
using test::GradientChecker;
using test::ParseLayerParameter;
using test::SetBlobData;

// ---- Concat ----

TEST(ConcatLayerTest, ChannelAxis) {
  Blob a(2, 2, 1, 1), b(2, 1, 1, 1), top;
  SetBlobData(&a, {1, 2, 3, 4});
  SetBlobData(&b, {5, 6});
  ConcatLayer layer(ParseLayerParameter("name: 'cat' type: 'Concat'"));
  ASSERT_TRUE(layer.SetUp({&a, &b}, {&top}).ok());
  layer.Forward({&a, &b}, {&top});
  EXPECT_EQ((std::vector<int>{2, 3, 1, 1}), top.shape());
  // Per sample: a's channels, then b's.
  ExpectBlobNear({1, 2, 5, 3, 4, 6}, top);
}

TEST(ConcatLayerTest, NumAxisAndNegativeAxis) {
  {
    Blob a(1, 1, 1, 2), b(2, 1, 1, 2), top;
    SetBlobData(&a, {1, 2});
    SetBlobData(&b, {3, 4, 5, 6});
    ConcatLayer layer(ParseLayerParameter("name: 'cat' type: 'Concat' concat_param { axis: 0 }"));
    ASSERT_TRUE(layer.SetUp({&a, &b}, {&top}).ok());
    layer.Forward({&a, &b}, {&top});
    EXPECT_EQ((std::vector<int>{3, 1, 1, 2}), top.shape());
    ExpectBlobNear({1, 2, 3, 4, 5, 6}, top);
  }
  {
    // Along the width (axis -1): rows [1 | 3 4] and [2 | 5 6].
    Blob a(1, 1, 2, 1), b(1, 1, 2, 2), top;
    SetBlobData(&a, {1, 2});
    SetBlobData(&b, {3, 4, 5, 6});
    ConcatLayer layer(ParseLayerParameter("name: 'cat' type: 'Concat' concat_param { axis: -1 }"));
    ASSERT_TRUE(layer.SetUp({&a, &b}, {&top}).ok());
    layer.Forward({&a, &b}, {&top});
    EXPECT_EQ((std::vector<int>{1, 1, 2, 3}), top.shape());
    ExpectBlobNear({1, 3, 4, 2, 5, 6}, top);
    // Backward splits the diff the same way.
    SetBlobData(&top, {0, 0, 0, 0, 0, 0});
    const float diff[] = {10, 30, 40, 20, 50, 60};
    std::copy(diff, diff + 6, top.mutable_cpu_diff());
    layer.Backward({&top}, {true, true}, {&a, &b});
    EXPECT_EQ((std::vector<float>{10, 20}), BlobDiff(a));
    EXPECT_EQ((std::vector<float>{30, 40, 50, 60}), BlobDiff(b));
  }
}

TEST(ConcatLayerTest, LegacyConcatDim) {
  Blob a(1, 1, 1, 1), b(1, 1, 1, 1), top;
  SetBlobData(&a, {1});
  SetBlobData(&b, {2});
  ConcatLayer layer(ParseLayerParameter("name: 'cat' type: 'Concat' concat_param { concat_dim: 2 }"));
  ASSERT_TRUE(layer.SetUp({&a, &b}, {&top}).ok());
  layer.Forward({&a, &b}, {&top});
  EXPECT_EQ((std::vector<int>{1, 1, 2, 1}), top.shape());
  ExpectBlobNear({1, 2}, top);
}

TEST(ConcatLayerTest, Gradient) {
  std::mt19937 rng(1701);
  Blob a(2, 3, 2, 2), b(2, 2, 2, 2), top;
  test::FillGaussian(&a, &rng);
  test::FillGaussian(&b, &rng);
  ConcatLayer layer(ParseLayerParameter("name: 'cat' type: 'Concat'"));
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&a, &b}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(ConcatLayerConfigTest, ShapeMismatch) {
  Blob a(1, 2, 2, 2), b(1, 2, 3, 3), top;
  ConcatLayer layer(ParseLayerParameter("name: 'cat4' type: 'Concat'"));
  Status s = layer.SetUp({&a, &b}, {&top});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find("cat4")) << s.message();
  EXPECT_NE(std::string::npos, s.message().find("same shape except at concat axis 1")) << s.message();
  EXPECT_NE(std::string::npos, s.message().find("1 2 3 3")) << s.message();
  ConcatLayer both(ParseLayerParameter("name: 'cat4' type: 'Concat' concat_param { axis: 1 concat_dim: 1 }"));
  s = both.SetUp({&a, &a}, {&top});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find("not both")) << s.message();
}

TEST(ConcatLayerDeathTest, ReshapedBottomMismatch) {
  Blob a(1, 2, 2, 2), b(1, 1, 2, 2), top;
  ConcatLayer layer(ParseLayerParameter("name: 'cat4' type: 'Concat'"));
  ASSERT_TRUE(layer.SetUp({&a, &b}, {&top}).ok());
  b.Reshape(1, 1, 3, 2);
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(layer.Forward({&a, &b}, {&top}), "layer cat4 \\(Concat\\): all inputs must have");
}

// ---- Eltwise ----

class EltwiseLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (Blob* b : {&a_, &b_, &c_}) b->Reshape(std::vector<int>{1, 3});
    SetBlobData(&a_, {1, -2, 3});
    SetBlobData(&b_, {4, 5, -6});
    SetBlobData(&c_, {0.5f, 2, 1});
  }
  std::vector<float> Run(const std::string& eltwise_param) {
    EltwiseLayer layer(ParseLayerParameter("name: 'elt' type: 'Eltwise' eltwise_param { " + eltwise_param + " }"));
    const Status s = layer.SetUp({&a_, &b_, &c_}, {&top_});
    EXPECT_TRUE(s.ok()) << s.message();
    layer.Forward({&a_, &b_, &c_}, {&top_});
    return test::BlobData(top_);
  }
  Blob a_, b_, c_, top_;
};

TEST_F(EltwiseLayerTest, Prod) { EXPECT_EQ((std::vector<float>{2, -20, -18}), Run("operation: PROD")); }

TEST_F(EltwiseLayerTest, Sum) {
  EXPECT_EQ((std::vector<float>{5.5f, 5, -2}), Run("operation: SUM"));
  // 1*a - 1*b + 2*c.
  EXPECT_EQ((std::vector<float>{-2, -3, 11}), Run("operation: SUM coeff: 1 coeff: -1 coeff: 2"));
}

TEST_F(EltwiseLayerTest, Max) { EXPECT_EQ((std::vector<float>{4, 5, 3}), Run("operation: MAX")); }

TEST_F(EltwiseLayerTest, MaxBackwardRoutesToTheWinner) {
  EltwiseLayer layer(ParseLayerParameter("name: 'elt' type: 'Eltwise' eltwise_param { operation: MAX }"));
  ASSERT_TRUE(layer.SetUp({&a_, &b_, &c_}, {&top_}).ok());
  layer.Forward({&a_, &b_, &c_}, {&top_});
  const float diff[] = {1, 2, 3};
  std::copy(diff, diff + 3, top_.mutable_cpu_diff());
  layer.Backward({&top_}, {true, true, true}, {&a_, &b_, &c_});
  EXPECT_EQ((std::vector<float>{0, 0, 3}), BlobDiff(a_));
  EXPECT_EQ((std::vector<float>{1, 2, 0}), BlobDiff(b_));
  EXPECT_EQ((std::vector<float>{0, 0, 0}), BlobDiff(c_));
}

void CheckEltwiseGradient(const std::string& eltwise_param, bool distinct, uint32_t seed) {
  std::mt19937 rng(seed);
  Blob a(2, 3, 2, 2), b(2, 3, 2, 2), c(2, 3, 2, 2), top;
  for (Blob* blob : {&a, &b, &c}) {
    if (distinct) {
      test::FillDistinct(blob, &rng);
    } else {
      test::FillGaussian(blob, &rng);
    }
  }
  if (distinct) {
    // Offset the blobs so no two bottoms share a value at any position.
    for (int i = 0; i < b.count(); ++i) b.mutable_cpu_data()[i] += 0.017f;
    for (int i = 0; i < c.count(); ++i) c.mutable_cpu_data()[i] += 0.034f;
  }
  EltwiseLayer layer(ParseLayerParameter("name: 'elt' type: 'Eltwise' eltwise_param { " + eltwise_param + " }"));
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientEltwise(&layer, {&a, &b, &c}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(EltwiseLayerGradientTest, Prod) { CheckEltwiseGradient("operation: PROD", false, 1701); }
TEST(EltwiseLayerGradientTest, ProdUnstable) {
  CheckEltwiseGradient("operation: PROD stable_prod_grad: false", false, 1702);
}
TEST(EltwiseLayerGradientTest, Sum) { CheckEltwiseGradient("operation: SUM", false, 1703); }
TEST(EltwiseLayerGradientTest, SumCoeff) {
  CheckEltwiseGradient("operation: SUM coeff: 1 coeff: -0.5 coeff: 2", false, 1704);
}
TEST(EltwiseLayerGradientTest, Max) {
  // Values a step apart: MAX is piecewise linear, with kinks at ties.
  CheckEltwiseGradient("operation: MAX", true, 1705);
}

Status SetUpEltwise(const std::string& eltwise_param, std::vector<int> shape_b) {
  Blob a(std::vector<int>{2, 3}), b(shape_b), top;
  EltwiseLayer layer(ParseLayerParameter("name: 'elt2' type: 'Eltwise' eltwise_param { " + eltwise_param + " }"));
  return layer.SetUp({&a, &b}, {&top});
}

TEST(EltwiseLayerConfigTest, Errors) {
  Status s = SetUpEltwise("operation: SUM", {3, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find("elt2")) << s.message();
  EXPECT_NE(std::string::npos, s.message().find("bottom 0 is 2 3 (6), bottom 1 is 3 2 (6)")) << s.message();
  s = SetUpEltwise("operation: SUM coeff: 1", {2, 3});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find("one coefficient per bottom")) << s.message();
  s = SetUpEltwise("operation: PROD coeff: 1 coeff: 2", {2, 3});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find("only takes coefficients for the SUM")) << s.message();
  EXPECT_TRUE(SetUpEltwise("operation: MAX", {2, 3}).ok());
}

}  // namespace
}  // namespace nereus

// Concat and Eltwise: exact values, numeric gradients, shape errors.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/concat_eltwise_layers.h"

namespace nereus {
namespace test {
namespace {

// ---- Concat ----

class ConcatLayerTest : public ::testing::Test {
 protected:
  // Concat 'cat' (`extra` after its type) of a_ and b_, shaped and filled as
  // given, run forward into top_.
  std::unique_ptr<ConcatLayer> Concat(const std::string& extra, const std::vector<int>& a_shape,
                                      const std::vector<float>& a_values, const std::vector<int>& b_shape,
                                      const std::vector<float>& b_values) {
    a_.Reshape(a_shape);
    b_.Reshape(b_shape);
    SetBlobData(&a_, a_values);
    SetBlobData(&b_, b_values);
    auto layer = std::make_unique<ConcatLayer>(ParseLayerParameter("name: 'cat' type: 'Concat' " + extra));
    const Status s = layer->SetUp({&a_, &b_}, {&top_});
    EXPECT_TRUE(s.ok()) << s;
    layer->Forward({&a_, &b_}, {&top_});
    return layer;
  }
  Blob a_, b_, top_;
};

TEST_F(ConcatLayerTest, ChannelAxis) {
  Concat("", {2, 2, 1, 1}, {1, 2, 3, 4}, {2, 1, 1, 1}, {5, 6});
  EXPECT_EQ((std::vector<int>{2, 3, 1, 1}), top_.shape());
  // Per sample: a's channels, then b's.
  ExpectBlobNear({1, 2, 5, 3, 4, 6}, top_);
}

TEST_F(ConcatLayerTest, NumAxisAndNegativeAxis) {
  Concat("concat_param { axis: 0 }", {1, 1, 1, 2}, {1, 2}, {2, 1, 1, 2}, {3, 4, 5, 6});
  EXPECT_EQ((std::vector<int>{3, 1, 1, 2}), top_.shape());
  ExpectBlobNear({1, 2, 3, 4, 5, 6}, top_);

  // Along the width (axis -1): rows [1 | 3 4] and [2 | 5 6].
  auto layer = Concat("concat_param { axis: -1 }", {1, 1, 2, 1}, {1, 2}, {1, 1, 2, 2}, {3, 4, 5, 6});
  EXPECT_EQ((std::vector<int>{1, 1, 2, 3}), top_.shape());
  ExpectBlobNear({1, 3, 4, 2, 5, 6}, top_);
  // Backward splits the diff the same way.
  SetBlobData(&top_, {0, 0, 0, 0, 0, 0});
  const float diff[] = {10, 30, 40, 20, 50, 60};
  std::copy(diff, diff + 6, top_.mutable_cpu_diff());
  layer->Backward({&top_}, {true, true}, {&a_, &b_});
  EXPECT_EQ((std::vector<float>{10, 20}), BlobDiff(a_));
  EXPECT_EQ((std::vector<float>{30, 40, 50, 60}), BlobDiff(b_));
}

TEST_F(ConcatLayerTest, LegacyConcatDim) {
  Concat("concat_param { concat_dim: 2 }", {1, 1, 1, 1}, {1}, {1, 1, 1, 1}, {2});
  EXPECT_EQ((std::vector<int>{1, 1, 2, 1}), top_.shape());
  ExpectBlobNear({1, 2}, top_);
}

TEST_F(ConcatLayerTest, Gradient) {
  test::ExpectLayerGradient<ConcatLayer>("name: 'cat' type: 'Concat'", {{2, 3, 2, 2}, {2, 2, 2, 2}}, 1701);
}

TEST(ConcatLayerConfigTest, ShapeMismatch) {
  Blob a(1, 2, 2, 2), b(1, 2, 3, 3), top;
  ConcatLayer layer(ParseLayerParameter("name: 'cat4' type: 'Concat'"));
  Status s = layer.SetUp({&a, &b}, {&top});
  test::ExpectErrorContains(s, {"cat4", "same shape except at concat axis 1", "1 2 3 3"});
  ConcatLayer both(ParseLayerParameter("name: 'cat4' type: 'Concat' concat_param { axis: 1 concat_dim: 1 }"));
  s = both.SetUp({&a, &a}, {&top});
  test::ExpectErrorContains(s, {"not both"});
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
  test::ExpectGradient(&layer, {&a, &b, &c}, {&top}, {test::GradientCheck::kEltwise});
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
  test::ExpectErrorContains(s, {"elt2", "bottom 0 is 2 3 (6), bottom 1 is 3 2 (6)"});
  s = SetUpEltwise("operation: SUM coeff: 1", {2, 3});
  test::ExpectErrorContains(s, {"one coefficient per bottom"});
  s = SetUpEltwise("operation: PROD coeff: 1 coeff: 2", {2, 3});
  test::ExpectErrorContains(s, {"only takes coefficients for the SUM"});
  EXPECT_TRUE(SetUpEltwise("operation: MAX", {2, 3}).ok());
}

}  // namespace
}  // namespace test
}  // namespace nereus

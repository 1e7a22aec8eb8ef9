// Eltwise: exact values, numeric gradients, shape errors.
#include "worker/trainer/layers/eltwise_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

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

// InnerProduct: exact forward values (plain, transposed, other axis),
// numeric gradients and configuration errors.
#include "worker/trainer/layers/inner_product_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace {

using test::ExpectBlobNear;
using test::GradientChecker;
using test::ParseLayerParameter;
using test::SetBlobData;

caffe::LayerParameter IpParam(const std::string& ip_param) {
  return ParseLayerParameter("name: 'ip' type: 'InnerProduct' inner_product_param { " + ip_param + " }");
}

// bottom rows [1 2 3] and [4 5 6]; W = [[1 0 -1], [.5 .5 .5]]; b = [1, -1].
// Row 0: 1 - 3 + 1 = -1, 3 - 1 = 2. Row 1: 4 - 6 + 1 = -1, 7.5 - 1 = 6.5.
TEST(InnerProductLayerTest, Forward) {
  std::mt19937 rng(1);
  Blob bottom(std::vector<int>{2, 3});
  Blob top;
  SetBlobData(&bottom, {1, 2, 3, 4, 5, 6});
  InnerProductLayer layer(IpParam("num_output: 2"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  ASSERT_EQ(2u, layer.blobs().size());
  EXPECT_EQ((std::vector<int>{2, 3}), layer.blobs()[0]->shape());
  SetBlobData(layer.blobs()[0].get(), {1, 0, -1, 0.5f, 0.5f, 0.5f});
  SetBlobData(layer.blobs()[1].get(), {1, -1});
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ((std::vector<int>{2, 2}), top.shape());
  ExpectBlobNear({-1, 2, -1, 6.5f}, top);
}

TEST(InnerProductLayerTest, ForwardTransposed) {
  std::mt19937 rng(1);
  Blob bottom(std::vector<int>{2, 3});
  Blob top;
  SetBlobData(&bottom, {1, 2, 3, 4, 5, 6});
  InnerProductLayer layer(IpParam("num_output: 2 transpose: true"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  // Stored as K x N: the transpose of the weights above.
  EXPECT_EQ((std::vector<int>{3, 2}), layer.blobs()[0]->shape());
  SetBlobData(layer.blobs()[0].get(), {1, 0.5f, 0, 0.5f, -1, 0.5f});
  SetBlobData(layer.blobs()[1].get(), {1, -1});
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({-1, 2, -1, 6.5f}, top);
}

TEST(InnerProductLayerTest, ForwardAxisAndFlattening) {
  std::mt19937 rng(1);
  {
    // axis 2 on [1, 2, 3]: two rows of 3 inputs; top [1, 2, num_output].
    Blob bottom(std::vector<int>{1, 2, 3});
    Blob top;
    SetBlobData(&bottom, {1, 2, 3, 4, 5, 6});
    InnerProductLayer layer(IpParam("num_output: 2 axis: 2 bias_term: false"));
    layer.set_rng(&rng);
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
    ASSERT_EQ(1u, layer.blobs().size());
    SetBlobData(layer.blobs()[0].get(), {1, 0, -1, 0.5f, 0.5f, 0.5f});
    layer.Forward({&bottom}, {&top});
    EXPECT_EQ((std::vector<int>{1, 2, 2}), top.shape());
    ExpectBlobNear({-2, 3, -2, 7.5f}, top);
  }
  {
    // Default axis 1 on [2, 1, 1, 3] flattens C*H*W = 3 inputs per row.
    Blob bottom(2, 1, 1, 3);
    Blob top;
    SetBlobData(&bottom, {1, 2, 3, 4, 5, 6});
    InnerProductLayer layer(
        IpParam("num_output: 1 weight_filler { type: 'constant' value: 1 } "
                "bias_filler { type: 'constant' value: 0.25 }"));
    layer.set_rng(&rng);
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
    layer.Forward({&bottom}, {&top});
    EXPECT_EQ((std::vector<int>{2, 1}), top.shape());
    ExpectBlobNear({6.25f, 15.25f}, top);
  }
}

TEST(InnerProductLayerTest, Gradient) {
  std::mt19937 rng(1701);
  Blob bottom(2, 3, 2, 2);
  Blob top;
  test::FillGaussian(&bottom, &rng);
  InnerProductLayer layer(
      IpParam("num_output: 4 weight_filler { type: 'gaussian' std: 0.5 } "
              "bias_filler { type: 'gaussian' std: 0.5 }"));
  layer.set_rng(&rng);
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(InnerProductLayerTest, GradientTransposed) {
  std::mt19937 rng(1702);
  Blob bottom(2, 3, 2, 2);
  Blob top;
  test::FillGaussian(&bottom, &rng);
  InnerProductLayer layer(
      IpParam("num_output: 4 transpose: true weight_filler { type: 'gaussian' std: 0.5 } "
              "bias_filler { type: 'gaussian' std: 0.5 }"));
  layer.set_rng(&rng);
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(InnerProductLayerTest, GradientAxis2NoBias) {
  std::mt19937 rng(1703);
  Blob bottom(std::vector<int>{2, 3, 4});
  Blob top;
  test::FillGaussian(&bottom, &rng);
  InnerProductLayer layer(
      IpParam("num_output: 3 axis: -1 bias_term: false weight_filler { type: 'gaussian' std: 0.5 }"));
  layer.set_rng(&rng);
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(InnerProductLayerConfigTest, Errors) {
  std::mt19937 rng(1);
  Blob bottom(2, 3, 1, 1);
  Blob top;
  {
    InnerProductLayer layer(ParseLayerParameter("name: 'fc6' type: 'InnerProduct'"));
    layer.set_rng(&rng);
    const Status s = layer.SetUp({&bottom}, {&top});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string::npos, s.message().find("fc6")) << s.message();
    EXPECT_NE(std::string::npos, s.message().find("num_output")) << s.message();
  }
  {
    InnerProductLayer layer(
        ParseLayerParameter("name: 'fc6' type: 'InnerProduct' inner_product_param { num_output: 2 axis: 4 }"));
    layer.set_rng(&rng);
    const Status s = layer.SetUp({&bottom}, {&top});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string::npos, s.message().find("axis 4 is out of range")) << s.message();
  }
  {
    InnerProductLayer layer(
        ParseLayerParameter("name: 'fc6' type: 'InnerProduct' inner_product_param { num_output: 2 "
                            "weight_filler { type: 'nonsense' } }"));
    layer.set_rng(&rng);
    const Status s = layer.SetUp({&bottom}, {&top});
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string::npos, s.message().find("weight_filler")) << s.message();
  }
}

TEST(InnerProductLayerDeathTest, InputSizeChange) {
  std::mt19937 rng(1);
  Blob bottom(2, 3, 1, 1);
  Blob top;
  InnerProductLayer layer(IpParam("num_output: 2"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  bottom.Reshape(2, 4, 1, 1);
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(layer.Forward({&bottom}, {&top}), "layer ip \\(InnerProduct\\).*weights expect 3");
}

}  // namespace
}  // namespace nereus

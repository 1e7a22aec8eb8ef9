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
using test::ParseLayerParameter;
using test::SetBlobData;

std::string IpText(const std::string& ip_param) {
  return "name: 'ip' type: 'InnerProduct' inner_product_param { " + ip_param + " }";
}

caffe::LayerParameter IpParam(const std::string& ip_param) { return ParseLayerParameter(IpText(ip_param)); }

// Rows [1 2 3] and [4 5 6] through InnerProduct `ip_param` with weights
// `weights` (stored as `weight_shape`) and biases [1, -1], into `top`.
void ForwardTwoRows(const std::string& ip_param, const std::vector<int>& weight_shape,
                    const std::vector<float>& weights, Blob* top) {
  std::mt19937 rng(1);
  Blob bottom(std::vector<int>{2, 3});
  SetBlobData(&bottom, {1, 2, 3, 4, 5, 6});
  InnerProductLayer layer(IpParam(ip_param));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {top}).ok());
  ASSERT_EQ(2u, layer.blobs().size());
  EXPECT_EQ(weight_shape, layer.blobs()[0]->shape());
  SetBlobData(layer.blobs()[0].get(), weights);
  SetBlobData(layer.blobs()[1].get(), {1, -1});
  layer.Forward({&bottom}, {top});
}

// W = [[1 0 -1], [.5 .5 .5]]; b = [1, -1].
// Row 0: 1 - 3 + 1 = -1, 3 - 1 = 2. Row 1: 4 - 6 + 1 = -1, 7.5 - 1 = 6.5.
TEST(InnerProductLayerTest, Forward) {
  Blob top;
  ForwardTwoRows("num_output: 2", {2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f}, &top);
  EXPECT_EQ((std::vector<int>{2, 2}), top.shape());
  ExpectBlobNear({-1, 2, -1, 6.5f}, top);
}

TEST(InnerProductLayerTest, ForwardTransposed) {
  // Stored as K x N: the transpose of the weights above.
  Blob top;
  ForwardTwoRows("num_output: 2 transpose: true", {3, 2}, {1, 0.5f, 0, 0.5f, -1, 0.5f}, &top);
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
  test::ExpectLayerGradient<InnerProductLayer>(
      IpText("num_output: 4 weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }"),
      {2, 3, 2, 2}, 1701);
}

TEST(InnerProductLayerTest, GradientTransposed) {
  test::ExpectLayerGradient<InnerProductLayer>(
      IpText("num_output: 4 transpose: true weight_filler { type: 'gaussian' std: 0.5 } "
             "bias_filler { type: 'gaussian' std: 0.5 }"),
      {2, 3, 2, 2}, 1702);
}

TEST(InnerProductLayerTest, GradientAxis2NoBias) {
  test::ExpectLayerGradient<InnerProductLayer>(
      IpText("num_output: 3 axis: -1 bias_term: false weight_filler { type: 'gaussian' std: 0.5 }"), {2, 3, 4}, 1703);
}

// SetUp of InnerProduct 'fc6' (`extra` after its type) on [2, 3, 1, 1].
Status SetUpFc6(const std::string& extra) {
  std::mt19937 rng(1);
  Blob bottom(2, 3, 1, 1), top;
  InnerProductLayer layer(ParseLayerParameter("name: 'fc6' type: 'InnerProduct' " + extra));
  layer.set_rng(&rng);
  return layer.SetUp({&bottom}, {&top});
}

TEST(InnerProductLayerConfigTest, Errors) {
  test::ExpectErrorContains(SetUpFc6(""), {"fc6", "num_output"});
  test::ExpectErrorContains(SetUpFc6("inner_product_param { num_output: 2 axis: 4 }"), {"axis 4 is out of range"});
  test::ExpectErrorContains(SetUpFc6("inner_product_param { num_output: 2 weight_filler { type: 'nonsense' } }"),
                            {"weight_filler"});
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

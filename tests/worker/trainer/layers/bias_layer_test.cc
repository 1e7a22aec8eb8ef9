// Bias (learned, from a second bottom, a scalar, in place): exact values,
// numeric gradients and configuration errors.
#include "worker/trainer/layers/bias_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(BiasLayerTest, LearnedBiasPerChannel) {
  Blob bottom(std::vector<int>{2, 3, 2}), top;
  SetBlobData(&bottom, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  std::mt19937 rng(1);
  BiasLayer layer(ParseLayerParameter("name: 'b' type: 'Bias'"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  ASSERT_EQ(1u, layer.blobs().size());
  // The default filler is the constant 0: the identity.
  EXPECT_EQ((std::vector<float>{0, 0, 0}), BlobData(*layer.blobs()[0]));
  SetBlobData(layer.blobs()[0].get(), {0.5f, 0, -1});
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ((std::vector<float>{1.5f, 2.5f, 3, 4, 4, 5, 7.5f, 8.5f, 9, 10, 10, 11}), BlobData(top));
  for (int i = 0; i < 12; ++i) top.mutable_cpu_diff()[i] = static_cast<float>(i);
  SetBlobData(layer.blobs()[0].get(), {0, 0, 0});
  caffe_set(3, 1.0f, layer.blobs()[0]->mutable_cpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ(BlobDiff(top), BlobDiff(bottom));
  // Accumulated onto the diff already there (1): 1 + (0 + 1 + 6 + 7), ...
  EXPECT_EQ((std::vector<float>{15, 23, 31}), BlobDiff(*layer.blobs()[0]));
}

TEST(BiasLayerTest, Gradients) {
  const char* configs[] = {"bias_param { filler { type: 'gaussian' } }",
                           "bias_param { axis: 0 num_axes: 2 filler { type: 'gaussian' } }",
                           "bias_param { num_axes: 0 filler { type: 'gaussian' } }",
                           "bias_param { axis: -1 num_axes: -1 filler { type: 'gaussian' } }",
                           "bias_param { axis: 1 num_axes: -1 filler { type: 'gaussian' } }"};
  for (const char* config : configs) {
    SCOPED_TRACE(config);
    ExpectLayerGradient<BiasLayer>(std::string("name: 'b' type: 'Bias' ") + config, {2, 3, 2, 2}, 42);
  }
}

TEST(BiasLayerTest, BiasFromASecondBottomAndItsGradient) {
  for (const std::vector<int>& bias_shape : std::vector<std::vector<int>>{{3, 2}, {3}, {}, {2, 3, 2, 2}}) {
    SCOPED_TRACE(Blob(bias_shape).shape_string());
    std::mt19937 rng(43);
    Blob bottom(2, 3, 2, 2), bias(bias_shape), top;
    FillGaussian(&bottom, &rng);
    FillGaussian(&bias, &rng);
    const std::string axis = bias_shape.size() == 4 ? "bias_param { axis: 0 }" : "";
    BiasLayer layer(ParseLayerParameter("name: 'b' type: 'Bias' " + axis));
    layer.set_rng(&rng);
    ExpectGradient(&layer, {&bottom, &bias}, {&top});
    EXPECT_TRUE(layer.blobs().empty());
  }
  // Values: a [3] bias from bottom 1 along axis 1.
  Blob bottom(std::vector<int>{1, 3, 2}), bias(std::vector<int>{3}), top;
  SetBlobData(&bottom, {1, 2, 3, 4, 5, 6});
  SetBlobData(&bias, {10, 20, 30});
  BiasLayer layer(ParseLayerParameter("name: 'b' type: 'Bias'"));
  ASSERT_TRUE(layer.SetUp({&bottom, &bias}, {&top}).ok());
  layer.Forward({&bottom, &bias}, {&top});
  EXPECT_EQ((std::vector<float>{11, 12, 23, 24, 35, 36}), BlobData(top));
  SetBlobData(&top, {0, 0, 0, 0, 0, 0});
  for (int i = 0; i < 6; ++i) top.mutable_cpu_diff()[i] = static_cast<float>(i + 1);
  caffe_set(3, 7.0f, bias.mutable_cpu_diff());  // written, not accumulated
  layer.Backward({&top}, {true, true}, {&bottom, &bias});
  EXPECT_EQ((std::vector<float>{3, 7, 11}), BlobDiff(bias));
}

TEST(BiasLayerTest, InPlaceMatchesApart) {
  ExpectLayerInPlaceMatchesApart<BiasLayer>("name: 'b' type: 'Bias' bias_param { filler { type: 'gaussian' } }",
                                            {2, 3, 2, 2}, 44);
}

TEST(BiasLayerTest, BadShapesAndParametersAreErrors) {
  std::mt19937 rng(45);
  auto set_up = [&rng](const std::string& param, const std::vector<std::vector<int>>& shapes) {
    BiasLayer layer(ParseLayerParameter("name: 'b' type: 'Bias' " + param));
    layer.set_rng(&rng);
    return SetUpOn(&layer, shapes);
  };
  EXPECT_EQ(
      "layer b (Bias): dimension mismatch between bottom[0]->shape(1) and bias->shape(0): bottom 2 3 2 2 (24), "
      "bias 4 (4)",
      set_up("", {{2, 3, 2, 2}, {4}}).message());
  ExpectErrorContains(set_up("", {{2, 3, 2, 2}, {3, 2, 2, 2}}), {"layer b (Bias)", "extends past bottom[0]'s shape"});
  ExpectErrorContains(set_up("bias_param { axis: 4 }", {{2, 3, 2, 2}}), {"layer b (Bias)", "axis 4 is out of range"});
  ExpectErrorContains(set_up("bias_param { axis: 2 num_axes: 3 }", {{2, 3, 2, 2}}),
                      {"layer b (Bias)", "extends past bottom[0]'s shape"});
  ExpectErrorContains(set_up("bias_param { num_axes: -2 }", {{2, 3, 2, 2}}), {"layer b (Bias)", "num_axes"});
  // A scalar bias ignores the axis, as Caffe does.
  EXPECT_TRUE(set_up("bias_param { axis: 3 }", {{2, 3, 2, 2}, {}}).ok());
}

}  // namespace
}  // namespace test
}  // namespace nereus

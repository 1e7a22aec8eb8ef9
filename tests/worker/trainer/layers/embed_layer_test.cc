// Embed: rows looked up plus the bias, and the gradients accumulated into
// the rows looked up (worked by hand), numeric gradient checks of the weight
// and bias, the element functions the GPU shares, bad indices and
// parameters naming the layer.
#include "worker/trainer/layers/embed_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

const char* kEmbed = "name: 'e' type: 'Embed' embed_param { num_output: 2 input_dim: 4 }";

TEST(EmbedLayerTest, LooksUpRowsAndAccumulatesTheirGradients) {
  std::mt19937 rng(1);
  Blob idx(std::vector<int>{2, 2}), top;
  SetBlobData(&idx, {3, 0, 3, 1});
  EmbedLayer layer(ParseLayerParameter(kEmbed));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&idx}, {&top}).ok());
  ASSERT_EQ(2u, layer.blobs().size());
  EXPECT_EQ((std::vector<int>{4, 2}), layer.blobs()[0]->shape());  // input_dim x num_output
  EXPECT_EQ((std::vector<int>{2}), layer.blobs()[1]->shape());
  EXPECT_EQ(std::vector<float>(8, 0.0f), BlobData(*layer.blobs()[0]));  // Caffe's default filler: constant 0
  SetBlobData(layer.blobs()[0].get(), {0, 1, 2, 3, 4, 5, 6, 7});
  SetBlobData(layer.blobs()[1].get(), {0.5f, -1});
  layer.Forward({&idx}, {&top});
  ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  EXPECT_EQ((std::vector<int>{2, 2, 2}), top.shape());
  EXPECT_EQ((std::vector<float>{6.5f, 6, 0.5f, 0, 6.5f, 6, 2.5f, 2}), BlobData(top));
  const std::vector<float> top_diff = {1, 10, 2, 20, 3, 30, 4, 40};
  std::copy(top_diff.begin(), top_diff.end(), top.mutable_cpu_diff());
  std::fill(layer.blobs()[0]->mutable_cpu_diff(), layer.blobs()[0]->mutable_cpu_diff() + 8, 0.0f);
  std::fill(layer.blobs()[1]->mutable_cpu_diff(), layer.blobs()[1]->mutable_cpu_diff() + 2, 0.0f);
  layer.Backward({&top}, {false}, {&idx});
  // Row 3 was looked up by positions 0 and 2; row 2 by none.
  EXPECT_EQ((std::vector<float>{2, 20, 4, 40, 0, 0, 4, 40}), BlobDiff(*layer.blobs()[0]));
  EXPECT_EQ((std::vector<float>{10, 100}), BlobDiff(*layer.blobs()[1]));
  // Backward adds to the parameters' gradients (iter_size).
  layer.Backward({&top}, {false}, {&idx});
  EXPECT_EQ((std::vector<float>{20, 200}), BlobDiff(*layer.blobs()[1]));
}

TEST(EmbedLayerTest, ElementFunctions) {
  EXPECT_TRUE(ops::EmbedIndexValid(0, 4));
  EXPECT_TRUE(ops::EmbedIndexValid(3, 4));
  EXPECT_FALSE(ops::EmbedIndexValid(4, 4));
  EXPECT_FALSE(ops::EmbedIndexValid(-1, 4));
  EXPECT_FALSE(ops::EmbedIndexValid(1.5f, 4));
  const float top_diff[] = {1, 10, 2, 20, 3, 30};
  const int members[] = {0, 2, 1};
  EXPECT_EQ(0.5f + 1 + 3, ops::EmbedWeightGradAt(0.5f, top_diff, members, 0, 2, 2, 0));
  EXPECT_EQ(20, ops::EmbedWeightGradAt(0, top_diff, members, 2, 3, 2, 1));
  EXPECT_EQ(60, ops::EmbedBiasGradAt(top_diff, 3, 2, 1));
}

TEST(EmbedLayerTest, NoBiasTerm) {
  Blob idx(std::vector<int>{3}), top;
  SetBlobData(&idx, {2, 2, 0});
  EmbedLayer layer(
      ParseLayerParameter("name: 'e' type: 'Embed' embed_param { num_output: 1 input_dim: 3 bias_term: false "
                          "weight_filler { type: 'constant' value: 0.25 } }"));
  std::mt19937 rng(1);
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&idx}, {&top}).ok());
  ASSERT_EQ(1u, layer.blobs().size());
  layer.Forward({&idx}, {&top});
  EXPECT_EQ((std::vector<float>{0.25f, 0.25f, 0.25f}), BlobData(top));
}

TEST(EmbedLayerTest, GradientOfWeightAndBias) {
  std::mt19937 rng(71);
  Blob idx(std::vector<int>{4, 3}), top;
  for (int i = 0; i < idx.count(); ++i) idx.mutable_cpu_data()[i] = static_cast<float>(rng() % 5);
  EmbedLayer layer(ParseLayerParameter(
      "name: 'e' type: 'Embed' embed_param { num_output: 3 input_dim: 5 weight_filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' } }"));
  layer.set_rng(&rng);
  // The parameters only (-2): the indices have no gradient.
  test::ExpectGradient(&layer, {&idx}, {&top}, {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-3f, 0, -1, -2});
}

TEST(EmbedLayerTest, BadIndicesAndParametersNameTheLayer) {
  std::mt19937 rng(1);
  Blob idx(std::vector<int>{2}), top;
  EmbedLayer layer(ParseLayerParameter(kEmbed));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&idx}, {&top}).ok());
  EXPECT_FALSE(layer.AllowForceBackward(0));
  SetBlobData(&idx, {1, 4});
  layer.Forward({&idx}, {&top});
  EXPECT_EQ("layer e (Embed): input 4 at position 1 is not an integer index in [0, 4) (embed_param.input_dim)",
            layer.forward_error().message());
  SetBlobData(&idx, {1.5f, 0});
  layer.Forward({&idx}, {&top});
  EXPECT_EQ("layer e (Embed): input 1.5 at position 0 is not an integer index in [0, 4) (embed_param.input_dim)",
            layer.forward_error().message());
  EmbedLayer no_output(ParseLayerParameter("name: 'e1' type: 'Embed' embed_param { input_dim: 4 }"));
  test::ExpectErrorContains(test::SetUpOn(&no_output, {{2}}), {"layer e1 (Embed)", "num_output must be positive"});
  EmbedLayer no_input(ParseLayerParameter("name: 'e2' type: 'Embed' embed_param { num_output: 4 }"));
  test::ExpectErrorContains(test::SetUpOn(&no_input, {{2}}), {"layer e2 (Embed)", "input_dim must be positive"});
}

TEST(EmbedLayerDeathTest, IndexGradientIsFatal) {
  ExpectBackwardDies<EmbedLayer>(kEmbed, {{2}}, {true}, "layer e \\(Embed\\): cannot backpropagate to the input");
}

}  // namespace
}  // namespace test
}  // namespace nereus

// Scale (learned, with bias_term, from a second bottom, in place): exact
// values and numeric gradients.
#include "worker/trainer/layers/scale_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(ScaleLayerTest, LearnedScaleAndBiasPerChannel) {
  Blob bottom(std::vector<int>{2, 3, 2}), top;
  SetBlobData(&bottom, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  std::mt19937 rng(1);
  ScaleLayer layer(ParseLayerParameter("name: 'sc' type: 'Scale' scale_param { bias_term: true }"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  ASSERT_EQ(2u, layer.blobs().size());
  // Defaults: scale 1, bias 0 (the identity).
  EXPECT_EQ((std::vector<float>{1, 1, 1}), BlobData(*layer.blobs()[0]));
  EXPECT_EQ((std::vector<float>{0, 0, 0}), BlobData(*layer.blobs()[1]));
  SetBlobData(layer.blobs()[0].get(), {1, 2, 3});
  SetBlobData(layer.blobs()[1].get(), {0.5f, 0, -1});
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ((std::vector<float>{1.5f, 2.5f, 6, 8, 14, 17, 7.5f, 8.5f, 18, 20, 32, 35}), BlobData(top));
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 12, 1.0f);
  for (auto& b : layer.blobs()) caffe_set(b->count(), 0.0f, b->mutable_cpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}), BlobDiff(bottom));
  EXPECT_EQ((std::vector<float>{1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12}), BlobDiff(*layer.blobs()[0]));
  EXPECT_EQ((std::vector<float>{4, 4, 4}), BlobDiff(*layer.blobs()[1]));
}

TEST(ScaleLayerTest, Gradients) {
  const char* configs[] = {
      "scale_param { bias_term: true filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }",
      "scale_param { axis: 0 num_axes: 2 filler { type: 'gaussian' } }",
      "scale_param { num_axes: 0 filler { type: 'gaussian' } bias_term: true }",
      "scale_param { axis: -1 num_axes: -1 filler { type: 'gaussian' } }"};
  for (const char* config : configs) {
    SCOPED_TRACE(config);
    ExpectLayerGradient<ScaleLayer>(std::string("name: 'sc' type: 'Scale' ") + config, {2, 3, 2, 2}, 42);
  }
}

TEST(ScaleLayerTest, ScaleFromASecondBottomAndItsGradient) {
  std::mt19937 rng(43);
  Blob bottom(2, 3, 2, 2), scale(std::vector<int>{3, 2}), top;
  test::FillGaussian(&bottom, &rng);
  test::FillGaussian(&scale, &rng);
  ScaleLayer layer(ParseLayerParameter("name: 'sc' type: 'Scale' scale_param { bias_term: true }"));
  layer.set_rng(&rng);
  test::ExpectGradient(&layer, {&bottom, &scale}, {&top});
  Blob wrong(std::vector<int>{4});
  ScaleLayer bad(ParseLayerParameter("name: 'sc' type: 'Scale'"));
  EXPECT_EQ(
      "layer sc (Scale): dimension mismatch between bottom[0]->shape(1) and scale->shape(0): "
      "bottom 2 3 2 2 (24), scale 4 (4)",
      bad.SetUp({&bottom, &wrong}, {&top}).message());
}

TEST(ScaleLayerTest, InPlaceMatchesApart) {
  ExpectLayerInPlaceMatchesApart<ScaleLayer>(
      "name: 'sc' type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } }", {2, 3, 2, 2}, 44);
}

}  // namespace
}  // namespace test
}  // namespace nereus

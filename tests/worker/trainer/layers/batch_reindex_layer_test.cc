// BatchReindex: rows gathered and gradients summed back (worked by hand),
// a numeric gradient check, the element function the GPU shares, and bad
// indices and shapes naming the layer.
#include "worker/trainer/layers/batch_reindex_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(BatchReindexLayerTest, GathersRowsAndSumsTheirGradients) {
  Blob data(std::vector<int>{3, 2}), idx(std::vector<int>{4}), top;
  SetBlobData(&data, {1, 2, 3, 4, 5, 6});
  SetBlobData(&idx, {2, 0, 2, 1.5f});  // 1.5 is row 1, as Caffe reads it.
  BatchReindexLayer layer(ParseLayerParameter("name: 'r' type: 'BatchReindex'"));
  ASSERT_TRUE(layer.SetUp({&data, &idx}, {&top}).ok());
  EXPECT_EQ((std::vector<int>{4, 2}), top.shape());
  layer.Forward({&data, &idx}, {&top});
  ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  EXPECT_EQ((std::vector<float>{5, 6, 1, 2, 5, 6, 3, 4}), BlobData(top));
  SetBlobData(&top, {0, 0, 0, 0, 0, 0, 0, 0});
  std::copy_n(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}.begin(), 8, top.mutable_cpu_diff());
  layer.Backward({&top}, {true, false}, {&data, &idx});
  // Row 2 was picked twice: 1 + 5, 2 + 6.
  EXPECT_EQ((std::vector<float>{3, 4, 7, 8, 6, 8}), BlobDiff(data));
}

TEST(BatchReindexLayerTest, GradAtSumsThePickingRowsInOrder) {
  const float top_diff[] = {1, 2, 3, 4, 5, 6};
  const float indices[] = {1, 0, 1};
  EXPECT_EQ(1 + 5, ops::BatchReindexGradAt(top_diff, indices, 3, 2, 1, 0));
  EXPECT_EQ(2 + 6, ops::BatchReindexGradAt(top_diff, indices, 3, 2, 1, 1));
  EXPECT_EQ(4, ops::BatchReindexGradAt(top_diff, indices, 3, 2, 0, 1));
  EXPECT_EQ(0, ops::BatchReindexGradAt(top_diff, indices, 3, 2, 2, 0));  // never picked
}

TEST(BatchReindexLayerTest, Gradient) {
  std::mt19937 rng(51);
  Blob data(std::vector<int>{5, 2, 3}), idx(std::vector<int>{7}), top;
  test::FillGaussian(&data, &rng);
  SetBlobData(&idx, {4, 0, 0, 2, 3, 4, 1});
  BatchReindexLayer layer(ParseLayerParameter("name: 'r' type: 'BatchReindex'"));
  test::ExpectGradient(&layer, {&data, &idx}, {&top}, {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0, -1, 0});
}

TEST(BatchReindexLayerTest, BadIndicesAndShapesNameTheLayer) {
  Blob data(std::vector<int>{3, 2}), idx(std::vector<int>{2}), top;
  BatchReindexLayer layer(ParseLayerParameter("name: 'r' type: 'BatchReindex'"));
  ASSERT_TRUE(layer.SetUp({&data, &idx}, {&top}).ok());
  EXPECT_FALSE(layer.AllowForceBackward(1));
  SetBlobData(&idx, {0, 3});
  layer.Forward({&data, &idx}, {&top});
  EXPECT_EQ("layer r (BatchReindex): index 3 at position 1 is out of range [0, 3) (the data's first dimension)",
            layer.forward_error().message());
  SetBlobData(&idx, {-0.5f, 0});
  layer.Forward({&data, &idx}, {&top});
  EXPECT_EQ("layer r (BatchReindex): index -0.5 at position 0 is out of range [0, 3) (the data's first dimension)",
            layer.forward_error().message());
  BatchReindexLayer two_axes(ParseLayerParameter("name: 'r2' type: 'BatchReindex'"));
  test::ExpectErrorContains(test::SetUpOn(&two_axes, {{3, 2}, {2, 1}}), {"layer r2 (BatchReindex)", "one axis"});
}

TEST(BatchReindexLayerDeathTest, IndexGradientIsFatal) {
  ExpectBackwardDies<BatchReindexLayer>("name: 'r' type: 'BatchReindex'", {{3, 2}, {2}}, {true, true},
                                        "layer r \\(BatchReindex\\): cannot backpropagate to the indices");
}

}  // namespace
}  // namespace test
}  // namespace nereus

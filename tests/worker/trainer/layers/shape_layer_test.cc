// Flatten, Reshape, Slice, Split, Silence, Input and ArgMax: shapes, values,
// shared memory, gradients and configuration errors.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/shape_layers.h"
#include "worker/trainer/split_layer.h"

namespace nereus {
namespace {

using test::BlobData;
using test::BlobDiff;
using test::ParseLayerParameter;
using test::SetBlobData;

void FillIota(Blob* blob) {
  for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>(i);
}

TEST(FlattenLayerTest, MergesAxesAndSharesMemory) {
  Blob bottom(2, 3, 4, 5), top;
  FillIota(&bottom);
  FlattenLayer layer(ParseLayerParameter("name: 'f' type: 'Flatten'"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  EXPECT_EQ((std::vector<int>{2, 60}), top.shape());
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ(bottom.cpu_data(), top.cpu_data());
  for (int i = 0; i < top.count(); ++i) top.mutable_cpu_diff()[i] = 2.0f * i;
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ(BlobDiff(top), BlobDiff(bottom));

  FlattenLayer middle(ParseLayerParameter("name: 'f' type: 'Flatten' flatten_param { axis: 1 end_axis: 2 }"));
  ASSERT_TRUE(middle.SetUp({&bottom}, {&top}).ok());
  EXPECT_EQ((std::vector<int>{2, 12, 5}), top.shape());
  FlattenLayer last(ParseLayerParameter("name: 'f' type: 'Flatten' flatten_param { axis: -2 }"));
  ASSERT_TRUE(last.SetUp({&bottom}, {&top}).ok());
  EXPECT_EQ((std::vector<int>{2, 3, 20}), top.shape());
}

TEST(FlattenLayerTest, GradientAndErrors) {
  std::mt19937 rng(21);
  Blob bottom(2, 3, 2, 2), top;
  test::FillGaussian(&bottom, &rng);
  FlattenLayer layer(ParseLayerParameter("name: 'f' type: 'Flatten'"));
  test::ExpectGradient(&layer, {&bottom}, {&top}, {test::GradientCheck::kEltwise});

  FlattenLayer in_place(ParseLayerParameter("name: 'f' type: 'Flatten'"));
  EXPECT_EQ("layer f (Flatten): Flatten does not allow in-place computation",
            in_place.SetUp({&bottom}, {&bottom}).message());
  FlattenLayer backwards(ParseLayerParameter("name: 'f' type: 'Flatten' flatten_param { axis: 2 end_axis: 1 }"));
  EXPECT_EQ("layer f (Flatten): end_axis 1 comes before axis 2", backwards.SetUp({&bottom}, {&top}).message());
}

std::vector<int> ReshapedShape(const std::vector<int>& bottom_shape, const std::string& param,
                               std::string* error = nullptr) {
  Blob bottom(bottom_shape), top;
  ReshapeLayer layer(ParseLayerParameter("name: 'r' type: 'Reshape' reshape_param { " + param + " }"));
  const Status st = layer.SetUp({&bottom}, {&top});
  if (!st.ok()) {
    if (error != nullptr) *error = st.message();
    return {};
  }
  EXPECT_EQ(bottom.cpu_data(), top.cpu_data());
  return top.shape();
}

TEST(ReshapeLayerTest, CaffesExamples) {
  // reshape_param's documentation in caffe.proto: 2 x 8 -> 2 x 2 x 4 ...
  const std::vector<int> expected = {2, 2, 4};
  EXPECT_EQ(expected, ReshapedShape({2, 8}, "shape { dim: 2 dim: 2 dim: 4 }"));
  EXPECT_EQ(expected, ReshapedShape({2, 8}, "shape { dim: 0 dim: 2 dim: 4 }"));
  EXPECT_EQ(expected, ReshapedShape({2, 8}, "shape { dim: 0 dim: 2 dim: -1 }"));
  EXPECT_EQ(expected, ReshapedShape({2, 8}, "shape { dim: 0 dim: -1 dim: 4 }"));
  EXPECT_EQ(expected, ReshapedShape({2, 8}, "shape { dim: 2 dim: 4 } axis: 1"));
  EXPECT_EQ(expected, ReshapedShape({2, 8}, "shape { dim: 2 dim: 4 } axis: -2"));
  // ... and 2 x 8 -> 1 x 2 x 8, 2 x 1 x 8.
  EXPECT_EQ((std::vector<int>{1, 2, 8}), ReshapedShape({2, 8}, "shape { dim: 1 dim: 2 } num_axes: 1"));
  EXPECT_EQ((std::vector<int>{1, 2, 8}), ReshapedShape({2, 8}, "shape { dim: 1 } num_axes: 0"));
  EXPECT_EQ((std::vector<int>{2, 1, 8}), ReshapedShape({2, 8}, "shape { dim: 1 } axis: 1 num_axes: 0"));
  // Flattening a conv output for a classifier.
  EXPECT_EQ((std::vector<int>{5, 24}), ReshapedShape({5, 2, 3, 4}, "shape { dim: 0 dim: -1 }"));
}

TEST(ReshapeLayerTest, Errors) {
  std::string error;
  ReshapedShape({2, 8}, "shape { dim: -1 dim: -1 }", &error);
  EXPECT_EQ("layer r (Reshape): only one dimension may be -1 (inferred)", error);
  ReshapedShape({2, 8}, "shape { dim: 3 dim: 5 }", &error);
  EXPECT_EQ("layer r (Reshape): output count 15 (shape 3 5 (15)) differs from bottom count 16 (2 8 (16))", error);
  ReshapedShape({2, 8}, "shape { dim: 3 dim: -1 }", &error);
  EXPECT_EQ("layer r (Reshape): cannot infer the -1 dimension: bottom count 16 is not a multiple of 3", error);
}

TEST(SliceLayerTest, SlicePointsAlongChannels) {
  Blob bottom(std::vector<int>{2, 5, 2}), t0, t1, t2;
  FillIota(&bottom);
  SliceLayer layer(ParseLayerParameter("name: 's' type: 'Slice' slice_param { slice_point: 1 slice_point: 3 }"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&t0, &t1, &t2}).ok());
  EXPECT_EQ((std::vector<int>{2, 1, 2}), t0.shape());
  EXPECT_EQ((std::vector<int>{2, 2, 2}), t1.shape());
  EXPECT_EQ((std::vector<int>{2, 2, 2}), t2.shape());
  layer.Forward({&bottom}, {&t0, &t1, &t2});
  EXPECT_EQ((std::vector<float>{0, 1, 10, 11}), BlobData(t0));
  EXPECT_EQ((std::vector<float>{2, 3, 4, 5, 12, 13, 14, 15}), BlobData(t1));
  EXPECT_EQ((std::vector<float>{6, 7, 8, 9, 16, 17, 18, 19}), BlobData(t2));
  // Backward puts each top's gradient back where its values came from.
  for (Blob* t : {&t0, &t1, &t2}) {
    for (int i = 0; i < t->count(); ++i) t->mutable_cpu_diff()[i] = t->cpu_data()[i] + 100;
  }
  layer.Backward({&t0, &t1, &t2}, {true}, {&bottom});
  for (int i = 0; i < bottom.count(); ++i) EXPECT_EQ(i + 100.0f, bottom.cpu_diff()[i]) << i;
}

TEST(SliceLayerTest, EqualPartsAxisZeroAndGradient) {
  Blob bottom(std::vector<int>{4, 3}), t0, t1;
  FillIota(&bottom);
  SliceLayer layer(ParseLayerParameter("name: 's' type: 'Slice' slice_param { axis: 0 }"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&t0, &t1}).ok());
  layer.Forward({&bottom}, {&t0, &t1});
  EXPECT_EQ((std::vector<float>{0, 1, 2, 3, 4, 5}), BlobData(t0));
  EXPECT_EQ((std::vector<float>{6, 7, 8, 9, 10, 11}), BlobData(t1));

  std::mt19937 rng(22);
  Blob g(2, 6, 2, 2), g0, g1, g2;
  test::FillGaussian(&g, &rng);
  SliceLayer grad(
      ParseLayerParameter("name: 's' type: 'Slice' slice_param { slice_dim: 1 slice_point: 2 slice_point: 5 }"));
  test::ExpectGradient(&grad, {&g}, {&g0, &g1, &g2});
}

TEST(SliceLayerTest, Errors) {
  Blob bottom(std::vector<int>{2, 5}), t0, t1;
  SliceLayer uneven(ParseLayerParameter("name: 's' type: 'Slice'"));
  EXPECT_EQ("layer s (Slice): axis 1 of 2 5 (10) cannot be split evenly into 2 tops; give slice_point",
            uneven.SetUp({&bottom}, {&t0, &t1}).message());
  SliceLayer unordered(ParseLayerParameter("name: 's' type: 'Slice' slice_param { slice_point: 5 }"));
  EXPECT_EQ("layer s (Slice): slice_point 5 must be increasing and inside (0, 5) (axis 1 of 2 5 (10))",
            unordered.SetUp({&bottom}, {&t0, &t1}).message());
  SliceLayer count(ParseLayerParameter("name: 's' type: 'Slice' slice_param { slice_point: 1 slice_point: 2 }"));
  EXPECT_EQ("layer s (Slice): 2 slice_point(s) for 2 tops; give one fewer than tops",
            count.SetUp({&bottom}, {&t0, &t1}).message());
}

TEST(SplitLayerTest, SharesDataAndSumsGradients) {
  Blob bottom(std::vector<int>{3}), t0, t1, t2;
  SetBlobData(&bottom, {1, 2, 3});
  SplitLayer layer(ParseLayerParameter("name: 'sp' type: 'Split'"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&t0, &t1, &t2}).ok());
  layer.Forward({&bottom}, {&t0, &t1, &t2});
  EXPECT_EQ(bottom.cpu_data(), t2.cpu_data());
  std::fill(t0.mutable_cpu_diff(), t0.mutable_cpu_diff() + 3, 1.0f);
  std::fill(t1.mutable_cpu_diff(), t1.mutable_cpu_diff() + 3, 10.0f);
  std::fill(t2.mutable_cpu_diff(), t2.mutable_cpu_diff() + 3, 100.0f);
  layer.Backward({&t0, &t1, &t2}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{111, 111, 111}), BlobDiff(bottom));
  SplitLayer in_place(ParseLayerParameter("name: 'sp' type: 'Split'"));
  EXPECT_EQ("layer sp (Split): a Split layer does not allow in-place computation",
            in_place.SetUp({&bottom}, {&t0, &bottom}).message());
}

TEST(SilenceLayerTest, ZeroesTheGradient) {
  Blob a(std::vector<int>{2}), b(std::vector<int>{3});
  std::fill(a.mutable_cpu_diff(), a.mutable_cpu_diff() + 2, 5.0f);
  std::fill(b.mutable_cpu_diff(), b.mutable_cpu_diff() + 3, 5.0f);
  SilenceLayer layer(ParseLayerParameter("name: 'x' type: 'Silence'"));
  ASSERT_TRUE(layer.SetUp({&a, &b}, {}).ok());
  layer.Forward({&a, &b}, {});
  layer.Backward({}, {true, false}, {&a, &b});
  EXPECT_EQ((std::vector<float>{0, 0}), BlobDiff(a));
  EXPECT_EQ((std::vector<float>{5, 5, 5}), BlobDiff(b));
}

TEST(InputLayerTest, ShapesItsTops) {
  Blob t0, t1;
  InputLayer one(ParseLayerParameter("name: 'in' type: 'Input' input_param { shape { dim: 2 dim: 3 } }"));
  ASSERT_TRUE(one.SetUp({}, {&t0, &t1}).ok());
  EXPECT_EQ((std::vector<int>{2, 3}), t0.shape());
  EXPECT_EQ((std::vector<int>{2, 3}), t1.shape());
  InputLayer each(
      ParseLayerParameter("name: 'in' type: 'Input' input_param { shape { dim: 4 } shape { dim: 1 dim: 5 } }"));
  ASSERT_TRUE(each.SetUp({}, {&t0, &t1}).ok());
  EXPECT_EQ((std::vector<int>{4}), t0.shape());
  EXPECT_EQ((std::vector<int>{1, 5}), t1.shape());
  Blob t2;
  InputLayer wrong(ParseLayerParameter("name: 'in' type: 'Input' input_param { shape { dim: 4 } shape { dim: 5 } }"));
  EXPECT_EQ("layer in (Input): input_param must give no shape, one shape for every top, or one per top (3); got 2",
            wrong.SetUp({}, {&t0, &t1, &t2}).message());
}

std::vector<float> ArgMaxOf(const std::string& param, std::vector<int>* shape) {
  Blob bottom(std::vector<int>{2, 4}), top;
  SetBlobData(&bottom, {1, 0, 3, 2, 5, 9, 9, 1});
  ArgMaxLayer layer(ParseLayerParameter("name: 'am' type: 'ArgMax' argmax_param { " + param + " }"));
  const Status st = layer.SetUp({&bottom}, {&top});
  EXPECT_TRUE(st.ok()) << st.message();
  layer.Forward({&bottom}, {&top});
  *shape = top.shape();
  return BlobData(top);
}

TEST(ArgMaxLayerTest, IndicesValuesTopKAndAxis) {
  std::vector<int> shape;
  // Ties go to the larger index (pairs sorted by value, then index).
  EXPECT_EQ((std::vector<float>{2, 2}), ArgMaxOf("top_k: 1", &shape));
  EXPECT_EQ((std::vector<int>{2, 1, 1}), shape);
  EXPECT_EQ((std::vector<float>{2, 3, 2, 1}), ArgMaxOf("top_k: 2", &shape));
  EXPECT_EQ((std::vector<int>{2, 1, 2}), shape);
  // out_max_val: per item, the k indices then the k values.
  EXPECT_EQ((std::vector<float>{2, 3, 3, 2, 2, 1, 9, 9}), ArgMaxOf("top_k: 2 out_max_val: true", &shape));
  EXPECT_EQ((std::vector<int>{2, 2, 2}), shape);
  // Along an axis: axis 0 compares the two rows column by column.
  EXPECT_EQ((std::vector<float>{1, 1, 1, 0}), ArgMaxOf("axis: 0", &shape));
  EXPECT_EQ((std::vector<int>{1, 4}), shape);
  EXPECT_EQ((std::vector<float>{3, 9}), ArgMaxOf("axis: 1 out_max_val: true", &shape));
  EXPECT_EQ((std::vector<int>{2, 1}), shape);
}

TEST(ArgMaxLayerTest, TopKLargerThanClassesIsAnError) {
  Blob bottom(std::vector<int>{2, 4}), top;
  ArgMaxLayer layer(ParseLayerParameter("name: 'am' type: 'ArgMax' argmax_param { top_k: 5 }"));
  EXPECT_EQ("layer am (ArgMax): top_k (5) must be <= the number of classes (4)",
            layer.SetUp({&bottom}, {&top}).message());
}

}  // namespace
}  // namespace nereus

// Filter: the rows whose selector is nonzero (worked by hand), the set-up
// shape, no row selected, numeric gradient checks of each filtered bottom,
// and shape errors naming the layer.
#include "worker/trainer/layers/filter_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(FilterLayerTest, ForwardsTheSelectedRowsOfEveryBottom) {
  Blob data(std::vector<int>{4, 2}), label(std::vector<int>{4}), selector(std::vector<int>{4, 1}), top_data, top_label;
  SetBlobData(&data, {1, 2, 3, 4, 5, 6, 7, 8});
  SetBlobData(&label, {10, 11, 12, 13});
  SetBlobData(&selector, {0, 1, 0, 0.5f});
  FilterLayer layer(ParseLayerParameter("name: 'f' type: 'Filter'"));
  ASSERT_TRUE(layer.SetUp({&data, &label, &selector}, {&top_data, &top_label}).ok());
  // At set-up the tops have every row (no selector read yet, as Caffe).
  EXPECT_EQ((std::vector<int>{4, 2}), top_data.shape());
  EXPECT_EQ((std::vector<int>{4}), top_label.shape());
  layer.Forward({&data, &label, &selector}, {&top_data, &top_label});
  EXPECT_EQ((std::vector<int>{1, 3}), layer.indices_to_forward());
  EXPECT_EQ((std::vector<float>{3, 4, 7, 8}), BlobData(top_data));
  EXPECT_EQ((std::vector<float>{11, 13}), BlobData(top_label));
  std::fill(data.mutable_cpu_diff(), data.mutable_cpu_diff() + 8, 9.0f);
  SetBlobData(&top_data, {0, 0, 0, 0});
  float* top_diff = top_data.mutable_cpu_diff();
  top_diff[0] = 1;
  top_diff[1] = 2;
  top_diff[2] = 3;
  top_diff[3] = 4;
  layer.Backward({&top_data, &top_label}, {true, false, false}, {&data, &label, &selector});
  EXPECT_EQ((std::vector<float>{0, 0, 1, 2, 0, 0, 3, 4}), BlobDiff(data));

  // No row selected: empty tops.
  SetBlobData(&selector, {0, 0, 0, 0});
  layer.Forward({&data, &label, &selector}, {&top_data, &top_label});
  EXPECT_EQ((std::vector<int>{0, 2}), top_data.shape());
  layer.Backward({&top_data, &top_label}, {true, false, false}, {&data, &label, &selector});
  EXPECT_EQ(std::vector<float>(8, 0.0f), BlobDiff(data));
}

TEST(FilterLayerTest, GradientOfEachFilteredBottom) {
  for (int bottom : {0, 1}) {
    std::mt19937 rng(61);
    Blob a(std::vector<int>{5, 3, 2}), b(std::vector<int>{5, 2}), selector(std::vector<int>{5}), ta, tb;
    test::FillGaussian(&a, &rng);
    test::FillGaussian(&b, &rng);
    SetBlobData(&selector, {1, 0, 1, 1, 0});
    FilterLayer layer(ParseLayerParameter("name: 'f' type: 'Filter'"));
    test::ExpectGradient(&layer, {&a, &b, &selector}, {&ta, &tb},
                         {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0, -1, bottom});
    EXPECT_EQ(3, ta.shape(0));
  }
}

TEST(FilterLayerTest, ShapeErrorsNameTheLayer) {
  FilterLayer tops(ParseLayerParameter("name: 'f1' type: 'Filter'"));
  test::ExpectErrorContains(test::SetUpOn(&tops, {{4, 2}, {4}}, 2), {"layer f1 (Filter)", "one top per filtered"});
  FilterLayer selector(ParseLayerParameter("name: 'f2' type: 'Filter'"));
  test::ExpectErrorContains(test::SetUpOn(&selector, {{4, 2}, {4, 2}}), {"layer f2 (Filter)", "singletons"});
  FilterLayer batch(ParseLayerParameter("name: 'f3' type: 'Filter'"));
  test::ExpectErrorContains(test::SetUpOn(&batch, {{3, 2}, {4}}), {"layer f3 (Filter)", "same 0th dimension"});
  FilterLayer one(ParseLayerParameter("name: 'f4' type: 'Filter'"));
  test::ExpectErrorContains(test::SetUpOn(&one, {{4}}), {"layer f4 (Filter)", "at least 2 bottom"});
  FilterLayer net(ParseLayerParameter("name: 'f5' type: 'Filter' bottom: 'x' bottom: 'y' bottom: 'sel'"));
  EXPECT_TRUE(net.AllowForceBackward(1));
  EXPECT_FALSE(net.AllowForceBackward(2));
}

TEST(FilterLayerDeathTest, SelectorGradientIsFatal) {
  ExpectBackwardDies<FilterLayer>("name: 'f' type: 'Filter'", {{2, 2}, {2}}, {true, true},
                                  "layer f \\(Filter\\): cannot backpropagate to the selector");
}

}  // namespace
}  // namespace test
}  // namespace nereus

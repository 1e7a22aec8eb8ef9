// Concat: exact values, numeric gradients, shape errors.
#include "worker/trainer/layers/concat_layer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

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

}  // namespace
}  // namespace test
}  // namespace nereus

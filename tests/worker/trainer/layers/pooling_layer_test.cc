// Pooling: Caffe's output-size rounding, MAX (with and without a mask top),
// AVE with its padding-aware divisor, global pooling, gradients and errors.
#include "worker/trainer/layers/pooling_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace {

using test::ExpectBlobNear;
using test::GradientChecker;
using test::Iota;
using test::ParseLayerParameter;
using test::SetBlobData;

std::string PoolText(const std::string& pooling_param) {
  return "name: 'pool' type: 'Pooling' pooling_param { " + pooling_param + " }";
}

caffe::LayerParameter PoolParam(const std::string& pooling_param) {
  return ParseLayerParameter(PoolText(pooling_param));
}

// Pooling `pooling_param` forward on a bottom of `bottom_shape` holding
// `values`: the top has `top_shape` and the values `expected`.
void ExpectPooled(const std::string& pooling_param, const std::vector<int>& bottom_shape,
                  const std::vector<float>& values, const std::vector<int>& top_shape,
                  const std::vector<float>& expected) {
  test::ExpectLayerForward<PoolingLayer>(PoolText(pooling_param), bottom_shape, values, top_shape, expected);
}

TEST(PoolingLayerTest, OutputSizeRoundsUpLikeCaffe) {
  // 6x6, kernel 3, stride 2: Caffe gives ceil(3/2)+1 = 3, floor would give 2.
  EXPECT_EQ(3, PoolingLayer::PooledSize(6, 3, 0, 2, false));
  // A padded last window that would start in the padding is dropped:
  // ceil((3 + 2 - 2) / 2) + 1 = 3, but window 2 starts at 4 - 1 = 3 >= 3.
  EXPECT_EQ(2, PoolingLayer::PooledSize(3, 2, 1, 2, true));
  EXPECT_EQ(3, PoolingLayer::PooledSize(4, 2, 1, 2, true));
  EXPECT_EQ(1, PoolingLayer::PooledSize(5, 5, 0, 1, false));
}

TEST(PoolingLayerTest, MaxForward6x6Kernel3Stride2) {
  // x(h, w) = 6h + w. Windows cover rows {0..2}, {2..4}, {4,5} (the last one
  // clipped); the max is the bottom-right element: rows/cols 2, 4, 5.
  ExpectPooled("pool: MAX kernel_size: 3 stride: 2", {1, 1, 6, 6}, Iota(36), {1, 1, 3, 3},
               {14, 16, 17, 26, 28, 29, 32, 34, 35});
}

TEST(PoolingLayerTest, AveForward6x6Kernel3Stride2) {
  // Mean row index per window: 1, 3, 4.5 (the clipped window divides by 2
  // rows, not 3, since it extends beyond the unpadded input). Value = 6*mh+mw.
  ExpectPooled("pool: AVE kernel_size: 3 stride: 2", {1, 1, 6, 6}, Iota(36), {1, 1, 3, 3},
               {7, 9, 10.5f, 19, 21, 22.5f, 28, 30, 31.5f});
}

TEST(PoolingLayerTest, AveDivisorCountsPadding) {
  // Every window is 3x3 of the padded input: corners hold 4 ones, edges 6.
  const float c = 4.0f / 9, e = 6.0f / 9;
  ExpectPooled("pool: AVE kernel_size: 3 stride: 1 pad: 1", {1, 1, 3, 3}, std::vector<float>(9, 1.0f), {1, 1, 3, 3},
               {c, e, c, e, 1, e, c, e, c});
}

TEST(PoolingLayerTest, PaddedLastWindowClipped) {
  Blob bottom(1, 1, 3, 3);
  Blob top;
  SetBlobData(&bottom, Iota(9, 1.0f));
  {
    PoolingLayer layer(PoolParam("pool: AVE kernel_size: 2 stride: 2 pad: 1"));
    SetBlobData(&bottom, std::vector<float>(9, 1.0f));
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
    layer.Forward({&bottom}, {&top});
    EXPECT_EQ((std::vector<int>{1, 1, 2, 2}), top.shape());
    // Windows rows {-1,0} and {1,2}: divisor 4 each (padding included).
    ExpectBlobNear({0.25f, 0.5f, 0.5f, 1.0f}, top);
  }
  {
    SetBlobData(&bottom, Iota(9, 1.0f));
    Blob mask;
    PoolingLayer layer(PoolParam("pool: MAX kernel_size: 2 stride: 2 pad: 1"));
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top, &mask}).ok());
    layer.Forward({&bottom}, {&top, &mask});
    ExpectBlobNear({1, 3, 7, 9}, top);
    // The mask top holds the flat index of each max within the plane.
    ExpectBlobNear({0, 2, 6, 8}, mask);
  }
}

TEST(PoolingLayerTest, MaxBackwardRoutesToArgmax) {
  Blob bottom(1, 1, 3, 3);
  Blob top;
  SetBlobData(&bottom, Iota(9, 1.0f));
  PoolingLayer layer(PoolParam("pool: MAX kernel_size: 2 stride: 1"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({5, 6, 8, 9}, top);
  const float top_diff[] = {1, 2, 3, 4};
  std::copy(top_diff, top_diff + 4, top.mutable_cpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{0, 0, 0, 0, 1, 2, 0, 3, 4}), test::BlobDiff(bottom));
}

TEST(PoolingLayerTest, GlobalPooling) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6};
  ExpectPooled("pool: MAX global_pooling: true", {2, 1, 2, 3}, values, {2, 1, 1, 1}, {6, -1});
  ExpectPooled("pool: AVE global_pooling: true", {2, 1, 2, 3}, values, {2, 1, 1, 1}, {3.5f, -3.5f});
}

TEST(PoolingLayerTest, GradientMax) {
  test::ExpectLayerGradient<PoolingLayer>(PoolText("pool: MAX kernel_size: 3 stride: 2"), {2, 2, 5, 6}, 1701,
                                          test::BottomFill::kDistinct);
}

TEST(PoolingLayerTest, GradientMaxPaddedWithMaskTop) {
  std::mt19937 rng(1702);
  Blob bottom(1, 2, 4, 5);
  Blob top;
  Blob mask;
  test::FillDistinct(&bottom, &rng);
  PoolingLayer layer(PoolParam("pool: MAX kernel_h: 3 kernel_w: 2 stride: 2 pad: 1"));
  GradientChecker checker(1e-2f, 1e-3f);
  // Only top 0 carries a gradient; the mask is an index, checked by value.
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top, &mask}).ok());
  for (int j = 0; j < top.count(); ++j) {
    checker.CheckGradientSingle(&layer, {&bottom}, {&top, &mask}, -1, 0, j, false);
  }
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(PoolingLayerTest, GradientAvePadded) {
  test::ExpectLayerGradient<PoolingLayer>(PoolText("pool: AVE kernel_size: 3 stride: 2 pad: 1"), {2, 2, 5, 5}, 1703);
}

TEST(PoolingLayerTest, GradientAveRectangularStride) {
  test::ExpectLayerGradient<PoolingLayer>(
      PoolText("pool: AVE kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 1"), {1, 2, 6, 5}, 1704);
}

Status SetUpPool(const std::string& pooling_param, int tops = 1) {
  Blob bottom(1, 1, 4, 4);
  Blob top, top2;
  PoolingLayer layer(ParseLayerParameter("name: 'pool7' type: 'Pooling' pooling_param { " + pooling_param + " }"));
  std::vector<Blob*> top_vec = {&top};
  if (tops == 2) top_vec.push_back(&top2);
  return layer.SetUp({&bottom}, top_vec);
}

TEST(PoolingLayerConfigTest, Errors) {
  struct Case {
    std::string param;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"kernel_size: 0", "kernel size must be > 0"},
      {"stride: 2", "kernel size is kernel_size OR kernel_h and kernel_w"},
      {"kernel_size: 2 kernel_h: 2 kernel_w: 2", "exactly one"},
      {"kernel_h: 2", "both kernel_h and kernel_w"},
      {"kernel_size: 2 pad: 2", "must be smaller than the kernel"},
      {"global_pooling: true kernel_size: 2", "cannot be specified"},
      {"global_pooling: true stride: 2", "only pad = 0 and stride = 1"},
      {"pool: STOCHASTIC kernel_size: 2", "STOCHASTIC"},
      {"kernel_size: 5", "larger than the padded input"},
  };
  for (const Case& c : cases) {
    const Status s = SetUpPool(c.param);
    ASSERT_FALSE(s.ok()) << c.param;
    EXPECT_NE(std::string::npos, s.message().find("pool7")) << s.message();
    EXPECT_NE(std::string::npos, s.message().find(c.message)) << c.param << " -> " << s.message();
  }
  Blob flat(std::vector<int>{2, 3, 4}), top;
  PoolingLayer layer(ParseLayerParameter("name: 'pool7' type: 'Pooling' pooling_param { kernel_size: 2 }"));
  EXPECT_EQ(layer.SetUp({&flat}, {&top}).message(),
            "layer pool7 (Pooling): input must have 4 axes (num, channels, height, width), got 2 3 4 (24)");
  // Only MAX has a mask top: the base class rejects the second top.
  EXPECT_FALSE(SetUpPool("pool: AVE kernel_size: 2", 2).ok());
  EXPECT_TRUE(SetUpPool("pool: MAX kernel_size: 2", 2).ok());
}

}  // namespace
}  // namespace nereus

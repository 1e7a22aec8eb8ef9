// SPP: each level's Pooling parameters (Caffe's GetPoolingParam), exact
// values of MAX and AVE pyramids forward and backward, the [N, C, 1, 1] top
// of one level, a bottom whose size changes, numeric gradients, and
// configuration errors.
#include "worker/trainer/layers/spp_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(SPPLayerTest, LevelParameters) {
  // 5 x 7, level 1 (2 bins): kernel ceil(5/2) = 3 and ceil(7/2) = 4, stride
  // the kernel, pad (6 - 5 + 1) / 2 = 1 and (8 - 7 + 1) / 2 = 1.
  caffe::PoolingParameter p = SPPLayer::LevelParameter(1, 5, 7, caffe::SPPParameter::AVE);
  EXPECT_EQ(3u, p.kernel_h());
  EXPECT_EQ(4u, p.kernel_w());
  EXPECT_EQ(3u, p.stride_h());
  EXPECT_EQ(4u, p.stride_w());
  EXPECT_EQ(1u, p.pad_h());
  EXPECT_EQ(1u, p.pad_w());
  EXPECT_EQ(caffe::PoolingParameter::AVE, p.pool());
  // Level 0 pools the whole image: kernel 5 x 7, no pad.
  p = SPPLayer::LevelParameter(0, 5, 7, caffe::SPPParameter::MAX);
  EXPECT_EQ(5u, p.kernel_h());
  EXPECT_EQ(7u, p.kernel_w());
  EXPECT_EQ(0u, p.pad_h());
  EXPECT_EQ(0u, p.pad_w());
  EXPECT_EQ(caffe::PoolingParameter::MAX, p.pool());
}

TEST(SPPLayerTest, ForwardValues) {
  // x(h, w) = 4h + w: level 0 the whole image, level 1 its four quadrants.
  ExpectLayerForward<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 2 }", {1, 1, 4, 4}, Iota(16), {1, 5},
                               {15, 5, 7, 13, 15}, 0.0f);
  ExpectLayerForward<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }", {1, 1, 4, 4},
                               Iota(16), {1, 5}, {7.5f, 2.5f, 4.5f, 10.5f, 12.5f}, 0.0f);
  // Two channels, two items: each item's level 0 (one value a channel), then
  // level 1 channel by channel.
  // Item 0: channel 0 holds 0..15, channel 1 their negatives; item 1:
  // channel 0 -16..-31, channel 1 0..15.
  std::vector<float> x;
  for (int i = 0; i < 64; ++i) x.push_back(i < 16 ? i : i < 32 ? -(i - 16) : i < 48 ? -(i - 16) : i - 48);
  ExpectLayerForward<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 2 }", {2, 2, 4, 4}, x, {2, 10},
                               {15, 0, 5, 7, 13, 15, 0, -2, -8, -10, -16, 15, -16, -18, -24, -26, 5, 7, 13, 15}, 0.0f);
  // One level: Pooling's own [N, C, 1, 1].
  ExpectLayerForward<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 1 pool: AVE }", {1, 2, 2, 2},
                               {1, 2, 3, 4, -1, -1, -1, -5}, {1, 2, 1, 1}, {2.5f, -2}, 0.0f);
}

TEST(SPPLayerTest, BackwardAddsTheLevels) {
  for (const bool ave : {false, true}) {
    SCOPED_TRACE(ave ? "AVE" : "MAX");
    Blob bottom(std::vector<int>{1, 1, 4, 4}), top;
    SetBlobData(&bottom, Iota(16));
    SPPLayer layer(ParseLayerParameter(std::string("name: 's' type: 'SPP' spp_param { pyramid_height: 2 ") +
                                       (ave ? "pool: AVE" : "") + " }"));
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
    layer.Forward({&bottom}, {&top});
    const std::vector<float> dy = ave ? std::vector<float>{1, 4, 8, 12, 16} : std::vector<float>{1, 2, 3, 4, 5};
    std::copy(dy.begin(), dy.end(), top.mutable_cpu_diff());
    layer.Backward({&top}, {true}, {&bottom});
    if (ave) {
      // 1/16 from level 0, a quarter of the quadrant's gradient from level 1.
      const float a = 1.0f / 16;
      EXPECT_EQ((std::vector<float>{a + 1, a + 1, a + 2, a + 2, a + 1, a + 1, a + 2, a + 2, a + 3, a + 3, a + 4, a + 4,
                                    a + 3, a + 3, a + 4, a + 4}),
                BlobDiff(bottom));
    } else {
      // The maxima: 15 (level 0, and level 1's last quadrant), 5, 7, 13.
      EXPECT_EQ((std::vector<float>{0, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 0, 0, 4, 0, 1 + 5}), BlobDiff(bottom));
    }
  }
}

TEST(SPPLayerTest, ABottomOfAnotherSizeRebuildsTheLevels) {
  Blob bottom(std::vector<int>{1, 1, 4, 4}), top;
  SPPLayer layer(ParseLayerParameter("name: 's' type: 'SPP' spp_param { pyramid_height: 2 }"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  bottom.Reshape({1, 1, 3, 3});
  SetBlobData(&bottom, Iota(9));
  layer.Forward({&bottom}, {&top});
  // 3 x 3 at level 1: kernel 2, pad 1: windows {0}, {1, 2}, {3, 6}, {4, 5, 7, 8}.
  ASSERT_EQ((std::vector<int>{1, 5}), top.shape());
  EXPECT_EQ((std::vector<float>{8, 0, 2, 6, 8}), BlobData(top));
}

TEST(SPPLayerTest, Gradients) {
  ExpectLayerGradient<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 3 }", {2, 2, 8, 7}, 17,
                                BottomFill::kDistinct, {GradientCheck::kSumOfSquares});
  ExpectLayerGradient<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 3 pool: AVE }", {2, 2, 8, 7}, 17,
                                BottomFill::kGaussian, {GradientCheck::kSumOfSquares});
  ExpectLayerGradient<SPPLayer>("name: 's' type: 'SPP' spp_param { pyramid_height: 2 }", {1, 2, 5, 5}, 18,
                                BottomFill::kDistinct, {GradientCheck::kExhaustive});
}

TEST(SPPLayerTest, BadParametersAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<int>& shape) {
    SPPLayer layer(ParseLayerParameter("name: 's' type: 'SPP' " + param));
    return SetUpOn(&layer, {shape});
  };
  ExpectErrorContains(set_up("", {1, 1, 4, 4}), {"layer s (SPP)", "pyramid_height must be > 0"});
  ExpectErrorContains(set_up("spp_param { pyramid_height: 2 }", {1, 4, 4}), {"layer s (SPP)", "[N, C, H, W]"});
  // 5 x 5 at level 2 (4 bins): kernel 2, pad 2: Pooling refuses a pad not below the kernel.
  ExpectErrorContains(set_up("spp_param { pyramid_height: 3 }", {1, 1, 5, 5}),
                      {"layer s (SPP)", "pyramid level 2", "s_level2 (Pooling)", "pad"});
  ExpectErrorContains(set_up("spp_param { pyramid_height: 2 pool: STOCHASTIC }", {1, 1, 4, 4}),
                      {"layer s (SPP)", "pyramid level 0", "STOCHASTIC"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

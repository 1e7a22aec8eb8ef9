// LRN: exact values for both regions, numeric gradients, configuration errors.
#include "worker/trainer/layers/lrn_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace {

using test::ExpectBlobNear;
using test::ParseLayerParameter;
using test::SetBlobData;

std::string LrnText(const std::string& lrn_param) { return "name: 'norm' type: 'LRN' lrn_param { " + lrn_param + " }"; }

// LRN `lrn_param` forward on a bottom of `shape` holding `values`: the top
// has the bottom's shape and (to 1e-6) the values `expected`.
void ExpectLrn(const std::string& lrn_param, const std::vector<int>& shape, const std::vector<float>& values,
               const std::vector<float>& expected) {
  test::ExpectLayerForward<LRNLayer>(LrnText(lrn_param), shape, values, shape, expected, 1e-6f);
}

TEST(LRNLayerTest, AcrossChannelsValues) {
  // Channels [1, 2, 3], local_size 3, alpha 3 (alpha/size = 1), beta 1, k 1:
  // scale = 1 + sum of squares of the neighbouring channels:
  //   c0: 1 + 1 + 4 = 6, c1: 1 + 1 + 4 + 9 = 15, c2: 1 + 4 + 9 = 14.
  ExpectLrn("local_size: 3 alpha: 3 beta: 1 k: 1", {1, 3, 1, 1}, {1, 2, 3}, {1.0f / 6, 2.0f / 15, 3.0f / 14});
}

TEST(LRNLayerTest, AcrossChannelsDefaultsAndK) {
  // Defaults local_size 5, alpha 1, beta 0.75 with k 2, on 2 positions:
  // every channel window covers all 3 channels here.
  // Position 0: squares 1, 4, 9; each channel's window c-2..c+2 covers all
  // three, so the sum is 14 and scale = 2 + 14/5 = 4.8.
  // Position 1: squares 1, 0, 1 -> sum 2; scale = 2 + 2/5 = 2.4.
  const float s0 = std::pow(4.8f, -0.75f), s1 = std::pow(2.4f, -0.75f);
  ExpectLrn("k: 2", {1, 3, 1, 2}, {1, -1, 2, 0, 3, 1}, {1 * s0, -1 * s1, 2 * s0, 0, 3 * s0, 1 * s1});
}

TEST(LRNLayerTest, WithinChannelValues) {
  // One row [1, 2, 3], local_size 3, alpha 9 (alpha/size^2 = 1), beta 1.
  // Windows (zero padded) sum squares 1+4, 1+4+9, 4+9; scale = 1 + sum; k is
  // not used in this region (Caffe's sub-net has shift 1).
  ExpectLrn("norm_region: WITHIN_CHANNEL local_size: 3 alpha: 9 beta: 1 k: 5", {1, 1, 1, 3}, {1, 2, 3},
            {1.0f / 6, 2.0f / 15, 3.0f / 14});
}

TEST(LRNLayerTest, WithinChannel2D) {
  // 2x2 plane, 3x3 window: every window covers the whole plane.
  // Sum of squares 30; scale = 1 + 9/9 * 30 = 31.
  // Channel 1 has its own sum: 4 -> scale 5.
  ExpectLrn("norm_region: WITHIN_CHANNEL local_size: 3 alpha: 9 beta: 1", {1, 2, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 2},
            {1.0f / 31, 2.0f / 31, 3.0f / 31, 4.0f / 31, 0, 0, 0, 2.0f / 5});
}

TEST(LRNLayerTest, GradientAcrossChannels) {
  test::ExpectLayerGradient<LRNLayer>(LrnText("local_size: 5 alpha: 1 beta: 0.75 k: 1"), {2, 7, 2, 2}, 1701);
}

TEST(LRNLayerTest, GradientAcrossChannelsLargeAlpha) {
  test::ExpectLayerGradient<LRNLayer>(LrnText("local_size: 3 alpha: 5 beta: 0.9 k: 2"), {1, 5, 2, 3}, 1702);
}

TEST(LRNLayerTest, GradientWithinChannel) {
  test::ExpectLayerGradient<LRNLayer>(LrnText("norm_region: WITHIN_CHANNEL local_size: 3 alpha: 2 beta: 0.75"),
                                      {2, 2, 4, 3}, 1703);
}

TEST(LRNLayerConfigTest, EvenLocalSize) {
  Blob bottom(1, 3, 2, 2), top;
  LRNLayer layer(ParseLayerParameter("name: 'norm1' type: 'LRN' lrn_param { local_size: 4 }"));
  const Status s = layer.SetUp({&bottom}, {&top});
  test::ExpectErrorContains(s, {"norm1", "local_size must be odd"});
}

TEST(LRNLayerConfigTest, InputWithoutFourAxes) {
  Blob bottom(std::vector<int>{2, 3, 4}), top;
  LRNLayer layer(ParseLayerParameter("name: 'norm1' type: 'LRN'"));
  EXPECT_EQ(layer.SetUp({&bottom}, {&top}).message(),
            "layer norm1 (LRN): input must have 4 axes (num, channels, height, width), got 2 3 4 (24)");
}

}  // namespace
}  // namespace nereus

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
using test::GradientChecker;
using test::ParseLayerParameter;
using test::SetBlobData;

caffe::LayerParameter LrnParam(const std::string& lrn_param) {
  return ParseLayerParameter("name: 'norm' type: 'LRN' lrn_param { " + lrn_param + " }");
}

TEST(LRNLayerTest, AcrossChannelsValues) {
  // Channels [1, 2, 3], local_size 3, alpha 3 (alpha/size = 1), beta 1, k 1:
  // scale = 1 + sum of squares of the neighbouring channels:
  //   c0: 1 + 1 + 4 = 6, c1: 1 + 1 + 4 + 9 = 15, c2: 1 + 4 + 9 = 14.
  Blob bottom(1, 3, 1, 1), top;
  SetBlobData(&bottom, {1, 2, 3});
  LRNLayer layer(LrnParam("local_size: 3 alpha: 3 beta: 1 k: 1"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ(bottom.shape(), top.shape());
  ExpectBlobNear({1.0f / 6, 2.0f / 15, 3.0f / 14}, top, 1e-6f);
}

TEST(LRNLayerTest, AcrossChannelsDefaultsAndK) {
  // Defaults local_size 5, alpha 1, beta 0.75 with k 2, on 2 positions:
  // every channel window covers all 3 channels here.
  Blob bottom(1, 3, 1, 2), top;
  SetBlobData(&bottom, {1, -1, 2, 0, 3, 1});
  LRNLayer layer(LrnParam("k: 2"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  // Position 0: squares 1, 4, 9; each channel's window c-2..c+2 covers all
  // three, so the sum is 14 and scale = 2 + 14/5 = 4.8.
  // Position 1: squares 1, 0, 1 -> sum 2; scale = 2 + 2/5 = 2.4.
  const float s0 = std::pow(4.8f, -0.75f), s1 = std::pow(2.4f, -0.75f);
  ExpectBlobNear({1 * s0, -1 * s1, 2 * s0, 0, 3 * s0, 1 * s1}, top, 1e-6f);
}

TEST(LRNLayerTest, WithinChannelValues) {
  // One row [1, 2, 3], local_size 3, alpha 9 (alpha/size^2 = 1), beta 1.
  // Windows (zero padded) sum squares 1+4, 1+4+9, 4+9; scale = 1 + sum; k is
  // not used in this region (Caffe's sub-net has shift 1).
  Blob bottom(1, 1, 1, 3), top;
  SetBlobData(&bottom, {1, 2, 3});
  LRNLayer layer(LrnParam("norm_region: WITHIN_CHANNEL local_size: 3 alpha: 9 beta: 1 k: 5"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({1.0f / 6, 2.0f / 15, 3.0f / 14}, top, 1e-6f);
}

TEST(LRNLayerTest, WithinChannel2D) {
  // 2x2 plane, 3x3 window: every window covers the whole plane.
  // Sum of squares 30; scale = 1 + 9/9 * 30 = 31.
  Blob bottom(1, 2, 2, 2), top;
  SetBlobData(&bottom, {1, 2, 3, 4, 0, 0, 0, 2});
  LRNLayer layer(LrnParam("norm_region: WITHIN_CHANNEL local_size: 3 alpha: 9 beta: 1"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  // Channel 1 has its own sum: 4 -> scale 5.
  ExpectBlobNear({1.0f / 31, 2.0f / 31, 3.0f / 31, 4.0f / 31, 0, 0, 0, 2.0f / 5}, top, 1e-6f);
}

TEST(LRNLayerTest, GradientAcrossChannels) {
  std::mt19937 rng(1701);
  Blob bottom(2, 7, 2, 2), top;
  test::FillGaussian(&bottom, &rng);
  LRNLayer layer(LrnParam("local_size: 5 alpha: 1 beta: 0.75 k: 1"));
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(LRNLayerTest, GradientAcrossChannelsLargeAlpha) {
  std::mt19937 rng(1702);
  Blob bottom(1, 5, 2, 3), top;
  test::FillGaussian(&bottom, &rng);
  LRNLayer layer(LrnParam("local_size: 3 alpha: 5 beta: 0.9 k: 2"));
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(LRNLayerTest, GradientWithinChannel) {
  std::mt19937 rng(1703);
  Blob bottom(2, 2, 4, 3), top;
  test::FillGaussian(&bottom, &rng);
  LRNLayer layer(LrnParam("norm_region: WITHIN_CHANNEL local_size: 3 alpha: 2 beta: 0.75"));
  GradientChecker checker(1e-2f, 1e-3f);
  checker.CheckGradientExhaustive(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
}

TEST(LRNLayerConfigTest, EvenLocalSize) {
  Blob bottom(1, 3, 2, 2), top;
  LRNLayer layer(ParseLayerParameter("name: 'norm1' type: 'LRN' lrn_param { local_size: 4 }"));
  const Status s = layer.SetUp({&bottom}, {&top});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string::npos, s.message().find("norm1")) << s.message();
  EXPECT_NE(std::string::npos, s.message().find("local_size must be odd")) << s.message();
}

}  // namespace
}  // namespace nereus

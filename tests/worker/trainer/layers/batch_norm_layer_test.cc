// BatchNorm (batch statistics, Caffe's running sums, global statistics,
// lr_mult 0, local state): exact values and numeric gradients.
#include "worker/trainer/layers/batch_norm_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

// [2, 2, 1, 2]: channel 0 holds 1 3 | 5 7 (mean 4, variance 5), channel 1
// holds 0 0 | 2 2 (mean 1, variance 1).
void FillTwoChannels(Blob* blob) {
  blob->Reshape(std::vector<int>{2, 2, 1, 2});
  SetBlobData(blob, {1, 3, 0, 0, 5, 7, 2, 2});
}

TEST(BatchNormLayerTest, NormalizesWithBatchStatisticsAndKeepsCaffesRunningSums) {
  Blob bottom, top;
  FillTwoChannels(&bottom);
  BatchNormLayer layer(ParseLayerParameter("name: 'bn' type: 'BatchNorm'"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  ASSERT_EQ(3u, layer.blobs().size());
  layer.Forward({&bottom}, {&top});
  const float s0 = std::sqrt(5.0f + 1e-5f);
  const float s1 = std::sqrt(1.0f + 1e-5f);
  ExpectBlobNear({-3 / s0, -1 / s0, -1 / s1, -1 / s1, 1 / s0, 3 / s0, 1 / s1, 1 / s1}, top, 1e-6f);
  // m = 4 values per channel: the variance is stored unbiased (x 4/3).
  EXPECT_EQ((std::vector<float>{4, 1}), BlobData(*layer.blobs()[0]));
  ExpectBlobNear({20.0f / 3, 4.0f / 3}, *layer.blobs()[1]);
  EXPECT_EQ((std::vector<float>{1}), BlobData(*layer.blobs()[2]));
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({4 + 0.999f * 4, 1 + 0.999f * 1}, *layer.blobs()[0]);
  EXPECT_FLOAT_EQ(1.999f, layer.blobs()[2]->cpu_data()[0]);
  EXPECT_TRUE(layer.IsLocalState(0) && layer.IsLocalState(1) && layer.IsLocalState(2));
}

TEST(BatchNormLayerTest, TestPhaseUsesTheRunningAverages) {
  Blob bottom, top;
  FillTwoChannels(&bottom);
  BatchNormLayer layer(ParseLayerParameter("name: 'bn' type: 'BatchNorm' phase: TEST"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  // Sums of 2 updates: mean = [8, 2] / 2, variance = [10, 4] / 2.
  SetBlobData(layer.blobs()[0].get(), {8, 2});
  SetBlobData(layer.blobs()[1].get(), {10, 4});
  SetBlobData(layer.blobs()[2].get(), {2});
  layer.Forward({&bottom}, {&top});
  const float s0 = std::sqrt(5.0f + 1e-5f);
  const float s1 = std::sqrt(2.0f + 1e-5f);
  ExpectBlobNear({-3 / s0, -1 / s0, -1 / s1, -1 / s1, 1 / s0, 3 / s0, 1 / s1, 1 / s1}, top, 1e-6f);
  // The statistics are not touched in TEST.
  EXPECT_EQ((std::vector<float>{2}), BlobData(*layer.blobs()[2]));
  // Backward with global statistics divides by the stored deviation.
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 8, 1.0f);
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_NEAR(1 / s0, bottom.cpu_diff()[0], 1e-6f);
  EXPECT_NEAR(1 / s1, bottom.cpu_diff()[2], 1e-6f);
}

TEST(BatchNormLayerTest, StatisticsCarryLrMultZero) {
  Blob bottom, top;
  FillTwoChannels(&bottom);
  BatchNormLayer layer(ParseLayerParameter("name: 'bn' type: 'BatchNorm'"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  ASSERT_EQ(3, layer.layer_param().param_size());
  for (const auto& spec : layer.layer_param().param()) EXPECT_EQ(0.0f, spec.lr_mult());
  BatchNormLayer learned(ParseLayerParameter("name: 'bn' type: 'BatchNorm' param { lr_mult: 0 } param { lr_mult: 1 }"));
  EXPECT_EQ(
      "layer bn (BatchNorm): cannot configure batch normalization statistics as layer "
      "parameters (param 1 has lr_mult 1.000000; it must be 0)",
      learned.SetUp({&bottom}, {&top}).message());
}

TEST(BatchNormLayerTest, GradientInPlaceAndApart) {
  for (bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "apart");
    std::mt19937 rng(41);
    Blob bottom(2, 3, 2, 2), top;
    test::FillGaussian(&bottom, &rng);
    BatchNormLayer layer(ParseLayerParameter("name: 'bn' type: 'BatchNorm'"));
    if (in_place) {
      // The checker perturbs the bottom, which in place is also the output:
      // check the in-place backward against the out-of-place one instead.
      Blob copy(bottom.shape()), out;
      copy.CopyFrom(bottom);
      ASSERT_TRUE(layer.SetUp({&bottom}, {&bottom}).ok());
      layer.Forward({&bottom}, {&bottom});
      BatchNormLayer apart(ParseLayerParameter("name: 'bn' type: 'BatchNorm'"));
      ASSERT_TRUE(apart.SetUp({&copy}, {&out}).ok());
      apart.Forward({&copy}, {&out});
      EXPECT_EQ(BlobData(out), BlobData(bottom));
      for (int i = 0; i < out.count(); ++i) {
        out.mutable_cpu_diff()[i] = bottom.mutable_cpu_diff()[i] = 0.01f * i * i - 0.3f;
      }
      apart.Backward({&out}, {true}, {&copy});
      layer.Backward({&bottom}, {true}, {&bottom});
      EXPECT_EQ(BlobDiff(copy), BlobDiff(bottom));
    } else {
      test::ExpectGradient(&layer, {&bottom}, {&top}, {test::GradientCheck::kExhaustive, 1e-2f, 2e-3f});
    }
  }
}

}  // namespace
}  // namespace test
}  // namespace nereus

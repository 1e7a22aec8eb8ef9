// MVN: exact values worked from Caffe's definition (per channel, across
// channels, mean only, a constant group), backward values, numeric
// gradients, in place, and configuration errors.
#include "worker/trainer/layers/mvn_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

// [1, 2, 2, 2]: channel 0 holds 1, 2, 3, 4; channel 1 the constant 5.
const std::vector<float> kMvnInput = {1, 2, 3, 4, 5, 5, 5, 5};

TEST(MVNLayerTest, ForwardValues) {
  // Channel 0: mean 2.5, standard deviation sqrt(1.25); channel 1: all at
  // the mean (0 / eps = 0).
  ExpectLayerForward<MVNLayer>("name: 'm' type: 'MVN'", {1, 2, 2, 2}, kMvnInput, {1, 2, 2, 2},
                               {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f, 0, 0, 0, 0}, 1e-6f);
  // One group of 8: mean 3.75, variance 17.5 / 8.
  ExpectLayerForward<MVNLayer>(
      "name: 'm' type: 'MVN' mvn_param { across_channels: true }", {1, 2, 2, 2}, kMvnInput, {1, 2, 2, 2},
      {-1.8593394f, -1.1832160f, -0.5070926f, 0.1690309f, 0.8451543f, 0.8451543f, 0.8451543f, 0.8451543f}, 1e-6f);
  ExpectLayerForward<MVNLayer>("name: 'm' type: 'MVN' mvn_param { normalize_variance: false }", {1, 2, 2, 2}, kMvnInput,
                               {1, 2, 2, 2}, {-1.5f, -0.5f, 0.5f, 1.5f, 0, 0, 0, 0}, 0.0f);
  // eps is added to the standard deviation: 1.5 / (1.5 + 1).
  ExpectLayerForward<MVNLayer>("name: 'm' type: 'MVN' mvn_param { eps: 1 }", {1, 1, 2}, {1, 4}, {1, 1, 2},
                               {-0.6f, 0.6f}, 0.0f);
  // A 2-D bottom [N, D] across channels: each row is a group.
  ExpectLayerForward<MVNLayer>("name: 'm' type: 'MVN' mvn_param { across_channels: true }", {2, 2}, {1, 3, 0, -4},
                               {2, 2}, {-1, 1, 1, -1}, 1e-6f);
}

TEST(MVNLayerTest, BackwardValues) {
  Blob bottom(std::vector<int>{1, 2, 2, 2}), top;
  SetBlobData(&bottom, kMvnInput);
  MVNLayer mean_only(ParseLayerParameter("name: 'm' type: 'MVN' mvn_param { normalize_variance: false }"));
  ASSERT_TRUE(mean_only.SetUp({&bottom}, {&top}).ok());
  mean_only.Forward({&bottom}, {&top});
  SetBlobData(&top, std::vector<float>(8, 0.0f));  // unused without normalize_variance
  const std::vector<float> dy = {1, 2, 3, 4, 0, 0, 0, 8};
  std::copy(dy.begin(), dy.end(), top.mutable_cpu_diff());
  mean_only.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{-1.5f, -0.5f, 0.5f, 1.5f, -2, -2, -2, 6}), BlobDiff(bottom));

  // d y_0 / d x of channel 0: (1 - 1/4 - y_0^2 / 4) / sqrt(1.25), and so on.
  MVNLayer normalized(ParseLayerParameter("name: 'm' type: 'MVN'"));
  Blob top2;
  ASSERT_TRUE(normalized.SetUp({&bottom}, {&top2}).ok());
  normalized.Forward({&bottom}, {&top2});
  std::fill(top2.mutable_cpu_diff(), top2.mutable_cpu_diff() + 8, 0.0f);
  top2.mutable_cpu_diff()[0] = 1.0f;
  normalized.Backward({&top2}, {true}, {&bottom});
  const std::vector<float> expected = {0.2683282f, -0.3577709f, -0.0894427f, 0.1788854f, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(expected[i], bottom.cpu_diff()[i], 1e-6f) << i;
}

TEST(MVNLayerTest, Gradients) {
  for (const char* param : {"", "mvn_param { across_channels: true }", "mvn_param { normalize_variance: false }",
                            "mvn_param { normalize_variance: false across_channels: true }"}) {
    SCOPED_TRACE(param);
    ExpectLayerGradient<MVNLayer>(std::string("name: 'm' type: 'MVN' ") + param, {2, 3, 2, 3}, 14);
  }
}

TEST(MVNLayerTest, InPlaceMatchesApart) {
  for (const char* param : {"", "mvn_param { across_channels: true normalize_variance: true }"}) {
    SCOPED_TRACE(param);
    std::mt19937 rng(15);
    Blob input(std::vector<int>{2, 3, 4});
    FillGaussian(&input, &rng);
    MVNLayer apart(ParseLayerParameter(std::string("name: 'm' type: 'MVN' ") + param));
    MVNLayer in_place(ParseLayerParameter(std::string("name: 'm' type: 'MVN' ") + param));
    ExpectInPlaceMatchesApart(&apart, &in_place, input, -1.0f);
  }
}

TEST(MVNLayerTest, NegativeEpsIsAnError) {
  MVNLayer layer(ParseLayerParameter("name: 'm' type: 'MVN' mvn_param { eps: -1 }"));
  ExpectErrorContains(SetUpOn(&layer, {{1, 2, 2}}), {"layer m (MVN)", "eps must be non-negative"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

#include "worker/trainer/data/dummy_data_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/blob.h"

namespace nereus {
namespace data {
namespace {

class DummyDataLayerTest : public ::testing::Test {
 protected:
  Status SetUpLayer(Layer* layer, const std::vector<Blob*>& tops) {
    layer->set_rng(&rng_);
    return layer->SetUp({}, tops);
  }
  std::mt19937 rng_{7};
  Blob a_, b_, c_;
};

// No filler: zeros, filled once. The legacy 4-D fields, once for all tops.
TEST_F(DummyDataLayerTest, NoFillerGivesZerosOfTheLegacyShape) {
  DummyDataLayer layer(test::ParseLayerParameter(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' dummy_data_param { num: 2 channels: 3 height: 4 width: 5 }"));
  ASSERT_TRUE(SetUpLayer(&layer, {&a_, &b_}).ok());
  EXPECT_EQ(a_.shape(), (std::vector<int>{2, 3, 4, 5}));
  EXPECT_EQ(b_.shape(), (std::vector<int>{2, 3, 4, 5}));
  layer.Forward({}, {&a_, &b_});
  for (int i = 0; i < a_.count(); ++i) ASSERT_EQ(a_.cpu_data()[i], 0.0f);
}

// One filler per top and one shape per top: a constant top is filled once
// (what a later layer writes into it stays), a gaussian one every Forward.
TEST_F(DummyDataLayerTest, ConstantTopsAreFilledOnceOthersEveryForward) {
  DummyDataLayer layer(test::ParseLayerParameter(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' top: 'c' dummy_data_param { "
      "shape { dim: 2 dim: 3 } shape { dim: 1000 } shape { dim: 4 } "
      "data_filler { type: 'constant' value: 1.5 } data_filler { type: 'gaussian' mean: 3 std: 2 } "
      "data_filler { type: 'uniform' min: -1 max: 1 } }"));
  ASSERT_TRUE(SetUpLayer(&layer, {&a_, &b_, &c_}).ok());
  EXPECT_EQ(a_.shape(), (std::vector<int>{2, 3}));
  EXPECT_EQ(b_.shape(), (std::vector<int>{1000}));
  EXPECT_EQ(c_.shape(), (std::vector<int>{4}));
  layer.Forward({}, {&a_, &b_, &c_});
  for (int i = 0; i < 6; ++i) ASSERT_EQ(a_.cpu_data()[i], 1.5f);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < 1000; ++i) {
    sum += b_.cpu_data()[i];
    sum2 += b_.cpu_data()[i] * b_.cpu_data()[i];
  }
  const double mean = sum / 1000, stddev = std::sqrt(sum2 / 1000 - mean * mean);
  EXPECT_NEAR(mean, 3.0, 0.3);
  EXPECT_NEAR(stddev, 2.0, 0.3);
  for (int i = 0; i < 4; ++i) {
    EXPECT_GE(c_.cpu_data()[i], -1.0f);
    EXPECT_LE(c_.cpu_data()[i], 1.0f);
  }
  const std::vector<float> first(b_.cpu_data(), b_.cpu_data() + 1000);
  a_.mutable_cpu_data()[0] = 42;  // As an in-place layer would.
  layer.Forward({}, {&a_, &b_, &c_});
  EXPECT_EQ(a_.cpu_data()[0], 42.0f) << "a constant top is not filled again (Caffe's refill_)";
  EXPECT_NE(std::vector<float>(b_.cpu_data(), b_.cpu_data() + 1000), first) << "drawn again";
}

// One filler for every top; the draws come from the Net's engine, so the
// same seed gives the same values.
TEST_F(DummyDataLayerTest, OneFillerForAllTopsReproducibleFromTheSeed) {
  const caffe::LayerParameter param = test::ParseLayerParameter(
      "name: 'd' type: 'DummyData' top: 'a' top: 'b' dummy_data_param { shape { dim: 5 } "
      "data_filler { type: 'xavier' } }");
  std::vector<float> values[2];
  for (int run = 0; run < 2; ++run) {
    DummyDataLayer layer(param);
    rng_.seed(11);
    ASSERT_TRUE(SetUpLayer(&layer, {&a_, &b_}).ok());
    layer.Forward({}, {&a_, &b_});
    values[run].assign(a_.cpu_data(), a_.cpu_data() + 5);
    values[run].insert(values[run].end(), b_.cpu_data(), b_.cpu_data() + 5);
  }
  EXPECT_EQ(values[0], values[1]);
  EXPECT_NE(std::vector<float>(values[0].begin(), values[0].begin() + 5),
            std::vector<float>(values[0].begin() + 5, values[0].end()));
}

TEST_F(DummyDataLayerTest, BadCountsAndFillersAreSetUpErrors) {
  struct Case {
    const char* param;
    const char* error;
  };
  const Case cases[] = {
      {"shape { dim: 1 } shape { dim: 2 } shape { dim: 3 }", "give shape once, or once per top (2 top(s)); got 3"},
      {"shape { dim: 1 } data_filler { type: 'constant' } data_filler { type: 'constant' } "
       "data_filler { type: 'constant' }",
       "give no data_filler, one, or one per top (2 top(s)); got 3"},
      {"shape { dim: 1 } num: 1 channels: 1 height: 1 width: 1", "give shape or num/channels/height/width, not both"},
      {"num: 1 num: 2 num: 3 channels: 1 height: 1 width: 1",
       "give each of num, channels, height and width once, or once per top"},
      {"shape { dim: 4 } data_filler { type: 'wobbly' }", "data_filler of top 0: "},
  };
  for (const Case& c : cases) {
    DummyDataLayer layer(test::ParseLayerParameter(
        std::string("name: 'd' type: 'DummyData' top: 'a' top: 'b' dummy_data_param { ") + c.param + " }"));
    const Status st = SetUpLayer(&layer, {&a_, &b_});
    EXPECT_NE(st.message().find(c.error), std::string::npos) << c.param << ": " << st;
  }
}

}  // namespace
}  // namespace data
}  // namespace nereus

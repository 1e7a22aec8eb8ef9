// Accuracy (top_k, per-class, ignore_label, spatial labels): exact values
// and errors.
#include "worker/trainer/layers/accuracy_layer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

// Scores (4 samples, 3 classes) and labels:
//   [.1 .5 .4] label 1: rank 1
//   [.7 .2 .1] label 2: rank 3
//   [.3 .3 .4] label 0: ties count against the label -> rank 3
//   [.2 .5 .3] label 2: rank 2
const std::vector<float> kAccuracyScores = {.1f, .5f, .4f, .7f, .2f, .1f, .3f, .3f, .4f, .2f, .5f, .3f};
const std::vector<float> kLabels = {1, 2, 0, 2};

float AccuracyOf(const std::string& accuracy_param, std::vector<float>* per_class = nullptr) {
  Blob scores(std::vector<int>{4, 3}), label(std::vector<int>{4}), top, top_per_class;
  SetBlobData(&scores, kAccuracyScores);
  SetBlobData(&label, kLabels);
  AccuracyLayer layer(ParseLayerParameter("name: 'acc' type: 'Accuracy' accuracy_param { " + accuracy_param + " }"));
  std::vector<Blob*> tops = {&top};
  if (per_class != nullptr) tops.push_back(&top_per_class);
  const Status s = layer.SetUp({&scores, &label}, tops);
  EXPECT_TRUE(s.ok()) << s.message();
  layer.Forward({&scores, &label}, tops);
  if (per_class != nullptr) *per_class = test::BlobData(top_per_class);
  return top.cpu_data()[0];
}

TEST(AccuracyLayerTest, TopK) {
  EXPECT_FLOAT_EQ(0.25f, AccuracyOf(""));
  EXPECT_FLOAT_EQ(0.25f, AccuracyOf("top_k: 1"));
  EXPECT_FLOAT_EQ(0.5f, AccuracyOf("top_k: 2"));
  EXPECT_FLOAT_EQ(1.0f, AccuracyOf("top_k: 3"));
}

TEST(AccuracyLayerTest, IgnoreLabelAndPerClass) {
  // Ignoring label 2 leaves samples 0 (right) and 2 (wrong).
  EXPECT_FLOAT_EQ(0.5f, AccuracyOf("ignore_label: 2"));
  std::vector<float> per_class;
  EXPECT_FLOAT_EQ(0.5f, AccuracyOf("top_k: 2", &per_class));
  // Class 0: 0 of 1; class 1: 1 of 1; class 2: 1 of 2 (sample 3).
  EXPECT_EQ((std::vector<float>{0, 1, 0.5f}), per_class);
}

TEST(AccuracyLayerTest, SpatialLabels) {
  // [1, 2 classes, 1, 3 positions]: predictions argmax per position 1, 0, 1.
  Blob scores(1, 2, 1, 3), label(1, 1, 1, 3), top;
  SetBlobData(&scores, {0, 5, 1, 2, 4, 3});
  SetBlobData(&label, {1, 1, 1});
  AccuracyLayer layer(ParseLayerParameter("name: 'acc' type: 'Accuracy'"));
  ASSERT_TRUE(layer.SetUp({&scores, &label}, {&top}).ok());
  layer.Forward({&scores, &label}, {&top});
  EXPECT_FLOAT_EQ(2.0f / 3, top.cpu_data()[0]);
}

TEST(AccuracyLayerConfigTest, TopKLargerThanClasses) {
  AccuracyLayer layer(ParseLayerParameter("name: 'acc5' type: 'Accuracy' accuracy_param { top_k: 5 }"));
  test::ExpectErrorContains(test::SetUpOn(&layer, {{4, 3}, {4}}), {"acc5", "top_k (5)"});
}

TEST(AccuracyLayerConfigTest, LabelOutOfRangeIsAForwardError) {
  Blob scores(std::vector<int>{4, 3}), label(std::vector<int>{4}), top;
  SetBlobData(&scores, kAccuracyScores);
  SetBlobData(&label, {1, 2, -1, 0});
  AccuracyLayer layer(ParseLayerParameter("name: 'acc1' type: 'Accuracy'"));
  ASSERT_TRUE(layer.SetUp({&scores, &label}, {&top}).ok());
  layer.Forward({&scores, &label}, {&top});
  EXPECT_EQ(layer.forward_error().ToString(),
            "INVALID_ARGUMENT: layer acc1 (Accuracy): label -1 at position 2 is out of range [0, 3)");
  const Layer::LabelRange range = layer.AcceptedLabels(1);
  EXPECT_EQ(range.num_classes, 3);
  EXPECT_FALSE(range.ignore_label.has_value());
  EXPECT_EQ(range.consumer, "layer acc1 (Accuracy)");
}

}  // namespace
}  // namespace test
}  // namespace nereus

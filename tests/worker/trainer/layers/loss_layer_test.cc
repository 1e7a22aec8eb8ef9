// EuclideanLoss, SigmoidCrossEntropyLoss and SoftmaxWithLoss (exact values,
// gradients, normalization, ignore_label, labels out of range), and
// loss_weight on any loss or any layer in a Net (GoogLeNet's weighted
// auxiliary classifiers).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/layers/loss_layers.h"
#include "worker/trainer/net.h"

namespace nereus {
namespace {

using test::BlobDiff;
using test::ExpectBlobNear;
using test::ParseLayerParameter;
using test::SetBlobData;

TEST(EuclideanLossLayerTest, ValueAndGradientOfBothInputs) {
  Blob a(std::vector<int>{2, 2}), b(std::vector<int>{2, 2}), loss;
  SetBlobData(&a, {1, 2, 3, 4});
  SetBlobData(&b, {0, 2, 5, 4});
  EuclideanLossLayer layer(ParseLayerParameter("name: 'e' type: 'EuclideanLoss'"));
  ASSERT_TRUE(layer.SetUp({&a, &b}, {&loss}).ok());
  EXPECT_EQ(1.0f, layer.loss(0));  // default loss weight
  // sum((a - b)^2) / N / 2 = (1 + 4) / 2 / 2
  EXPECT_FLOAT_EQ(1.25f, layer.Forward({&a, &b}, {&loss}));
  EXPECT_FLOAT_EQ(1.25f, loss.cpu_data()[0]);
  layer.Backward({&loss}, {true, true}, {&a, &b});
  EXPECT_EQ((std::vector<float>{0.5f, 0, -1, 0}), BlobDiff(a));
  EXPECT_EQ((std::vector<float>{-0.5f, 0, 1, 0}), BlobDiff(b));
}

TEST(EuclideanLossLayerTest, Gradient) {
  test::ExpectLayerGradient<EuclideanLossLayer>("name: 'e' type: 'EuclideanLoss' loss_weight: 3.7",
                                                {{5, 3, 2, 1}, {5, 3, 2, 1}}, 31, test::BottomFill::kGaussian,
                                                {test::GradientCheck::kExhaustive, 1e-2f, 1e-2f});
}

TEST(EuclideanLossLayerTest, MismatchedInputsAreAnError) {
  Blob a(std::vector<int>{2, 3}), b(std::vector<int>{2, 4}), loss;
  EuclideanLossLayer layer(ParseLayerParameter("name: 'e' type: 'EuclideanLoss'"));
  EXPECT_EQ("layer e (EuclideanLoss): the inputs must have the same dimension, got 2 3 (6) and 2 4 (8)",
            layer.SetUp({&a, &b}, {&loss}).message());
}

// Scores {-1, 0, 2, 0.5} against targets {0, 1, 1, 0}: the per-element
// losses are log(1 + e^-1), log 2, log(1 + e^-2), log(1 + e^0.5).
const std::vector<float> kLossScores = {-1.0f, 0.0f, 2.0f, 0.5f};
const float kElementLoss[] = {0.31326169f, 0.69314718f, 0.12692801f, 0.97407698f};
const float kSigmoid[] = {0.26894142f, 0.5f, 0.88079708f, 0.62245933f};

TEST(SigmoidCrossEntropyLossLayerTest, BatchSizeNormalizationByDefault) {
  Blob x(std::vector<int>{2, 2}), t(std::vector<int>{2, 2}), loss;
  SetBlobData(&x, kLossScores);
  SetBlobData(&t, {0, 1, 1, 0});
  SigmoidCrossEntropyLossLayer layer(ParseLayerParameter("name: 's' type: 'SigmoidCrossEntropyLoss'"));
  ASSERT_TRUE(layer.SetUp({&x, &t}, {&loss}).ok());
  const float sum = kElementLoss[0] + kElementLoss[1] + kElementLoss[2] + kElementLoss[3];
  EXPECT_NEAR(sum / 2, layer.Forward({&x, &t}, {&loss}), 1e-6f);
  layer.Backward({&loss}, {true, false}, {&x, &t});
  const std::vector<float> expected = {(kSigmoid[0] - 0) / 2, (kSigmoid[1] - 1) / 2, (kSigmoid[2] - 1) / 2,
                                       (kSigmoid[3] - 0) / 2};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(expected[i], x.cpu_diff()[i], 1e-6f) << i;
}

TEST(SigmoidCrossEntropyLossLayerTest, IgnoreLabelWithValidNormalization) {
  Blob x(std::vector<int>{2, 2}), t(std::vector<int>{2, 2}), loss;
  SetBlobData(&x, kLossScores);
  SetBlobData(&t, {0, 1, -1, 0});
  SigmoidCrossEntropyLossLayer layer(ParseLayerParameter(
      "name: 's' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 normalization: VALID }"));
  ASSERT_TRUE(layer.SetUp({&x, &t}, {&loss}).ok());
  EXPECT_NEAR((kElementLoss[0] + kElementLoss[1] + kElementLoss[3]) / 3, layer.Forward({&x, &t}, {&loss}), 1e-6f);
  layer.Backward({&loss}, {true, false}, {&x, &t});
  EXPECT_NEAR(kSigmoid[0] / 3, x.cpu_diff()[0], 1e-6f);
  EXPECT_EQ(0.0f, x.cpu_diff()[2]);  // ignored
  // The deprecated normalize: true means VALID too; false means BATCH_SIZE.
  SigmoidCrossEntropyLossLayer old(ParseLayerParameter(
      "name: 's' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 normalize: false }"));
  ASSERT_TRUE(old.SetUp({&x, &t}, {&loss}).ok());
  EXPECT_NEAR((kElementLoss[0] + kElementLoss[1] + kElementLoss[3]) / 2, old.Forward({&x, &t}, {&loss}), 1e-6f);
}

TEST(SigmoidCrossEntropyLossLayerTest, StableForLargeScoresAndGradient) {
  Blob x(std::vector<int>{1, 2}), t(std::vector<int>{1, 2}), loss;
  SetBlobData(&x, {-200.0f, 200.0f});
  SetBlobData(&t, {1, 0});
  SigmoidCrossEntropyLossLayer layer(ParseLayerParameter("name: 's' type: 'SigmoidCrossEntropyLoss'"));
  ASSERT_TRUE(layer.SetUp({&x, &t}, {&loss}).ok());
  EXPECT_FLOAT_EQ(400.0f, layer.Forward({&x, &t}, {&loss}));

  std::mt19937 rng(32);
  Blob gx(4, 3, 1, 1), gt(4, 3, 1, 1), gl;
  test::FillGaussian(&gx, &rng, 2.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int i = 0; i < gt.count(); ++i) gt.mutable_cpu_data()[i] = unit(rng);
  SigmoidCrossEntropyLossLayer g(ParseLayerParameter("name: 's' type: 'SigmoidCrossEntropyLoss'"));
  test::ExpectGradient(&g, {&gx, &gt}, {&gl}, {test::GradientCheck::kExhaustive, 1e-2f, 1e-2f, 0.0f, -1.0f, 0});
}

// softmax([1, 2, 3]) and softmax([1, 1, 1]).
const float kLossP1 = 0.09003057f, kLossP2 = 0.24472847f, kLossP3 = 0.66524096f;

// Gradient checks against the scores (bottom 0), not the labels.
const test::CheckerSettings kScoresOnly = {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, 0};

// Scores [[1, 2, 3], [1, 1, 1]] with labels [2, 0]:
// losses -log(kLossP3) = 0.40760596 and -log(1/3) = 1.09861229.
const float kLoss0 = 0.40760596f, kLoss1 = 1.09861229f;

float LossOf(const std::string& loss_param, std::vector<float> labels = {2, 0}) {
  Blob scores(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss;
  SetBlobData(&scores, {1, 2, 3, 1, 1, 1});
  SetBlobData(&label, labels);
  SoftmaxWithLossLayer layer(ParseLayerParameter("name: 'loss' type: 'SoftmaxWithLoss' " + loss_param));
  const Status s = layer.SetUp({&scores, &label}, {&loss});
  EXPECT_TRUE(s.ok()) << s.message();
  const float weighted = layer.Forward({&scores, &label}, {&loss});
  // The default loss weight is 1, so Forward returns the loss itself.
  EXPECT_FLOAT_EQ(loss.cpu_data()[0], weighted);
  EXPECT_EQ(0, loss.num_axes());
  return loss.cpu_data()[0];
}

TEST(SoftmaxWithLossLayerTest, NormalizationModes) {
  EXPECT_NEAR((kLoss0 + kLoss1) / 2, LossOf(""), 1e-6f);  // VALID by default
  EXPECT_NEAR((kLoss0 + kLoss1) / 2, LossOf("loss_param { normalization: FULL }"), 1e-6f);
  EXPECT_NEAR((kLoss0 + kLoss1) / 2, LossOf("loss_param { normalization: BATCH_SIZE }"), 1e-6f);
  EXPECT_NEAR(kLoss0 + kLoss1, LossOf("loss_param { normalization: NONE }"), 1e-6f);
  // Ignoring label 0 leaves one valid label out of two.
  EXPECT_NEAR(kLoss0, LossOf("loss_param { ignore_label: 0 }"), 1e-6f);
  EXPECT_NEAR(kLoss0, LossOf("loss_param { ignore_label: 0 normalization: VALID }"), 1e-6f);
  EXPECT_NEAR(kLoss0 / 2, LossOf("loss_param { ignore_label: 0 normalization: FULL }"), 1e-6f);
  EXPECT_NEAR(kLoss0 / 2, LossOf("loss_param { ignore_label: 0 normalization: BATCH_SIZE }"), 1e-6f);
  EXPECT_NEAR(kLoss0, LossOf("loss_param { ignore_label: 0 normalization: NONE }"), 1e-6f);
  // Legacy normalize: false means BATCH_SIZE, true means VALID; an explicit
  // normalization wins over it.
  EXPECT_NEAR(kLoss0 / 2, LossOf("loss_param { ignore_label: 0 normalize: false }"), 1e-6f);
  EXPECT_NEAR(kLoss0, LossOf("loss_param { ignore_label: 0 normalize: true }"), 1e-6f);
  EXPECT_NEAR(kLoss0, LossOf("loss_param { ignore_label: 0 normalize: false normalization: NONE }"), 1e-6f);
  // All labels ignored: the normaliser is clamped to 1, the loss is 0.
  EXPECT_EQ(0.0f, LossOf("loss_param { ignore_label: 0 }", {0, 0}));
}

TEST(SoftmaxWithLossLayerTest, BackwardValuesAndProbTop) {
  Blob scores(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss, prob;
  SetBlobData(&scores, {1, 2, 3, 1, 1, 1});
  SetBlobData(&label, {2, 0});
  SoftmaxWithLossLayer layer(
      ParseLayerParameter("name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 0 }"));
  ASSERT_TRUE(layer.SetUp({&scores, &label}, {&loss, &prob}).ok());
  // Loss weight 1 for the loss, 0 for the probabilities.
  EXPECT_EQ(1.0f, layer.loss(0));
  EXPECT_EQ(0.0f, layer.loss(1));
  layer.Forward({&scores, &label}, {&loss, &prob});
  ExpectBlobNear({kLossP1, kLossP2, kLossP3, 1.0f / 3, 1.0f / 3, 1.0f / 3}, prob, 1e-6f);
  layer.Backward({&loss, &prob}, {true, false}, {&scores, &label});
  // (p - onehot) / 1 valid label; the ignored row gets zero.
  const std::vector<float> diff = BlobDiff(scores);
  const std::vector<float> expected = {kLossP1, kLossP2, kLossP3 - 1, 0, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(expected[i], diff[i], 1e-6f) << i;
}

TEST(SoftmaxWithLossLayerTest, Gradient) {
  std::mt19937 rng(1701);
  Blob scores(2, 5, 2, 3), label(2, 1, 2, 3), loss;
  test::FillGaussian(&scores, &rng);
  for (int i = 0; i < label.count(); ++i) label.mutable_cpu_data()[i] = static_cast<float>(rng() % 5);
  SoftmaxWithLossLayer layer(ParseLayerParameter("name: 'loss' type: 'SoftmaxWithLoss'"));
  test::ExpectGradient(&layer, {&scores, &label}, {&loss}, kScoresOnly);
}

TEST(SoftmaxWithLossLayerTest, GradientIgnoreLabelBatchSize) {
  std::mt19937 rng(1702);
  Blob scores(std::vector<int>{4, 3}), label(std::vector<int>{4}), loss;
  test::FillGaussian(&scores, &rng);
  SetBlobData(&label, {0, 1, 2, 1});
  SoftmaxWithLossLayer layer(
      ParseLayerParameter("name: 'loss' type: 'SoftmaxWithLoss' loss_param { ignore_label: 1 normalization: "
                          "BATCH_SIZE }"));
  test::ExpectGradient(&layer, {&scores, &label}, {&loss}, kScoresOnly);
}

TEST(SoftmaxWithLossLayerConfigTest, LabelCountMismatch) {
  SoftmaxWithLossLayer layer(ParseLayerParameter("name: 'loss3' type: 'SoftmaxWithLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&layer, {{2, 3}, {3}}), {"loss3", "number of labels must match"});
}

// A label out of range is a forward error (Net::Forward returns it), and the
// layer tells the Net which labels it takes (a Data layer checks them).
TEST(SoftmaxWithLossLayerConfigTest, LabelOutOfRangeIsAForwardError) {
  Blob scores(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss;
  SetBlobData(&label, {1, 3});
  SoftmaxWithLossLayer layer(
      ParseLayerParameter("name: 'loss3' type: 'SoftmaxWithLoss' loss_param { ignore_label: 255 }"));
  ASSERT_TRUE(layer.SetUp({&scores, &label}, {&loss}).ok());
  EXPECT_EQ(layer.Forward({&scores, &label}, {&loss}), 0.0f);
  EXPECT_EQ(layer.forward_error().ToString(),
            "INVALID_ARGUMENT: layer loss3 (SoftmaxWithLoss): label 3 at position 1 is out of range [0, 3)");
  SetBlobData(&label, {1, 255});
  layer.Forward({&scores, &label}, {&loss});
  EXPECT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  const Layer::LabelRange range = layer.AcceptedLabels(1);
  EXPECT_EQ(range.num_classes, 3);
  EXPECT_EQ(range.ignore_label, 255);
  EXPECT_EQ(range.consumer, "layer loss3 (SoftmaxWithLoss)");
  EXPECT_EQ(layer.AcceptedLabels(0).num_classes, 0);
}

// A Net with two inputs and both losses, weighted, plus a loss_weight on a
// layer that is not a loss (Caffe allows it on any top).
TEST(LossWeightTest, AnyLossAndAnyLayerCountWithTheirWeight) {
  caffe::NetParameter param;
  ASSERT_TRUE(ParseNetParameter(R"(
    name: "weights" force_backward: true
    layer { name: "in" type: "Input" top: "a" top: "b" top: "t"
            input_param { shape { dim: 2 dim: 2 } } }
    layer { name: "euclid" type: "EuclideanLoss" bottom: "a" bottom: "b" top: "l2" loss_weight: 0.5 }
    layer { name: "sce" type: "SigmoidCrossEntropyLoss" bottom: "a" bottom: "t" top: "xent"
            loss_weight: 2 }
    layer { name: "sq" type: "Power" bottom: "b" top: "b2" power_param { power: 2 } loss_weight: 0.25 }
  )",
                                "<string>", &param)
                  .ok());
  LayerRegistry registry;
  RegisterComputeLayers(&registry);
  auto net = Net::Create(param, registry);
  ASSERT_TRUE(net.ok()) << net.status().message();
  SetBlobData((*net)->blob_by_name("a"), kLossScores);
  SetBlobData((*net)->blob_by_name("b"), {-1, 0, 4, 0.5f});
  SetBlobData((*net)->blob_by_name("t"), {0, 1, 1, 0});
  auto loss = (*net)->ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status().message();
  // Euclidean: (0 + 0 + 4 + 0) / 2 / 2 = 1; SCE as above; sum(b^2) = 17.25.
  const float sce = (kElementLoss[0] + kElementLoss[1] + kElementLoss[2] + kElementLoss[3]) / 2;
  EXPECT_NEAR(0.5f * 1.0f + 2.0f * sce + 0.25f * 17.25f, *loss, 1e-5f);
  // d/db: -0.5 * (a - b) / 2 from the Euclidean loss plus 0.25 * 2b.
  const std::vector<float> db = BlobDiff(*(*net)->blob_by_name("b"));
  const std::vector<float> expected_db = {-0.5f, 0.0f, 0.5f + 2.0f, 0.25f};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(expected_db[i], db[i], 1e-6f) << i;
}

}  // namespace
}  // namespace nereus

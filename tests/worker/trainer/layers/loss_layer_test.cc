// EuclideanLoss and SigmoidCrossEntropyLoss (exact values, gradients,
// normalization, ignore_label), and loss_weight on any loss or any layer in
// a Net (GoogLeNet's weighted auxiliary classifiers).
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
const std::vector<float> kScores = {-1.0f, 0.0f, 2.0f, 0.5f};
const float kElementLoss[] = {0.31326169f, 0.69314718f, 0.12692801f, 0.97407698f};
const float kSigmoid[] = {0.26894142f, 0.5f, 0.88079708f, 0.62245933f};

TEST(SigmoidCrossEntropyLossLayerTest, BatchSizeNormalizationByDefault) {
  Blob x(std::vector<int>{2, 2}), t(std::vector<int>{2, 2}), loss;
  SetBlobData(&x, kScores);
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
  SetBlobData(&x, kScores);
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
  SetBlobData((*net)->blob_by_name("a"), kScores);
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

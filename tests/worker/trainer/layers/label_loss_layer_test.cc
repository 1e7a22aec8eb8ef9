// HingeLoss, MultinomialLogisticLoss and InfogainLoss: values worked by hand
// from Caffe's definitions, numeric gradient checks of the scores, the
// element functions the GPU shares, labels out of range and configuration
// errors naming the layer.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/label_loss_layers.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace {

using test::BlobDiff;
using test::ParseLayerParameter;
using test::SetBlobData;

// Gradient checks of the scores only (bottom 0).
constexpr int kScoresBottom = 0;

// ---- The element functions ----

TEST(LabelLossFunctionsTest, HingeMarginsAndGradients) {
  EXPECT_EQ(1.5f, ops::HingeMargin(0.5f, false));
  EXPECT_EQ(0.5f, ops::HingeMargin(0.5f, true));
  EXPECT_EQ(0.0f, ops::HingeMargin(-1.5f, false));
  EXPECT_EQ(0.0f, ops::HingeMargin(2.0f, true));
  EXPECT_EQ(2.25f, ops::HingeLossTerm(1.5f, true));
  EXPECT_EQ(1.5f, ops::HingeLossTerm(1.5f, false));
  // L1: the sign of the margin, negated at the label; 0 where it is 0.
  EXPECT_EQ(0.25f, ops::HingeGradient(1.5f, false, false, 0.25f));
  EXPECT_EQ(-0.25f, ops::HingeGradient(1.5f, true, false, 0.25f));
  EXPECT_EQ(0.0f, ops::HingeGradient(0.0f, true, false, 0.25f));
  // L2: 2 m scale, negated at the label.
  EXPECT_EQ(0.75f, ops::HingeGradient(1.5f, false, true, 0.25f));
  EXPECT_EQ(-0.75f, ops::HingeGradient(1.5f, true, true, 0.25f));
  const float x[] = {0.5f, -0.2f, 1.5f};
  EXPECT_FLOAT_EQ(2.3f, ops::HingeExampleLoss(x, 3, 2, false));
  EXPECT_FLOAT_EQ(2.89f, ops::HingeExampleLoss(x, 3, 2, true));
}

TEST(LabelLossFunctionsTest, LogClampAndInfogainTerms) {
  EXPECT_FLOAT_EQ(-std::log(0.5f), ops::MultinomialLogisticLossAt(0.5f));
  EXPECT_FLOAT_EQ(-std::log(1e-20f), ops::MultinomialLogisticLossAt(0.0f));  // clamped
  EXPECT_FLOAT_EQ(-2.0f, ops::MultinomialLogisticGradAt(0.25f, -0.5f));
  EXPECT_FLOAT_EQ(-5e19f, ops::MultinomialLogisticGradAt(0.0f, -0.5f));
  EXPECT_TRUE(ops::LabelInRange(0, 3));
  EXPECT_TRUE(ops::LabelInRange(2, 3));
  EXPECT_FALSE(ops::LabelInRange(3, 3));
  EXPECT_FALSE(ops::LabelInRange(-1, 3));
  // Probabilities strided by 2 (inner 2): 0.5 and 0.25 at offsets 0 and 2.
  const float h_row[] = {2.0f, 1.0f};
  const float prob[] = {0.5f, 9.0f, 0.25f};
  EXPECT_FLOAT_EQ(-(2.0f * std::log(0.5f) + std::log(0.25f)), ops::InfogainPositionLoss(h_row, prob, 2, 2));
  EXPECT_EQ(3.0f, ops::InfogainRowSum(h_row, 2));
  EXPECT_FLOAT_EQ((0.5f * 3.0f - 2.0f) * 0.5f, ops::InfogainGradAt(0.5f, 3.0f, 2.0f, false, 0.5f));
  EXPECT_EQ(0.0f, ops::InfogainGradAt(0.5f, 3.0f, 2.0f, true, 0.5f));
}

// ---- HingeLoss ----

// Scores [[0.5, -0.2, 1.5], [-1, 0.3, 2]], labels [2, 0]: margins
// [1.5, 0.8, 0] and [2, 1.3, 3].
struct HingeResult {
  float loss;
  std::vector<float> diff;
};
HingeResult Hinge(const std::string& extra) {
  Blob x(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss;
  SetBlobData(&x, {0.5f, -0.2f, 1.5f, -1.0f, 0.3f, 2.0f});
  SetBlobData(&label, {2, 0});
  HingeLossLayer layer(ParseLayerParameter("name: 'h' type: 'HingeLoss' " + extra));
  const Status s = layer.SetUp({&x, &label}, {&loss});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(1.0f, layer.loss(0));
  const float weighted = layer.Forward({&x, &label}, {&loss});
  EXPECT_EQ(weighted, loss.cpu_data()[0]);
  layer.Backward({&loss}, {true, false}, {&x, &label});
  return {loss.cpu_data()[0], BlobDiff(x)};
}

TEST(HingeLossLayerTest, L1ByDefault) {
  const HingeResult r = Hinge("");
  EXPECT_FLOAT_EQ((2.3f + 6.3f) / 2, r.loss);
  // sign(margin) / N, negated at the label; the label's margin 0 gives 0.
  EXPECT_EQ((std::vector<float>{0.5f, 0.5f, 0.0f, -0.5f, 0.5f, 0.5f}), r.diff);
}

TEST(HingeLossLayerTest, L2) {
  const HingeResult r = Hinge("hinge_loss_param { norm: L2 }");
  EXPECT_FLOAT_EQ((2.89f + 14.69f) / 2, r.loss);
  // 2 m / N = m.
  const std::vector<float> expected = {1.5f, 0.8f, 0.0f, -2.0f, 1.3f, 3.0f};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(expected[i], r.diff[i]) << i;
}

void HingeGradient(const std::string& norm, uint32_t seed) {
  std::mt19937 rng(seed);
  Blob x(std::vector<int>{4, 5, 1, 1}), label(std::vector<int>{4}), loss;
  test::FillGaussian(&x, &rng, 2.0f);
  SetBlobData(&label, {0, 4, 2, 2});
  HingeLossLayer layer(ParseLayerParameter("name: 'h' type: 'HingeLoss' loss_weight: 2 " + norm));
  // The margins have kinks where |x| = 1.
  test::ExpectGradient(&layer, {&x, &label}, {&loss},
                       {test::GradientCheck::kExhaustive, 1e-3f, 1e-2f, 1.0f, 0.01f, kScoresBottom});
}

TEST(HingeLossLayerTest, GradientL1) { HingeGradient("", 11); }
TEST(HingeLossLayerTest, GradientL2) { HingeGradient("hinge_loss_param { norm: L2 }", 12); }

TEST(HingeLossLayerTest, LabelOutOfRangeIsAForwardErrorAndLabelsAreDeclared) {
  Blob x(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss;
  SetBlobData(&label, {1, 3});
  HingeLossLayer layer(ParseLayerParameter("name: 'h' type: 'HingeLoss'"));
  ASSERT_TRUE(layer.SetUp({&x, &label}, {&loss}).ok());
  EXPECT_EQ(3, layer.AcceptedLabels(1).num_classes);
  EXPECT_EQ(0, layer.AcceptedLabels(0).num_classes);
  EXPECT_FALSE(layer.AllowForceBackward(1));
  layer.Forward({&x, &label}, {&loss});
  EXPECT_EQ("layer h (HingeLoss): label 3 at position 1 is out of range [0, 3)", layer.forward_error().message());
}

TEST(HingeLossLayerTest, ConfigurationErrorsNameTheLayer) {
  HingeLossLayer per_pixel(ParseLayerParameter("name: 'h2' type: 'HingeLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&per_pixel, {{2, 3}, {2, 2}}), {"layer h2 (HingeLoss)", "one label"});
  HingeLossLayer batch(ParseLayerParameter("name: 'h3' type: 'HingeLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&batch, {{2, 3}, {3}}), {"layer h3 (HingeLoss)", "first dimension"});
}

TEST(HingeLossLayerDeathTest, LabelGradientIsFatal) {
  test::ExpectBackwardDies<HingeLossLayer>("name: 'h' type: 'HingeLoss'", {{2, 3}, {2}}, {true, true},
                                           "layer h \\(HingeLoss\\): cannot backpropagate");
}

// ---- MultinomialLogisticLoss ----

TEST(MultinomialLogisticLossLayerTest, ValueClampAndGradient) {
  Blob p(std::vector<int>{2, 3}), label(std::vector<int>{2, 1, 1, 1}), loss;
  SetBlobData(&p, {0.2f, 0.3f, 0.5f, 0.6f, 0.4f, 0.0f});
  SetBlobData(&label, {2, 2});
  MultinomialLogisticLossLayer layer(ParseLayerParameter("name: 'm' type: 'MultinomialLogisticLoss'"));
  ASSERT_TRUE(layer.SetUp({&p, &label}, {&loss}).ok());
  // -(log 0.5 + log 1e-20) / 2: a zero probability is clamped to 1e-20.
  EXPECT_NEAR((0.69314718f + 46.0517019f) / 2, layer.Forward({&p, &label}, {&loss}), 1e-4f);
  layer.Backward({&loss}, {true, false}, {&p, &label});
  // -1 / (N p) at the labels.
  EXPECT_EQ((std::vector<float>{0, 0, -1.0f, 0, 0, -5e19f}), BlobDiff(p));
}

TEST(MultinomialLogisticLossLayerTest, Gradient) {
  std::mt19937 rng(21);
  Blob p(std::vector<int>{5, 4}), label(std::vector<int>{5}), loss;
  std::uniform_real_distribution<float> unit(0.2f, 1.0f);
  for (int i = 0; i < p.count(); ++i) p.mutable_cpu_data()[i] = unit(rng);
  SetBlobData(&label, {3, 0, 1, 1, 2});
  MultinomialLogisticLossLayer layer(ParseLayerParameter("name: 'm' type: 'MultinomialLogisticLoss' loss_weight: 0.5"));
  test::ExpectGradient(&layer, {&p, &label}, {&loss},
                       {test::GradientCheck::kExhaustive, 1e-3f, 1e-2f, 0.0f, -1.0f, kScoresBottom});
}

TEST(MultinomialLogisticLossLayerTest, ErrorsNameTheLayer) {
  MultinomialLogisticLossLayer two_labels(ParseLayerParameter("name: 'm2' type: 'MultinomialLogisticLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&two_labels, {{2, 3}, {2, 2}}),
                            {"layer m2 (MultinomialLogisticLoss)", "one label per example"});
  Blob p(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss;
  SetBlobData(&label, {-1, 0});
  MultinomialLogisticLossLayer layer(ParseLayerParameter("name: 'm' type: 'MultinomialLogisticLoss'"));
  ASSERT_TRUE(layer.SetUp({&p, &label}, {&loss}).ok());
  layer.Forward({&p, &label}, {&loss});
  EXPECT_EQ("layer m (MultinomialLogisticLoss): label -1 at position 0 is out of range [0, 3)",
            layer.forward_error().message());
}

// ---- InfogainLoss ----

// softmax([1, 2, 3]) and softmax([1, 1, 1]).
const float kP1 = 0.09003057f, kP2 = 0.24472847f, kP3 = 0.66524096f, kThird = 1.0f / 3;
// H with rows [1, 0, 0], [0, 1, 0], [1, 0, 2] (row sums 1, 1, 3).
const std::vector<float> kH = {1, 0, 0, 0, 1, 0, 1, 0, 2};
// Scores [[1, 2, 3], [1, 1, 1]], labels [2, 0]: the positions' losses
// -(log p1 + 2 log p3) and -log(1/3).
const float kPos0 = -(std::log(kP1) + 2 * std::log(kP3)), kPos1 = std::log(3.0f);

struct InfogainRun {
  Status status;
  float loss = 0;
  std::vector<float> diff;
  std::vector<float> prob;
};

InfogainRun Infogain(const std::string& extra, std::vector<float> labels = {2, 0}) {
  Blob x(std::vector<int>{2, 3}), label(std::vector<int>{2}), h(std::vector<int>{1, 1, 3, 3}), loss, prob;
  SetBlobData(&x, {1, 2, 3, 1, 1, 1});
  SetBlobData(&label, labels);
  SetBlobData(&h, kH);
  InfogainLossLayer layer(ParseLayerParameter("name: 'i' type: 'InfogainLoss' top: 'loss' top: 'prob' " + extra));
  InfogainRun run;
  run.status = layer.SetUp({&x, &label, &h}, {&loss, &prob});
  if (!run.status.ok()) return run;
  EXPECT_EQ(1.0f, layer.loss(0));
  EXPECT_EQ(0.0f, layer.loss(1));
  run.loss = layer.Forward({&x, &label, &h}, {&loss, &prob});
  layer.Backward({&loss, &prob}, {true, false, false}, {&x, &label, &h});
  run.diff = BlobDiff(x);
  run.prob = test::BlobData(prob);
  return run;
}

TEST(InfogainLossLayerTest, ValueGradientAndProbabilities) {
  const InfogainRun r = Infogain("");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_NEAR((kPos0 + kPos1) / 2, r.loss, 1e-6f);  // VALID: 2 positions
  // (p * rowsum(H)(label) - H(label, l)) / 2.
  const std::vector<float> expected = {(3 * kP1 - 1) / 2, 3 * kP2 / 2, (3 * kP3 - 2) / 2,
                                       (kThird - 1) / 2,  kThird / 2,  kThird / 2};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(expected[i], r.diff[i], 1e-6f) << i;
  const std::vector<float> prob = {kP1, kP2, kP3, kThird, kThird, kThird};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(prob[i], r.prob[i], 1e-6f) << i;
}

TEST(InfogainLossLayerTest, IgnoreLabelAndNormalization) {
  EXPECT_NEAR(kPos0, Infogain("loss_param { ignore_label: 0 }").loss, 1e-6f);
  EXPECT_NEAR(kPos0 / 2, Infogain("loss_param { ignore_label: 0 normalization: FULL }").loss, 1e-6f);
  EXPECT_NEAR(kPos0 / 2, Infogain("loss_param { ignore_label: 0 normalization: BATCH_SIZE }").loss, 1e-6f);
  EXPECT_NEAR(kPos0 + kPos1, Infogain("loss_param { normalization: NONE }").loss, 1e-5f);
  const InfogainRun ignored = Infogain("loss_param { ignore_label: 0 }");
  EXPECT_EQ(0.0f, ignored.diff[3]);
  EXPECT_EQ(0.0f, ignored.diff[5]);
  EXPECT_NEAR((3 * kP1 - 1), ignored.diff[0], 1e-6f);
  // All ignored: the normalizer is clamped to 1.
  EXPECT_EQ(0.0f, Infogain("loss_param { ignore_label: 0 }", {0, 0}).loss);
}

TEST(InfogainLossLayerTest, MatrixFromSourceFile) {
  const std::string path = ::testing::TempDir() + "/label_loss_layer_test_infogain.binaryproto";
  Blob h(std::vector<int>{1, 1, 3, 3});
  SetBlobData(&h, kH);
  caffe::BlobProto proto;
  h.ToProto(&proto);
  ASSERT_TRUE(WriteProtoToBinaryFile(proto, path).ok());
  Blob x(std::vector<int>{2, 3}), label(std::vector<int>{2}), loss;
  SetBlobData(&x, {1, 2, 3, 1, 1, 1});
  SetBlobData(&label, {2, 0});
  InfogainLossLayer layer(
      ParseLayerParameter("name: 'i' type: 'InfogainLoss' infogain_loss_param { source: '" + path + "' }"));
  ASSERT_TRUE(layer.SetUp({&x, &label}, {&loss}).ok());
  EXPECT_NEAR((kPos0 + kPos1) / 2, layer.Forward({&x, &label}, {&loss}), 1e-6f);
  layer.Backward({&loss}, {true, false}, {&x, &label});
  EXPECT_NEAR((3 * kP3 - 2) / 2, x.cpu_diff()[2], 1e-6f);
  EXPECT_TRUE(layer.blobs().empty());  // H is no learned parameter.
}

TEST(InfogainLossLayerTest, GradientAlongAnAxisWithAMatrixBottom) {
  std::mt19937 rng(31);
  Blob x(std::vector<int>{2, 4, 2, 3}), label(std::vector<int>{2, 1, 2, 3}), h(std::vector<int>{4, 4}), loss;
  test::FillGaussian(&x, &rng);
  for (int i = 0; i < label.count(); ++i) label.mutable_cpu_data()[i] = static_cast<float>(rng() % 4);
  std::uniform_real_distribution<float> unit(0.0f, 2.0f);
  for (int i = 0; i < h.count(); ++i) h.mutable_cpu_data()[i] = unit(rng);
  InfogainLossLayer layer(ParseLayerParameter("name: 'i' type: 'InfogainLoss' loss_weight: 3"));
  test::ExpectGradient(&layer, {&x, &label, &h}, {&loss},
                       {test::GradientCheck::kExhaustive, 1e-2f, 1e-2f, 0.0f, -1.0f, kScoresBottom});
}

TEST(InfogainLossLayerTest, GradientLastAxisIgnoreLabel) {
  std::mt19937 rng(32);
  Blob x(std::vector<int>{3, 2, 5}), label(std::vector<int>{3, 2}), h(std::vector<int>{5, 5}), loss;
  test::FillGaussian(&x, &rng);
  SetBlobData(&label, {0, 4, 1, 1, 3, 2});
  std::uniform_real_distribution<float> unit(0.0f, 2.0f);
  for (int i = 0; i < h.count(); ++i) h.mutable_cpu_data()[i] = unit(rng);
  InfogainLossLayer layer(ParseLayerParameter(
      "name: 'i' type: 'InfogainLoss' infogain_loss_param { axis: -1 } loss_param { ignore_label: 1 }"));
  test::ExpectGradient(&layer, {&x, &label, &h}, {&loss},
                       {test::GradientCheck::kExhaustive, 1e-2f, 1e-2f, 0.0f, -1.0f, kScoresBottom});
}

TEST(InfogainLossLayerTest, ErrorsNameTheLayer) {
  InfogainLossLayer no_matrix(ParseLayerParameter("name: 'i1' type: 'InfogainLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&no_matrix, {{2, 3}, {2}}),
                            {"layer i1 (InfogainLoss)", "infogain_loss_param.source or a third bottom"});
  InfogainLossLayer missing(
      ParseLayerParameter("name: 'i2' type: 'InfogainLoss' infogain_loss_param { source: '/nonexistent/h.bp' }"));
  test::ExpectErrorContains(test::SetUpOn(&missing, {{2, 3}, {2}}), {"layer i2 (InfogainLoss)", "/nonexistent/h.bp"});
  InfogainLossLayer wrong_size(ParseLayerParameter("name: 'i3' type: 'InfogainLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&wrong_size, {{2, 3}, {2}, {2, 2}}),
                            {"layer i3 (InfogainLoss)", "expected 3 x 3"});
  InfogainLossLayer labels(ParseLayerParameter("name: 'i4' type: 'InfogainLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&labels, {{2, 3, 2}, {2}, {3, 3}}),
                            {"layer i4 (InfogainLoss)", "number of labels must match"});
  InfogainLossLayer normalize(ParseLayerParameter("name: 'i5' type: 'InfogainLoss' loss_param { normalize: true }"));
  test::ExpectErrorContains(test::SetUpOn(&normalize, {{2, 3}, {2}, {3, 3}}),
                            {"layer i5 (InfogainLoss)", "normalize is deprecated"});
  InfogainLossLayer axis(ParseLayerParameter("name: 'i6' type: 'InfogainLoss' infogain_loss_param { axis: 2 }"));
  test::ExpectErrorContains(test::SetUpOn(&axis, {{2, 3}, {2}, {3, 3}}), {"layer i6 (InfogainLoss)", "axis 2"});
}

TEST(InfogainLossLayerTest, LabelOutOfRangeIsAForwardError) {
  Blob x(std::vector<int>{2, 3}), label(std::vector<int>{2}), h(std::vector<int>{3, 3}), loss;
  SetBlobData(&label, {2, 5});
  InfogainLossLayer layer(ParseLayerParameter("name: 'i' type: 'InfogainLoss' loss_param { ignore_label: 7 }"));
  ASSERT_TRUE(layer.SetUp({&x, &label, &h}, {&loss}).ok());
  const Layer::LabelRange range = layer.AcceptedLabels(1);
  EXPECT_EQ(3, range.num_classes);
  EXPECT_TRUE(range.Accepts(7));
  EXPECT_FALSE(layer.AllowForceBackward(2));
  layer.Forward({&x, &label, &h}, {&loss});
  EXPECT_EQ("layer i (InfogainLoss): label 5 at position 1 is out of range [0, 3)", layer.forward_error().message());
}

}  // namespace
}  // namespace nereus

// ContrastiveLoss: values worked by hand from Caffe's definition (both
// versions), numeric gradient checks of both features, the element functions
// the GPU shares, and shape errors naming the layer.
#include "worker/trainer/layers/contrastive_loss_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/net_test_util.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace {

using test::BlobDiff;
using test::ParseLayerParameter;
using test::SetBlobData;

TEST(ContrastiveLossFunctionsTest, PairTermsAndFactors) {
  const float diff[] = {-0.3f, -0.4f};
  EXPECT_FLOAT_EQ(0.25f, ops::ContrastiveDistSq(diff, 2));
  EXPECT_EQ(4.0f, ops::ContrastivePairLoss(4.0f, true, 1.0f, false));
  EXPECT_EQ(0.25f, ops::ContrastivePairLoss(0.25f, false, 1.0f, false));  // (1 - 0.5)^2
  EXPECT_EQ(0.75f, ops::ContrastivePairLoss(0.25f, false, 1.0f, true));   // 1 - 0.25
  EXPECT_EQ(0.0f, ops::ContrastivePairLoss(0.25f, false, 0.4f, false));   // beyond the margin
  EXPECT_EQ(0.0f, ops::ContrastivePairLoss(0.25f, false, 0.2f, true));
  EXPECT_EQ(0.5f, ops::ContrastiveGradFactor(4.0f, true, 1.0f, false, 0.5f));
  EXPECT_EQ(-0.5f, ops::ContrastiveGradFactor(0.25f, false, 1.0f, true, 0.5f));
  EXPECT_FLOAT_EQ(-0.5f * 0.5f / 0.5001f, ops::ContrastiveGradFactor(0.25f, false, 1.0f, false, 0.5f));
  EXPECT_EQ(0.0f, ops::ContrastiveGradFactor(0.25f, false, 0.4f, false, 0.5f));
  EXPECT_EQ(0.0f, ops::ContrastiveGradFactor(0.25f, false, 0.2f, true, 0.5f));
}

// a = [[1, 2], [0, 0]], b = [[1, 0], [0.3, 0.4]]: a - b = [[0, 2],
// [-0.3, -0.4]], squared distances 4 and 0.25; the first pair similar.
struct PairRun {
  float loss;
  std::vector<float> da, db;
};
PairRun Contrastive(const std::string& param, std::vector<float> y = {1, 0}) {
  Blob a(std::vector<int>{2, 2, 1, 1}), b(std::vector<int>{2, 2}), sim(std::vector<int>{2}), loss;
  SetBlobData(&a, {1, 2, 0, 0});
  SetBlobData(&b, {1, 0, 0.3f, 0.4f});
  SetBlobData(&sim, y);
  ContrastiveLossLayer layer(ParseLayerParameter("name: 'c' type: 'ContrastiveLoss' " + param));
  const Status s = layer.SetUp({&a, &b, &sim}, {&loss});
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(1.0f, layer.loss(0));
  PairRun run;
  run.loss = layer.Forward({&a, &b, &sim}, {&loss});
  layer.Backward({&loss}, {true, true, false}, {&a, &b, &sim});
  run.da = BlobDiff(a);
  run.db = BlobDiff(b);
  return run;
}

TEST(ContrastiveLossLayerTest, HadsellVersionByDefault) {
  const PairRun r = Contrastive("");
  EXPECT_FLOAT_EQ((4.0f + 0.25f) / 2 / 2, r.loss);
  // Similar: (a - b) / N; dissimilar: -(1/N) (m - d) / (d + 1e-4) (a - b).
  const float k = -0.5f * 0.5f / 0.5001f;
  const std::vector<float> da = {0, 1, k * -0.3f, k * -0.4f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(da[i], r.da[i]) << i;
    EXPECT_FLOAT_EQ(-da[i], r.db[i]) << i;
  }
  // A similarity is read as an int, as Caffe does: 0.7 is dissimilar.
  EXPECT_FLOAT_EQ(r.loss, Contrastive("", {1, 0.7f}).loss);
}

TEST(ContrastiveLossLayerTest, LegacyVersion) {
  const PairRun r = Contrastive("contrastive_loss_param { legacy_version: true }");
  EXPECT_FLOAT_EQ((4.0f + 0.75f) / 2 / 2, r.loss);
  EXPECT_EQ((std::vector<float>{0, 1, 0.15f, 0.2f}), r.da);
  EXPECT_EQ((std::vector<float>{0, -1, -0.15f, -0.2f}), r.db);
}

TEST(ContrastiveLossLayerTest, BeyondTheMarginNoLossNoGradient) {
  const PairRun r = Contrastive("contrastive_loss_param { margin: 0.4 }");
  EXPECT_FLOAT_EQ(4.0f / 2 / 2, r.loss);
  EXPECT_EQ((std::vector<float>{0, 1, 0, 0}), r.da);
  const PairRun legacy = Contrastive("contrastive_loss_param { margin: 0.2 legacy_version: true }");
  EXPECT_FLOAT_EQ(4.0f / 2 / 2, legacy.loss);
  EXPECT_EQ((std::vector<float>{0, -1, 0, 0}), legacy.db);
  // Both pairs similar: the squared distances only.
  EXPECT_FLOAT_EQ((4.0f + 0.25f) / 2 / 2, Contrastive("", {1, 1}).loss);
}

void ContrastiveGradient(const std::string& param, int check_bottom) {
  std::mt19937 rng(41);
  Blob a(std::vector<int>{6, 3, 1, 1}), b(std::vector<int>{6, 3, 1, 1}), sim(std::vector<int>{6, 1, 1, 1}), loss;
  test::FillGaussian(&a, &rng, 0.5f);
  test::FillGaussian(&b, &rng, 0.5f);
  SetBlobData(&sim, {1, 0, 0, 1, 0, 0});
  ContrastiveLossLayer layer(ParseLayerParameter("name: 'c' type: 'ContrastiveLoss' loss_weight: 1.5 " + param));
  test::ExpectGradient(&layer, {&a, &b, &sim}, {&loss},
                       {test::GradientCheck::kExhaustive, 1e-3f, 1e-2f, 0.0f, -1.0f, check_bottom});
}

TEST(ContrastiveLossLayerTest, GradientOfBothFeatures) {
  for (int bottom : {0, 1}) {
    ContrastiveGradient("contrastive_loss_param { margin: 2 }", bottom);
    ContrastiveGradient("contrastive_loss_param { margin: 2 legacy_version: true }", bottom);
  }
}

TEST(ContrastiveLossLayerTest, ShapeErrorsNameTheLayer) {
  ContrastiveLossLayer spatial(ParseLayerParameter("name: 'c1' type: 'ContrastiveLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&spatial, {{2, 3, 2}, {2, 3, 2}, {2}}),
                            {"layer c1 (ContrastiveLoss)", "N x C"});
  ContrastiveLossLayer channels(ParseLayerParameter("name: 'c2' type: 'ContrastiveLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&channels, {{2, 3}, {2, 4}, {2}}), {"layer c2 (ContrastiveLoss)", "same C"});
  ContrastiveLossLayer similarity(ParseLayerParameter("name: 'c3' type: 'ContrastiveLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&similarity, {{2, 3}, {2, 3}, {2, 2}}),
                            {"layer c3 (ContrastiveLoss)", "one value per pair"});
  ContrastiveLossLayer batch(ParseLayerParameter("name: 'c4' type: 'ContrastiveLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&batch, {{2, 3}, {2, 3}, {3}}), {"layer c4 (ContrastiveLoss)"});
  ContrastiveLossLayer two(ParseLayerParameter("name: 'c5' type: 'ContrastiveLoss'"));
  test::ExpectErrorContains(test::SetUpOn(&two, {{2, 3}, {2, 3}}), {"layer c5 (ContrastiveLoss)", "3 bottom"});
  EXPECT_FALSE(two.AllowForceBackward(2));
  EXPECT_TRUE(two.AllowForceBackward(1));
}

TEST(ContrastiveLossLayerDeathTest, SimilarityGradientIsFatal) {
  test::ExpectBackwardDies<ContrastiveLossLayer>(
      "name: 'c' type: 'ContrastiveLoss'", {{2, 3}, {2, 3}, {2}}, {true, false, true},
      "layer c \\(ContrastiveLoss\\): cannot backpropagate to the similarity");
}

// A siamese net: two InnerProduct branches sharing their weight and bias
// (param { name: }) feed ContrastiveLoss. The shared blobs are learnable
// once, and their gradient is the loss's derivative through both branches
// (checked by central differences of the net's loss).
TEST(ContrastiveLossLayerTest, SiameseNetSharesOneGradientForBothBranches) {
  auto created = test::TrainNetFromText(R"(
    name: "siamese"
    input: "a" input_shape { dim: 3 dim: 4 }
    input: "b" input_shape { dim: 3 dim: 4 }
    input: "sim" input_shape { dim: 3 }
    layer {
      name: "fa" type: "InnerProduct" bottom: "a" top: "fa" param { name: "w" } param { name: "bias" }
      inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 }
                            bias_filler { type: "gaussian" std: 0.5 } }
    }
    layer {
      name: "fb" type: "InnerProduct" bottom: "b" top: "fb" param { name: "w" } param { name: "bias" }
      inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 }
                            bias_filler { type: "gaussian" std: 0.5 } }
    }
    layer {
      name: "loss" type: "ContrastiveLoss" bottom: "fa" bottom: "fb" bottom: "sim" top: "loss"
      contrastive_loss_param { margin: 3 }
    }
  )",
                                        "siamese.prototxt");
  ASSERT_TRUE(created.ok()) << created.status();
  Net& net = **created;
  ASSERT_EQ(2u, net.learnable_params().size());  // w and bias, once each
  std::mt19937 rng(81);
  test::FillGaussian(net.blob_by_name("a"), &rng);
  test::FillGaussian(net.blob_by_name("b"), &rng);
  SetBlobData(net.blob_by_name("sim"), {1, 0, 0});
  auto loss = net.ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_GT(*loss, 0.0f);
  for (Blob* p : net.learnable_params()) {
    const std::vector<float> analytic = BlobDiff(*p);
    for (int k = 0; k < p->count(); ++k) {
      const float original = p->cpu_data()[k];
      const float h = 1e-2f;
      p->mutable_cpu_data()[k] = original + h;
      const float plus = *net.Forward();
      p->mutable_cpu_data()[k] = original - h;
      const float minus = *net.Forward();
      p->mutable_cpu_data()[k] = original;
      const float numeric = (plus - minus) / (2 * h);
      EXPECT_NEAR(numeric, analytic[k], 1e-2f * std::max(1.0f, std::fabs(numeric))) << p->shape_string() << " " << k;
    }
  }
}

}  // namespace
}  // namespace nereus

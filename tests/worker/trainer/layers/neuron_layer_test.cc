// ReLU (incl. leaky), Sigmoid, TanH and Dropout: exact values, in-place use,
// numeric gradients; plus a check that the gradient checker itself fails on
// a wrong gradient.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/layers/neuron_layers.h"

namespace nereus {
namespace {

using test::BlobData;
using test::BlobDiff;
using test::ExpectBlobNear;
using test::GradientChecker;
using test::ParseLayerParameter;
using test::SetBlobData;

const std::vector<float> kInput = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};

Blob* MakeInput(Blob* blob) {
  blob->Reshape(std::vector<int>{1, 5});
  SetBlobData(blob, kInput);
  return blob;
}

TEST(ReLULayerTest, Forward) {
  Blob bottom, top;
  ReLULayer layer(ParseLayerParameter("name: 'relu' type: 'ReLU'"));
  ASSERT_TRUE(layer.SetUp({MakeInput(&bottom)}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({0, 0, 0, 1, 3}, top);
}

TEST(ReLULayerTest, LeakyForwardBackward) {
  Blob bottom, top;
  ReLULayer layer(ParseLayerParameter("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }"));
  ASSERT_TRUE(layer.SetUp({MakeInput(&bottom)}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({-0.2f, -0.05f, 0, 1, 3}, top);
  SetBlobData(&top, {0, 0, 0, 0, 0});
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 5, 2.0f);
  layer.Backward({&top}, {true}, {&bottom});
  // Slope 1 for x > 0, negative_slope for x <= 0 (Caffe's convention at 0).
  EXPECT_EQ((std::vector<float>{0.2f, 0.2f, 0.2f, 2, 2}), BlobDiff(bottom));
}

TEST(ReLULayerTest, InPlace) {
  Blob blob;
  ReLULayer layer(ParseLayerParameter("name: 'relu' type: 'ReLU'"));
  ASSERT_TRUE(layer.SetUp({MakeInput(&blob)}, {&blob}).ok());
  layer.Forward({&blob}, {&blob});
  ExpectBlobNear({0, 0, 0, 1, 3}, blob);
  std::fill(blob.mutable_cpu_diff(), blob.mutable_cpu_diff() + 5, 1.0f);
  layer.Backward({&blob}, {true}, {&blob});
  EXPECT_EQ((std::vector<float>{0, 0, 0, 1, 1}), BlobDiff(blob));
}

// Element-wise checks on N(0, 1) inputs of [2, 3, 2, 2].
const std::vector<int> kGradientShape = {2, 3, 2, 2};
const test::CheckerSettings kEltwise = {test::GradientCheck::kEltwise};
// The kink at 0: inputs within 0.01 of it are not compared (Caffe's test).
const test::CheckerSettings kEltwiseKinkAtZero = {test::GradientCheck::kEltwise, 1e-2f, 1e-3f, 0.0f, 0.01f};

TEST(ReLULayerTest, Gradient) {
  test::ExpectLayerGradient<ReLULayer>("name: 'relu' type: 'ReLU'", kGradientShape, 1701, test::BottomFill::kGaussian,
                                       kEltwiseKinkAtZero);
}

TEST(ReLULayerTest, GradientLeaky) {
  test::ExpectLayerGradient<ReLULayer>("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.01 }", kGradientShape,
                                       1702, test::BottomFill::kGaussian, kEltwiseKinkAtZero);
}

TEST(SigmoidLayerTest, ForwardValues) {
  Blob bottom, top;
  SigmoidLayer layer(ParseLayerParameter("name: 's' type: 'Sigmoid'"));
  ASSERT_TRUE(layer.SetUp({MakeInput(&bottom)}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({0.11920292f, 0.37754067f, 0.5f, 0.73105858f, 0.95257413f}, top, 1e-6f);
  // Saturates without overflow.
  SetBlobData(&bottom, {-100, -50, 0, 50, 100});
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({0, 0, 0.5f, 1, 1}, top, 1e-6f);
}

TEST(SigmoidLayerTest, GradientAndInPlace) {
  std::mt19937 rng(1703);
  Blob bottom(kGradientShape), top;
  test::FillGaussian(&bottom, &rng);
  SigmoidLayer layer(ParseLayerParameter("name: 's' type: 'Sigmoid'"));
  test::ExpectGradient(&layer, {&bottom}, {&top}, kEltwise);
  // In place gives the same values and gradient as out of place.
  Blob separate_top;
  ASSERT_TRUE(layer.SetUp({&bottom}, {&separate_top}).ok());
  layer.Forward({&bottom}, {&separate_top});
  std::fill(separate_top.mutable_cpu_diff(), separate_top.mutable_cpu_diff() + 24, 1.0f);
  layer.Backward({&separate_top}, {true}, {&bottom});
  const std::vector<float> expected_top = BlobData(separate_top);
  const std::vector<float> expected_diff = BlobDiff(bottom);
  layer.Forward({&bottom}, {&bottom});
  std::fill(bottom.mutable_cpu_diff(), bottom.mutable_cpu_diff() + 24, 1.0f);
  layer.Backward({&bottom}, {true}, {&bottom});
  EXPECT_EQ(expected_top, BlobData(bottom));
  EXPECT_EQ(expected_diff, BlobDiff(bottom));
}

TEST(TanHLayerTest, ForwardValues) {
  Blob bottom, top;
  TanHLayer layer(ParseLayerParameter("name: 't' type: 'TanH'"));
  ASSERT_TRUE(layer.SetUp({MakeInput(&bottom)}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({-0.96402758f, -0.46211716f, 0.0f, 0.76159416f, 0.99505475f}, top, 1e-6f);
}

TEST(TanHLayerTest, Gradient) {
  test::ExpectLayerGradient<TanHLayer>("name: 't' type: 'TanH'", kGradientShape, 1704, test::BottomFill::kGaussian,
                                       kEltwise);
}

// ---- Dropout ----

caffe::LayerParameter DropoutParam(const std::string& phase, const std::string& extra = "") {
  return ParseLayerParameter("name: 'drop' type: 'Dropout' phase: " + phase + " dropout_param { dropout_ratio: 0.25 " +
                             extra + " }");
}

TEST(DropoutLayerTest, TestPhaseIsIdentity) {
  std::mt19937 rng(1);
  Blob bottom(2, 3, 4, 5), top;
  test::FillGaussian(&bottom, &rng);
  DropoutLayer layer(DropoutParam("TEST"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ(BlobData(bottom), BlobData(top));
  std::copy(bottom.cpu_data(), bottom.cpu_data() + bottom.count(), top.mutable_cpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ(BlobData(bottom), BlobDiff(bottom));
}

TEST(DropoutLayerTest, ScaleTrainFalseScalesAtTestTime) {
  std::mt19937 rng(1);
  Blob bottom, top;
  DropoutLayer layer(DropoutParam("TEST", "scale_train: false"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({MakeInput(&bottom)}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({-1.5f, -0.375f, 0, 0.75f, 2.25f}, top);
}

TEST(DropoutLayerTest, TrainPhaseDropsAndScales) {
  std::mt19937 rng(1);
  Blob bottom(std::vector<int>{4000}), top;
  SetBlobData(&bottom, std::vector<float>(4000, 3.0f));
  DropoutLayer layer(DropoutParam("TRAIN"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  int kept = 0;
  for (int i = 0; i < top.count(); ++i) {
    const float y = top.cpu_data()[i];
    ASSERT_TRUE(y == 0.0f || y == 4.0f) << "y[" << i << "] = " << y;  // 3 / (1 - 0.25)
    EXPECT_EQ(y != 0.0f, layer.mask()[i] == 1u);
    kept += y != 0.0f;
  }
  // 3000 expected; the binomial std is ~27.
  EXPECT_NEAR(3000, kept, 150);
  // scale_train: false keeps the survivors unscaled.
  DropoutLayer unscaled(DropoutParam("TRAIN", "scale_train: false"));
  unscaled.set_rng(&rng);
  ASSERT_TRUE(unscaled.SetUp({&bottom}, {&top}).ok());
  unscaled.Forward({&bottom}, {&top});
  for (int i = 0; i < top.count(); ++i) {
    ASSERT_TRUE(top.cpu_data()[i] == 0.0f || top.cpu_data()[i] == 3.0f);
  }
}

TEST(DropoutLayerTest, MasksAreReproducibleFromTheNetSeed) {
  Blob bottom(std::vector<int>{64}), top_a, top_b;
  SetBlobData(&bottom, std::vector<float>(64, 1.0f));
  std::mt19937 rng_a(42), rng_b(42);
  DropoutLayer a(DropoutParam("TRAIN")), b(DropoutParam("TRAIN"));
  a.set_rng(&rng_a);
  b.set_rng(&rng_b);
  ASSERT_TRUE(a.SetUp({&bottom}, {&top_a}).ok());
  ASSERT_TRUE(b.SetUp({&bottom}, {&top_b}).ok());
  a.Forward({&bottom}, {&top_a});
  b.Forward({&bottom}, {&top_b});
  EXPECT_EQ(BlobData(top_a), BlobData(top_b));
  // Successive forwards draw fresh masks.
  const std::vector<float> first = BlobData(top_a);
  a.Forward({&bottom}, {&top_a});
  EXPECT_NE(first, BlobData(top_a));
}

TEST(DropoutLayerTest, InPlaceBackwardUsesTheMask) {
  std::mt19937 rng(3);
  Blob blob(std::vector<int>{32});
  SetBlobData(&blob, std::vector<float>(32, 1.0f));
  DropoutLayer layer(DropoutParam("TRAIN"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&blob}, {&blob}).ok());
  layer.Forward({&blob}, {&blob});
  std::fill(blob.mutable_cpu_diff(), blob.mutable_cpu_diff() + 32, 1.0f);
  layer.Backward({&blob}, {true}, {&blob});
  for (int i = 0; i < 32; ++i) {
    EXPECT_FLOAT_EQ(layer.mask()[i] ? 4.0f / 3.0f : 0.0f, blob.cpu_diff()[i]);
    EXPECT_FLOAT_EQ(blob.cpu_data()[i], blob.cpu_diff()[i]);
  }
}

TEST(DropoutLayerTest, GradientTrain) {
  std::mt19937 rng(1705);
  Blob bottom(kGradientShape), top;
  test::FillGaussian(&bottom, &rng);
  DropoutLayer layer(DropoutParam("TRAIN"));
  layer.set_rng(&rng);
  GradientChecker checker(1e-2f, 1e-3f);
  // Every forward of the check must draw the same mask.
  checker.set_before_forward([&layer] { layer.set_seed(1234); });
  checker.CheckGradientEltwise(&layer, {&bottom}, {&top});
  EXPECT_GT(checker.comparisons(), 0);
  int dropped = 0;
  for (unsigned int m : layer.mask()) dropped += m == 0u;
  EXPECT_GT(dropped, 0) << "the check should cover dropped units too";
}

TEST(DropoutLayerConfigTest, RatioOutOfRange) {
  std::mt19937 rng(1);
  Blob bottom(std::vector<int>{4}), top;
  DropoutLayer layer(ParseLayerParameter("name: 'drop7' type: 'Dropout' dropout_param { dropout_ratio: 1.0 }"));
  layer.set_rng(&rng);
  const Status s = layer.SetUp({&bottom}, {&top});
  test::ExpectErrorContains(s, {"drop7", "dropout_ratio"});
}

// ---- The checker catches wrong gradients ----

// TanH whose backward is off by 10%.
class WrongGradientTanH : public TanHLayer {
 public:
  using TanHLayer::TanHLayer;

 protected:
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {
    TanHLayer::Backward_cpu(top, propagate_down, bottom);
    for (int i = 0; i < bottom[0]->count(); ++i) bottom[0]->mutable_cpu_diff()[i] *= 1.1f;
  }
};

TEST(GradientCheckerTest, FailsOnAWrongGradient) {
  std::mt19937 rng(1706);
  Blob bottom(std::vector<int>{6}), top;
  SetBlobData(&bottom, {0.1f, 0.5f, -0.7f, 1.2f, -1.5f, 0.3f});
  WrongGradientTanH layer(ParseLayerParameter("name: 't' type: 'TanH'"));
  GradientChecker checker(1e-2f, 1e-3f);
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    checker.CheckGradientEltwise(&layer, {&bottom}, {&top});
  }
  // Every element's derivative is 10% off, far above the 1e-3 threshold.
  ASSERT_EQ(6, failures.size());
  EXPECT_NE(std::string::npos, std::string(failures.GetTestPartResult(0).message()).find("feat_id"));
}

// ---- Registration ----

TEST(RegisterComputeLayersTest, EveryTypeIsRegisteredUnderItsCaffeName) {
  LayerRegistry registry;
  RegisterComputeLayers(&registry);
  const std::vector<std::string> types = {"AbsVal",       "Accuracy",
                                          "ArgMax",       "BNLL",
                                          "BatchNorm",    "Concat",
                                          "Convolution",  "Deconvolution",
                                          "Dropout",      "ELU",
                                          "Eltwise",      "EuclideanLoss",
                                          "Exp",          "Flatten",
                                          "InnerProduct", "Input",
                                          "LRN",          "Log",
                                          "PReLU",        "Pooling",
                                          "Power",        "ReLU",
                                          "Reshape",      "Scale",
                                          "Sigmoid",      "SigmoidCrossEntropyLoss",
                                          "Silence",      "Slice",
                                          "Softmax",      "SoftmaxWithLoss",
                                          "Split",        "TanH",
                                          "Threshold"};
  EXPECT_EQ(types, registry.Types());
  for (const std::string& type : types) {
    caffe::LayerParameter param;
    param.set_name("l");
    param.set_type(type);
    StatusOr<std::unique_ptr<Layer>> layer = registry.Create(param);
    ASSERT_TRUE(layer.ok()) << type;
    EXPECT_EQ(type, layer.value()->type());
  }
}

}  // namespace
}  // namespace nereus

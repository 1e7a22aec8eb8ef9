// The neuron layers (neuron_layers.h): ReLU (incl. leaky), Sigmoid, TanH and
// Dropout (exact values, in-place use, numeric gradients), and AbsVal, BNLL,
// ELU, Exp, Log, Power, Threshold and PReLU (exact values from Caffe's
// formulas, numeric gradients, in-place use and bad parameters), Clip and
// Swish (the same); plus a check that the gradient checker itself fails on a
// wrong gradient, and that every layer type is registered under its Caffe
// name.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/layers/neuron_layers.h"

namespace nereus {
namespace test {
namespace {

const std::vector<float> kNeuronInput = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};

Blob* MakeInput(Blob* blob) {
  blob->Reshape(std::vector<int>{1, 5});
  SetBlobData(blob, kNeuronInput);
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

// ---- AbsVal, BNLL, ELU, Exp, Log, Power, Threshold, PReLU ----

// Forward of `layer` on kNeuronInput ([1, 5]); returns the top.
std::vector<float> ForwardOnInput(Layer* layer) {
  std::mt19937 rng(1);
  layer->set_rng(&rng);
  Blob bottom(std::vector<int>{1, 5}), top;
  SetBlobData(&bottom, kNeuronInput);
  const Status st = layer->SetUp({&bottom}, {&top});
  EXPECT_TRUE(st.ok()) << st.message();
  layer->Forward({&bottom}, {&top});
  return BlobData(top);
}

void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual, float tolerance = 1e-5f) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(expected[i], actual[i], tolerance) << "at index " << i;
  }
}

// Gaussian input [2, 3, 2, 2] (shifted by `shift`), element-wise gradient check.
void CheckEltwise(Layer* layer, uint32_t seed, float shift = 0.0f, float kink_range = -1.0f) {
  std::mt19937 rng(seed);
  Blob bottom(2, 3, 2, 2), top;
  test::FillGaussian(&bottom, &rng);
  for (int i = 0; i < bottom.count(); ++i) bottom.mutable_cpu_data()[i] += shift;
  test::ExpectGradient(layer, {&bottom}, {&top}, {test::GradientCheck::kEltwise, 1e-2f, 1e-3f, 0.0f, kink_range});
}

// Running `make()` in place gives the values and gradients of running it out
// of place.
void ExpectInPlaceMatches(const std::function<std::unique_ptr<Layer>()>& make, float shift) {
  std::mt19937 rng(99);
  Blob input(2, 3, 2, 2);
  test::FillGaussian(&input, &rng);
  for (int i = 0; i < input.count(); ++i) input.mutable_cpu_data()[i] += shift;
  auto apart = make();
  Blob bottom(input.shape()), top;
  bottom.CopyFrom(input);
  ASSERT_TRUE(apart->SetUp({&bottom}, {&top}).ok());
  apart->Forward({&bottom}, {&top});
  for (int i = 0; i < top.count(); ++i) top.mutable_cpu_diff()[i] = 0.1f * i - 1.0f;
  apart->Backward({&top}, {true}, {&bottom});

  auto in_place = make();
  Blob blob(input.shape());
  blob.CopyFrom(input);
  ASSERT_TRUE(in_place->SetUp({&blob}, {&blob}).ok());
  in_place->Forward({&blob}, {&blob});
  EXPECT_EQ(BlobData(top), BlobData(blob));
  for (int i = 0; i < blob.count(); ++i) blob.mutable_cpu_diff()[i] = 0.1f * i - 1.0f;
  in_place->Backward({&blob}, {true}, {&blob});
  EXPECT_EQ(BlobDiff(bottom), BlobDiff(blob));
  for (size_t p = 0; p < apart->blobs().size(); ++p) {
    EXPECT_EQ(BlobDiff(*apart->blobs()[p]), BlobDiff(*in_place->blobs()[p])) << "param " << p;
  }
}

template <typename L>
std::function<std::unique_ptr<Layer>()> Maker(const std::string& text) {
  return [text] { return std::make_unique<L>(ParseLayerParameter(text)); };
}

TEST(AbsValLayerTest, ForwardBackwardAndGradient) {
  AbsValLayer layer(ParseLayerParameter("name: 'a' type: 'AbsVal'"));
  Blob bottom(std::vector<int>{1, 5}), top;
  SetBlobData(&bottom, kNeuronInput);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ((std::vector<float>{2, 0.5f, 0, 1, 3}), BlobData(top));
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 5, 3.0f);
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{-3, -3, 0, 3, 3}), BlobDiff(bottom));
  AbsValLayer fresh(ParseLayerParameter("name: 'a' type: 'AbsVal'"));
  CheckEltwise(&fresh, 11, 0.0f, 0.01f);
}

TEST(AbsValLayerTest, InPlaceIsRefused) {
  AbsValLayer layer(ParseLayerParameter("name: 'a' type: 'AbsVal'"));
  Blob blob(std::vector<int>{1, 5});
  const Status st = layer.SetUp({&blob}, {&blob});
  EXPECT_EQ("layer a (AbsVal): AbsVal does not allow in-place computation", st.message());
}

TEST(BNLLLayerTest, ForwardGradientInPlace) {
  BNLLLayer layer(ParseLayerParameter("name: 'b' type: 'BNLL'"));
  ExpectNear({0.12692801f, 0.47407698f, 0.69314718f, 1.31326169f, 3.04858735f}, ForwardOnInput(&layer));
  // No overflow far out.
  Blob bottom(std::vector<int>{1, 2}), top;
  SetBlobData(&bottom, {-100.0f, 100.0f});
  BNLLLayer far(ParseLayerParameter("name: 'b' type: 'BNLL'"));
  ASSERT_TRUE(far.SetUp({&bottom}, {&top}).ok());
  far.Forward({&bottom}, {&top});
  ExpectBlobNear({0.0f, 100.0f}, top);
  BNLLLayer g(ParseLayerParameter("name: 'b' type: 'BNLL'"));
  CheckEltwise(&g, 12);
  ExpectInPlaceMatches(Maker<BNLLLayer>("name: 'b' type: 'BNLL'"), 0.0f);
}

TEST(ELULayerTest, ForwardGradientInPlace) {
  ELULayer layer(ParseLayerParameter("name: 'e' type: 'ELU'"));
  ExpectNear({-0.86466472f, -0.39346934f, 0, 1, 3}, ForwardOnInput(&layer));
  ELULayer half(ParseLayerParameter("name: 'e' type: 'ELU' elu_param { alpha: 0.5 }"));
  ExpectNear({-0.43233236f, -0.19673467f, 0, 1, 3}, ForwardOnInput(&half));
  ELULayer g(ParseLayerParameter("name: 'e' type: 'ELU' elu_param { alpha: 0.5 }"));
  CheckEltwise(&g, 13, 0.0f, 0.01f);
  ExpectInPlaceMatches(Maker<ELULayer>("name: 'e' type: 'ELU'"), 0.0f);
}

TEST(ExpLayerTest, ForwardAndGradient) {
  const std::string text = "name: 'x' type: 'Exp' exp_param { base: 2 scale: 1 shift: 1 }";
  ExpLayer layer(ParseLayerParameter(text));
  ExpectNear({0.5f, 1.41421356f, 2, 4, 16}, ForwardOnInput(&layer));
  ExpLayer natural(ParseLayerParameter("name: 'x' type: 'Exp'"));
  ExpectNear({0.13533528f, 0.60653066f, 1, 2.71828183f, 20.08553692f}, ForwardOnInput(&natural), 2e-5f);
  ExpLayer g(ParseLayerParameter("name: 'x' type: 'Exp' exp_param { base: 2 scale: 0.5 shift: 1 }"));
  CheckEltwise(&g, 14);
  ExpectInPlaceMatches(Maker<ExpLayer>(text), 0.0f);
}

TEST(ExpLayerTest, BadBaseIsAnError) {
  ExpLayer layer(ParseLayerParameter("name: 'x' type: 'Exp' exp_param { base: -2 }"));
  Blob bottom(std::vector<int>{1, 5}), top;
  EXPECT_EQ("layer x (Exp): exp_param.base must be strictly positive (or -1 for e), got -2.000000",
            layer.SetUp({&bottom}, {&top}).message());
}

TEST(LogLayerTest, ForwardGradientInPlace) {
  const std::string text = "name: 'l' type: 'Log' log_param { base: 2 shift: 3 }";
  LogLayer layer(ParseLayerParameter(text));
  ExpectNear({0, 1.32192809f, 1.5849625f, 2, 2.5849625f}, ForwardOnInput(&layer));
  LogLayer g(ParseLayerParameter("name: 'l' type: 'Log' log_param { scale: 0.5 shift: 5 }"));
  CheckEltwise(&g, 15);
  ExpectInPlaceMatches(Maker<LogLayer>(text), 5.0f);
}

TEST(PowerLayerTest, ForwardGradientInPlace) {
  const std::string text = "name: 'p' type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }";
  PowerLayer layer(ParseLayerParameter(text));
  ExpectNear({0, 0.5625f, 1, 2.25f, 6.25f}, ForwardOnInput(&layer));
  for (const char* param :
       {"power: 2 scale: 0.5 shift: 1", "power: 0.37 scale: 0.83 shift: 5", "power: 1 scale: 0.83 shift: -2.4",
        "power: 0 scale: 2 shift: 1", "power: 3 scale: 0 shift: 2"}) {
    SCOPED_TRACE(param);
    PowerLayer g(ParseLayerParameter(std::string("name: 'p' type: 'Power' power_param { ") + param + " }"));
    CheckEltwise(&g, 16);
  }
  // A constant output: (0 * x + 2) ^ 3.
  PowerLayer constant(ParseLayerParameter("name: 'p' type: 'Power' power_param { power: 3 scale: 0 shift: 2 }"));
  ExpectNear({8, 8, 8, 8, 8}, ForwardOnInput(&constant));
  ExpectInPlaceMatches(Maker<PowerLayer>("name: 'p' type: 'Power' power_param { power: 0.37 "
                                         "scale: 0.83 shift: 5 }"),
                       0.0f);
}

TEST(ThresholdLayerTest, StrictlyAboveIsOne) {
  ThresholdLayer layer(ParseLayerParameter("name: 't' type: 'Threshold' threshold_param { threshold: -0.5 }"));
  EXPECT_EQ((std::vector<float>{0, 0, 1, 1, 1}), ForwardOnInput(&layer));
  ThresholdLayer zero(ParseLayerParameter("name: 't' type: 'Threshold'"));
  EXPECT_EQ((std::vector<float>{0, 0, 0, 1, 1}), ForwardOnInput(&zero));
}

TEST(ThresholdLayerDeathTest, AskingForAGradientNamesTheLayer) {
  ThresholdLayer layer(ParseLayerParameter("name: 'thr' type: 'Threshold'"));
  Blob bottom(std::vector<int>{1, 5}), top;
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  layer.Backward({&top}, {false}, {&bottom});  // fine: no gradient asked for
  EXPECT_DEATH(layer.Backward({&top}, {true}, {&bottom}), "layer thr \\(Threshold\\): Threshold has no gradient");
}

TEST(PReLULayerTest, DefaultSlopeIsAQuarterPerChannel) {
  PReLULayer layer(ParseLayerParameter("name: 'pr' type: 'PReLU'"));
  ExpectNear({-0.5f, -0.125f, 0, 1, 3}, ForwardOnInput(&layer));
  ASSERT_EQ(1u, layer.blobs().size());
  EXPECT_EQ((std::vector<int>{5}), layer.blobs()[0]->shape());
  PReLULayer shared(ParseLayerParameter("name: 'pr' type: 'PReLU' prelu_param { channel_shared: true }"));
  ExpectNear({-0.5f, -0.125f, 0, 1, 3}, ForwardOnInput(&shared));
  EXPECT_EQ(std::vector<int>{}, shared.blobs()[0]->shape());
}

TEST(PReLULayerTest, PerChannelSlopesAndTheirGradient) {
  // [1, 2, 2]: channel 0 slope 0.1, channel 1 slope 0.5.
  PReLULayer layer(ParseLayerParameter("name: 'pr' type: 'PReLU'"));
  std::mt19937 rng(1);
  layer.set_rng(&rng);
  Blob bottom(std::vector<int>{1, 2, 2}), top;
  SetBlobData(&bottom, {-1, 2, -4, 8});
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  SetBlobData(layer.blobs()[0].get(), {0.1f, 0.5f});
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({-0.1f, 2, -2, 8}, top);
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 4, 1.0f);
  caffe_set(2, 0.0f, layer.blobs()[0]->mutable_cpu_diff());
  layer.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{0.1f, 1, 0.5f, 1}), BlobDiff(bottom));
  // d/da_c = sum of dy * x over the negative x of channel c.
  EXPECT_EQ((std::vector<float>{-1, -4}), BlobDiff(*layer.blobs()[0]));
}

TEST(PReLULayerTest, GradientAndInPlace) {
  for (const char* text : {"name: 'pr' type: 'PReLU' prelu_param { filler { type: 'gaussian' } }",
                           "name: 'pr' type: 'PReLU' prelu_param { channel_shared: true }"}) {
    SCOPED_TRACE(text);
    std::mt19937 rng(17);
    std::mt19937 filler_rng(5);
    Blob bottom(2, 3, 2, 2), top;
    test::FillGaussian(&bottom, &rng);
    PReLULayer layer(ParseLayerParameter(text));
    layer.set_rng(&filler_rng);
    test::ExpectGradient(&layer, {&bottom}, {&top}, {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, 0.01f});
    std::mt19937 make_rng;
    ExpectInPlaceMatches(
        [text, &make_rng] {
          make_rng.seed(5);  // both layers start from the same slopes
          auto l = std::make_unique<PReLULayer>(ParseLayerParameter(text));
          l->set_rng(&make_rng);
          return l;
        },
        0.0f);
  }
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

// ---- Clip, Swish ----

TEST(ClipLayerTest, ForwardAndBackwardIncludeBothEnds) {
  ClipLayer layer(ParseLayerParameter("name: 'c' type: 'Clip' clip_param { min: -1 max: 1 }"));
  EXPECT_EQ((std::vector<float>{-1, -0.5f, 0, 1, 1}), ForwardOnInput(&layer));
  // The gradient passes for min <= x <= max (Caffe's), and not beyond.
  Blob bottom(std::vector<int>{1, 6}), top;
  SetBlobData(&bottom, {-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 1.5f});
  ClipLayer ends(ParseLayerParameter("name: 'c' type: 'Clip' clip_param { min: -1 max: 1 }"));
  ASSERT_TRUE(ends.SetUp({&bottom}, {&top}).ok());
  ends.Forward({&bottom}, {&top});
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 6, 2.0f);
  ends.Backward({&top}, {true}, {&bottom});
  EXPECT_EQ((std::vector<float>{0, 2, 2, 2, 2, 0}), BlobDiff(bottom));
}

TEST(ClipLayerTest, GradientAndInPlace) {
  // The kinks at -1 and 1: inputs within 0.02 of them are not compared.
  ClipLayer g(ParseLayerParameter("name: 'c' type: 'Clip' clip_param { min: -1 max: 1 }"));
  std::mt19937 rng(18);
  Blob bottom(2, 3, 2, 2), top;
  test::FillGaussian(&bottom, &rng);
  test::ExpectGradient(&g, {&bottom}, {&top}, {test::GradientCheck::kEltwise, 1e-2f, 1e-3f, 1.0f, 0.02f});
  // In place keeps the input: clipped elements get no gradient there either
  // (Caffe's in-place Clip would read its output and pass them).
  ExpectInPlaceMatches(Maker<ClipLayer>("name: 'c' type: 'Clip' clip_param { min: -0.5 max: 0.8 }"), 0.0f);
}

TEST(ClipLayerTest, BadParametersAreErrors) {
  Blob bottom(std::vector<int>{1, 5}), top;
  ClipLayer inverted(ParseLayerParameter("name: 'c' type: 'Clip' clip_param { min: 2 max: 1 }"));
  test::ExpectErrorContains(inverted.SetUp({&bottom}, {&top}), {"layer c (Clip)", "min (2.0", "must not exceed max"});
  ClipLayer missing(ParseLayerParameter("name: 'c' type: 'Clip'"));
  test::ExpectErrorContains(missing.SetUp({&bottom}, {&top}), {"layer c (Clip)", "clip_param with min and max"});
  // Caffe's clip_param requires both fields: a prototxt without one does not parse.
  caffe::LayerParameter partial;
  EXPECT_FALSE(google::protobuf::TextFormat::ParseFromString("clip_param { min: 1 }", &partial));
}

TEST(SwishLayerTest, ForwardValues) {
  SwishLayer layer(ParseLayerParameter("name: 's' type: 'Swish'"));
  ExpectNear({-0.23840584f, -0.18877033f, 0, 0.73105858f, 2.85772238f}, ForwardOnInput(&layer));
  SwishLayer beta(ParseLayerParameter("name: 's' type: 'Swish' swish_param { beta: 1.5 }"));
  ExpectNear({-0.09485175f, -0.16041065f, 0, 0.81757448f, 2.96703917f}, ForwardOnInput(&beta));
}

TEST(SwishLayerTest, GradientAndInPlace) {
  for (const char* text : {"name: 's' type: 'Swish'", "name: 's' type: 'Swish' swish_param { beta: 1.5 }",
                           "name: 's' type: 'Swish' swish_param { beta: -0.5 }"}) {
    SCOPED_TRACE(text);
    SwishLayer g(ParseLayerParameter(text));
    CheckEltwise(&g, 19);
    ExpectInPlaceMatches(Maker<SwishLayer>(text), 0.0f);
  }
}

// ---- Registration ----

TEST(RegisterComputeLayersTest, EveryTypeIsRegisteredUnderItsCaffeName) {
  LayerRegistry registry;
  RegisterComputeLayers(&registry);
  const std::vector<std::string> types = {"AbsVal",      "Accuracy", "ArgMax",        "BNLL",
                                          "BatchNorm",   "Bias",     "Clip",          "Concat",
                                          "Convolution", "Crop",     "Deconvolution", "Dropout",
                                          "ELU",         "Eltwise",  "EuclideanLoss", "Exp",
                                          "Flatten",     "Im2col",   "InnerProduct",  "Input",
                                          "LRN",         "LSTM",     "LSTMUnit",      "Log",
                                          "MVN",         "PReLU",    "Pooling",       "Power",
                                          "RNN",         "ReLU",     "Reduction",     "Reshape",
                                          "SPP",         "Scale",    "Sigmoid",       "SigmoidCrossEntropyLoss",
                                          "Silence",     "Slice",    "Softmax",       "SoftmaxWithLoss",
                                          "Split",       "Swish",    "TanH",          "Threshold",
                                          "Tile"};
  std::vector<std::string> expected = types;
  // Issue 31's, part B.
  for (const char* t : {"BatchReindex", "ContrastiveLoss", "Embed", "Filter", "HingeLoss", "InfogainLoss",
                        "MultinomialLogisticLoss", "Parameter", "Python"}) {
    expected.push_back(t);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(expected, registry.Types());
  for (const std::string& type : expected) {
    caffe::LayerParameter param;
    param.set_name("l");
    param.set_type(type);
    StatusOr<std::unique_ptr<Layer>> layer = registry.Create(param);
    ASSERT_TRUE(layer.ok()) << type;
    EXPECT_EQ(type, layer.value()->type());
  }
}

}  // namespace
}  // namespace test
}  // namespace nereus

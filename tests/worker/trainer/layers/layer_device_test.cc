// The layers with GPU code, typed over the device they run on (Caffe's
// device-typed tests): forward values worked by hand and numeric gradient
// checks, the same on the CPU (/Cpu, ctest layer_device_test) and on the GPU
// (/Gpu, ctest layer_device_test_gpu, label gpu: skipped without a GPU, a
// failure under NEREUS_REQUIRE_GPU=1). The GPU's forward values are checked
// to 1e-5 relative (GEMMs of a few terms in another order; CUDA's expf within
// 2 ulp), the gradients by the checker's own threshold, as on the CPU.
// layer_gpu_test compares the two devices directly on larger blobs.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/support/layer_test.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/split_layer.h"

namespace nereus {
namespace {

using test::ExpectBlobNear;
using test::FillDistinct;
using test::FillGaussian;
using test::SetBlobData;

template <typename TypeParam>
class LayerDeviceTest : public test::LayerTest<TypeParam> {
 protected:
  // Sets the layer up on `bottom` -> `top` (fails the test on an error).
  void SetUpLayer(Layer* layer, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    const Status s = layer->SetUp(bottom, top);
    ASSERT_TRUE(s.ok()) << s;
  }
  void ExpectNear(const std::vector<float>& expected, const Blob& actual) {
    ASSERT_EQ(static_cast<int>(expected.size()), actual.count());
    for (int i = 0; i < actual.count(); ++i) {
      EXPECT_NEAR(expected[i], actual.cpu_data()[i], 1e-5f * std::max(1.0f, std::fabs(expected[i]))) << i;
    }
  }
  // A gradient check (threshold 1e-3, kinks at 0 skipped) of each layer of
  // `texts` on N(0, 1) bottoms of `shape`; `eltwise`: each top element
  // against its own bottom element only (layers without parameters).
  void CheckGradients(const std::vector<const char*>& texts, const std::vector<int>& shape, bool eltwise) {
    for (const char* text : texts) {
      SCOPED_TRACE(text);
      this->ExpectLayerGradient(
          text, shape,
          {eltwise ? test::GradientCheck::kEltwise : test::GradientCheck::kSumOfSquares, 1e-2f, 1e-3f, 0.0f, 0.01f});
    }
  }
  // A recurrent layer (`name_and_type`: LSTM, RNN) of one unit whose blobs
  // hold `weights`, on x = (0.5, -1.5) over two steps (cont 0, 1): its
  // outputs are `expected`. Then the gradient of x of one with 3 units on a
  // random sequence of 3 steps of 2 streams.
  void ExpectRecurrentValuesAndGradient(const std::string& name_and_type,
                                        const std::vector<std::vector<float>>& weights,
                                        const std::vector<float>& expected) {
    Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), out;
    SetBlobData(&x, {0.5f, -1.5f});
    SetBlobData(&cont, {0, 1});
    auto layer = this->MakeLayer(name_and_type + " recurrent_param { num_output: 1 }");
    ASSERT_NO_FATAL_FAILURE(SetUpLayer(layer.get(), {&x, &cont}, {&out}));
    ASSERT_EQ(weights.size(), layer->blobs().size());
    for (size_t i = 0; i < weights.size(); ++i) SetBlobData(layer->blobs()[i].get(), weights[i]);
    layer->Forward({&x, &cont}, {&out});
    ExpectNear(expected, out);
    Blob xs(std::vector<int>{3, 2, 4}), flags(std::vector<int>{3, 2}), top;
    FillGaussian(&xs, &this->rng_);
    SetBlobData(&flags, {0, 0, 1, 0, 1, 1});
    auto three =
        this->MakeLayer(name_and_type +
                        " recurrent_param { num_output: 3 weight_filler { type: 'uniform' min: -0.5 max: 0.5 } "
                        "bias_filler { type: 'uniform' min: -0.5 max: 0.5 } }");
    test::ExpectGradient(three.get(), {&xs, &flags}, {&top},
                         {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, 0});
    ExpectDeviceOk();
  }
  // The layer of `text` on bottom_ (reshaped to `shape`, holding `values`)
  // gives `expected` in top_.
  void ExpectForward(const std::string& text, const std::vector<int>& shape, const std::vector<float>& values,
                     const std::vector<float>& expected) {
    bottom_.Reshape(shape);
    SetBlobData(&bottom_, values);
    auto layer = this->MakeLayer(text);
    ASSERT_NO_FATAL_FAILURE(SetUpLayer(layer.get(), {&bottom_}, {&top_}));
    layer->Forward({&bottom_}, {&top_});
    ExpectNear(expected, top_);
  }
  // bottom_ and bottom2_ reshaped to `shape` and `shape2`, holding `values`
  // and `values2`.
  void FillBottoms(const std::vector<int>& shape, const std::vector<float>& values, const std::vector<int>& shape2,
                   const std::vector<float>& values2) {
    bottom_.Reshape(shape);
    SetBlobData(&bottom_, values);
    bottom2_.Reshape(shape2);
    SetBlobData(&bottom2_, values2);
  }
  // Fails the test if the device recorded an error.
  void ExpectDeviceOk() {
    if (this->device() != nullptr) {
      const Status s = this->device()->TakeError();
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  Blob bottom_, bottom2_, top_, top2_;
};

TYPED_TEST_SUITE(LayerDeviceTest, test::TestDevices, test::DeviceNames);

std::vector<float> OneToN(int n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

TYPED_TEST(LayerDeviceTest, ConvolutionForwardDiagonalKernelWithBias) {
  this->bottom_.Reshape({1, 1, 3, 3});
  SetBlobData(&this->bottom_, OneToN(9));
  auto layer = this->MakeLayer("name: 'conv' type: 'Convolution' convolution_param { num_output: 1 kernel_size: 2 }");
  this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
  SetBlobData(layer->blobs()[0].get(), {1, 0, 0, 1});
  SetBlobData(layer->blobs()[1].get(), {0.5f});
  layer->Forward({&this->bottom_}, {&this->top_});
  this->ExpectNear({6.5f, 8.5f, 12.5f, 14.5f}, this->top_);  // x(i,j) + x(i+1,j+1) + 0.5
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ConvolutionGradientGroupsPadStride) {
  this->ExpectLayerGradient(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 group: 2 "
      "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }",
      {2, 4, 6, 5}, {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, Convolution1x1Gradient) {
  // The GPU multiplies the images themselves (no im2col) for 1x1, stride 1.
  this->ExpectLayerGradient(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 3 kernel_size: 1 "
      "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'constant' value: 0.1 } }",
      {3, 5, 3, 4}, {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, DeconvolutionGradient) {
  this->ExpectLayerGradient(
      "name: 'deconv' type: 'Deconvolution' convolution_param { num_output: 2 kernel_size: 3 stride: 2 pad: 1 "
      "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }",
      {2, 3, 3, 4}, {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, InnerProductForwardAndGradient) {
  this->bottom_.Reshape({2, 3});
  SetBlobData(&this->bottom_, {1, 2, 3, -1, 0, 2});
  auto layer = this->MakeLayer(
      "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 2 "
      "weight_filler { type: 'constant' value: 0 } }");
  this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
  SetBlobData(layer->blobs()[0].get(), {1, 0, 1, 0.5f, 0.5f, 0});
  SetBlobData(layer->blobs()[1].get(), {0.25f, -1});
  layer->Forward({&this->bottom_}, {&this->top_});
  this->ExpectNear({4.25f, 0.5f, 1.25f, -1.5f}, this->top_);
  for (const char* transpose : {"false", "true"}) {
    this->ExpectLayerGradient(
        std::string("name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 3 transpose: ") + transpose +
            " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 } }",
        {3, 2, 2}, {test::GradientCheck::kSumOfSquares});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, PoolingForwardMaxAndAve) {
  this->bottom_.Reshape({1, 1, 6, 6});
  std::vector<float> iota(36);
  std::iota(iota.begin(), iota.end(), 0.0f);  // x(h, w) = 6h + w
  SetBlobData(&this->bottom_, iota);
  auto max = this->MakeLayer("name: 'p' type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 }");
  this->SetUpLayer(max.get(), {&this->bottom_}, {&this->top_, &this->top2_});
  max->Forward({&this->bottom_}, {&this->top_, &this->top2_});
  this->ExpectNear({14, 16, 17, 26, 28, 29, 32, 34, 35}, this->top_);
  this->ExpectNear({14, 16, 17, 26, 28, 29, 32, 34, 35}, this->top2_);  // The argmax is the value here.
  Blob ave_top;
  auto ave = this->MakeLayer("name: 'p' type: 'Pooling' pooling_param { pool: AVE kernel_size: 2 stride: 2 }");
  this->SetUpLayer(ave.get(), {&this->bottom_}, {&ave_top});
  ave->Forward({&this->bottom_}, {&ave_top});
  this->ExpectNear({3.5f, 5.5f, 7.5f, 15.5f, 17.5f, 19.5f, 27.5f, 29.5f, 31.5f}, ave_top);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, PoolingGradient) {
  for (const char* config : {"pool: MAX kernel_size: 3 stride: 2 pad: 1", "pool: AVE kernel_size: 3 stride: 2 pad: 1",
                             "pool: MAX kernel_h: 2 kernel_w: 3 stride: 1"}) {
    SCOPED_TRACE(config);
    this->ExpectLayerGradient(std::string("name: 'p' type: 'Pooling' pooling_param { ") + config + " }", {2, 2, 5, 6},
                              {test::GradientCheck::kSumOfSquares, 1e-3f, 1e-2f}, test::BottomFill::kDistinct);
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, NeuronGradients) {
  this->CheckGradients({"name: 'r' type: 'ReLU'", "name: 'r' type: 'ReLU' relu_param { negative_slope: 0.1 }",
                        "name: 's' type: 'Sigmoid'", "name: 't' type: 'TanH'"},
                       {2, 3, 4}, /*eltwise=*/true);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, DropoutAppliesItsMaskScaled) {
  this->bottom_.Reshape({4, 250});
  FillGaussian(&this->bottom_, &this->rng_);
  auto layer = this->MakeLayer("name: 'd' type: 'Dropout' phase: TRAIN dropout_param { dropout_ratio: 0.25 }");
  this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
  layer->Forward({&this->bottom_}, {&this->top_});
  const std::vector<unsigned int> mask = static_cast<DropoutLayer*>(layer.get())->mask();
  ASSERT_EQ(1000u, mask.size());
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(mask[i] == 0u || mask[i] == 1u);
    kept += mask[i];
    // Exact: x * 1 * (1 / 0.75) or x * 0 * ..., one function on both devices.
    EXPECT_EQ(ops::DropoutApply(this->bottom_.cpu_data()[i], mask[i], 1.0f / 0.75f), this->top_.cpu_data()[i]);
  }
  EXPECT_NEAR(750, kept, 60);  // Binomial(1000, 0.75): standard deviation 13.7.
  for (int i = 0; i < 1000; ++i) this->top_.mutable_cpu_diff()[i] = 1.0f;
  layer->Backward({&this->top_}, {true}, {&this->bottom_});
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(mask[i] * (1.0f / 0.75f), this->bottom_.cpu_diff()[i]);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, LrnGradientBothRegions) {
  for (const char* region : {"ACROSS_CHANNELS", "WITHIN_CHANNEL"}) {
    SCOPED_TRACE(region);
    this->ExpectLayerGradient(
        std::string("name: 'n' type: 'LRN' lrn_param { local_size: 3 alpha: 1 beta: 0.75 norm_region: ") + region +
            " }",
        {2, 5, 3, 4}, {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-2f});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, BatchNormNormalizesAndKeepsItsStatistics) {
  this->bottom_.Reshape({4, 3, 2, 5});
  FillGaussian(&this->bottom_, &this->rng_, 3.0f);
  auto layer = this->MakeLayer("name: 'bn' type: 'BatchNorm' phase: TRAIN batch_norm_param { eps: 0 }");
  this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
  layer->Forward({&this->bottom_}, {&this->top_});
  for (int c = 0; c < 3; ++c) {
    double sum = 0, sum_sq = 0;
    for (int n = 0; n < 4; ++n) {
      for (int s = 0; s < 10; ++s) {
        const float y = this->top_.cpu_data()[(n * 3 + c) * 10 + s];
        sum += y;
        sum_sq += y * y;
      }
    }
    EXPECT_NEAR(0.0, sum / 40, 1e-5) << c;
    EXPECT_NEAR(1.0, sum_sq / 40, 1e-4) << c;
  }
  EXPECT_EQ(1.0f, layer->blobs()[2]->cpu_data()[0]);  // 0 * 0.999 + 1
  this->ExpectLayerGradient("name: 'bn' type: 'BatchNorm' phase: TRAIN", {3, 2, 2, 2},
                            {test::GradientCheck::kSumOfSquares, 1e-2f, 2e-3f});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ScaleGradientLearnedAndFromABottom) {
  this->ExpectLayerGradient(
      "name: 's' type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' } }",
      {2, 3, 4}, {test::GradientCheck::kSumOfSquares});
  this->ExpectLayerGradient("name: 's' type: 'Scale' scale_param { axis: 1 }", {{2, 3, 4}, {3}},
                            {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, BiasValuesAndGradients) {
  this->FillBottoms({1, 3, 2}, {1, 2, 3, 4, 5, 6}, {3}, {10, 20, 30});
  auto layer = this->MakeLayer("name: 'b' type: 'Bias'");
  this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  layer->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  this->ExpectNear({11, 12, 23, 24, 35, 36}, this->top_);
  this->ExpectLayerGradient("name: 'b' type: 'Bias' bias_param { filler { type: 'gaussian' } }", {2, 3, 4},
                            {test::GradientCheck::kSumOfSquares});
  this->ExpectLayerGradient("name: 'b' type: 'Bias' bias_param { num_axes: 0 filler { type: 'gaussian' } }", {2, 3, 4},
                            {test::GradientCheck::kSumOfSquares});
  this->ExpectLayerGradient("name: 'b' type: 'Bias' bias_param { axis: 0 }", {{2, 3, 4}, {2, 3}},
                            {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, EltwiseGradientEveryOperation) {
  for (const char* op : {"operation: SUM coeff: 1 coeff: -0.5 coeff: 2", "operation: PROD", "operation: MAX"}) {
    Blob a(std::vector<int>{2, 3, 2}), b(std::vector<int>{2, 3, 2}), c(std::vector<int>{2, 3, 2}), top;
    FillDistinct(&a, &this->rng_);
    FillDistinct(&b, &this->rng_, 0.07f);
    FillDistinct(&c, &this->rng_, 0.11f);
    auto layer = this->MakeLayer(std::string("name: 'e' type: 'Eltwise' eltwise_param { ") + op + " }");
    SCOPED_TRACE(op);
    test::ExpectGradient(layer.get(), {&a, &b, &c}, {&top}, {test::GradientCheck::kSumOfSquares, 1e-3f, 1e-2f});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, SoftmaxSumsToOneAndGradient) {
  this->bottom_.Reshape({2, 5, 3});
  FillGaussian(&this->bottom_, &this->rng_);
  auto layer = this->MakeLayer("name: 's' type: 'Softmax'");
  this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
  layer->Forward({&this->bottom_}, {&this->top_});
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 3; ++j) {
      float sum = 0;
      for (int c = 0; c < 5; ++c) sum += this->top_.cpu_data()[(n * 5 + c) * 3 + j];
      EXPECT_NEAR(1.0f, sum, 1e-6f);
    }
  }
  this->ExpectLayerGradient("name: 's' type: 'Softmax'", {2, 4, 3}, {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, SoftmaxWithLossValueAndGradient) {
  this->FillBottoms({2, 3}, {0, 0, 0, 1, 2, 3}, {2}, {1, 2});
  auto layer = this->MakeLayer("name: 'l' type: 'SoftmaxWithLoss'");
  this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  layer->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  // (-log(1/3) - log(e^3 / (e + e^2 + e^3))) / 2
  const double expected = (std::log(3.0) - (3.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)))) / 2;
  EXPECT_NEAR(expected, this->top_.cpu_data()[0], 1e-6);
  for (const char* extra : {"", "loss_param { ignore_label: 0 normalization: FULL }"}) {
    Blob scores(std::vector<int>{3, 4, 2}), labels(std::vector<int>{3, 1, 2}), loss;
    FillGaussian(&scores, &this->rng_);
    SetBlobData(&labels, {0, 1, 2, 3, 0, 2});
    auto l = this->MakeLayer(std::string("name: 'l' type: 'SoftmaxWithLoss' ") + extra);
    test::ExpectGradient(l.get(), {&scores, &labels}, {&loss},
                         {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-2f, 0.0f, -1.0f, 0});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, AccuracyTopKAndPerClass) {
  this->FillBottoms({4, 3},
                    {0.1f, 0.7f, 0.2f,  // class 1 first, 2 second
                     0.5f, 0.3f, 0.2f,  //
                     0.2f, 0.2f, 0.6f,  //
                     0.3f, 0.3f, 0.4f},
                    {4}, {1, 1, 2, 0});
  auto top1 = this->MakeLayer("name: 'a' type: 'Accuracy'");
  this->SetUpLayer(top1.get(), {&this->bottom_, &this->bottom2_}, {&this->top_, &this->top2_});
  top1->Forward({&this->bottom_, &this->bottom2_}, {&this->top_, &this->top2_});
  EXPECT_EQ(0.5f, this->top_.cpu_data()[0]);  // rows 0 and 2
  this->ExpectNear({0.0f, 0.5f, 1.0f}, this->top2_);
  Blob top;
  auto top2 = this->MakeLayer("name: 'a' type: 'Accuracy' accuracy_param { top_k: 2 }");
  this->SetUpLayer(top2.get(), {&this->bottom_, &this->bottom2_}, {&top});
  top2->Forward({&this->bottom_, &this->bottom2_}, {&top});
  EXPECT_EQ(0.75f, top.cpu_data()[0]);  // row 3's label 0 ties class 1: counted against it
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, SplitSharesForwardAndSumsBackward) {
  this->bottom_.Reshape({2, 3});
  SetBlobData(&this->bottom_, OneToN(6));
  SplitLayer layer(test::ParseLayerParameter("name: 's' type: 'Split'"));
  layer.set_device(this->device());
  Blob a, b, c;
  this->SetUpLayer(&layer, {&this->bottom_}, {&a, &b, &c});
  layer.Forward({&this->bottom_}, {&a, &b, &c});
  EXPECT_EQ(this->bottom_.data(), b.data());
  SetBlobData(&a, OneToN(6));  // Shared: writes the bottom too.
  for (int i = 0; i < 6; ++i) {
    a.mutable_cpu_diff()[i] = 1.0f;
    b.mutable_cpu_diff()[i] = 0.5f * i;
    c.mutable_cpu_diff()[i] = -2.0f;
  }
  layer.Backward({&a, &b, &c}, {true}, {&this->bottom_});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(1.0f + 0.5f * i - 2.0f, this->bottom_.cpu_diff()[i]);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ElementwiseNeuronForwardValues) {
  this->bottom_.Reshape({1, 4});  // 4 channels for PReLU
  const std::vector<float> x = {-2.0f, -0.5f, 0.0f, 1.5f};
  SetBlobData(&this->bottom_, x);
  auto expect = [&](const std::string& text, auto f) {
    Blob top;
    auto layer = this->MakeLayer(text);
    this->SetUpLayer(layer.get(), {&this->bottom_}, {&top});
    layer->Forward({&this->bottom_}, {&top});
    std::vector<float> expected;
    for (float v : x) expected.push_back(static_cast<float>(f(static_cast<double>(v))));
    SCOPED_TRACE(text);
    this->ExpectNear(expected, top);
  };
  expect("name: 'a' type: 'AbsVal'", [](double v) { return std::fabs(v); });
  expect("name: 'b' type: 'BNLL'", [](double v) { return std::log1p(std::exp(v)); });
  expect("name: 'e' type: 'ELU'", [](double v) { return v > 0 ? v : std::expm1(v); });
  expect("name: 'x' type: 'Exp' exp_param { base: 2 }", [](double v) { return std::exp2(v); });
  expect("name: 'l' type: 'Log' log_param { shift: 3 }", [](double v) { return std::log(v + 3); });
  expect("name: 'p' type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }",
         [](double v) { return (0.5 * v + 1) * (0.5 * v + 1); });
  expect("name: 't' type: 'Threshold'", [](double v) { return v > 0 ? 1.0 : 0.0; });
  expect("name: 'r' type: 'PReLU'", [](double v) { return v > 0 ? v : 0.25 * v; });
  expect("name: 'c' type: 'Clip' clip_param { min: -1 max: 1 }",
         [](double v) { return std::max(-1.0, std::min(v, 1.0)); });
  expect("name: 's' type: 'Swish' swish_param { beta: 1.5 }", [](double v) { return v / (1.0 + std::exp(-1.5 * v)); });
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ElementwiseNeuronGradients) {
  this->CheckGradients(
      {"name: 'a' type: 'AbsVal'", "name: 'b' type: 'BNLL'", "name: 'e' type: 'ELU' elu_param { alpha: 0.5 }",
       "name: 'x' type: 'Exp' exp_param { base: 2 scale: 0.5 shift: 1 }",
       "name: 'l' type: 'Log' log_param { scale: 0.5 shift: 5 }",
       "name: 'p' type: 'Power' power_param { power: 1.5 scale: 0.5 shift: 4 }",
       "name: 'p' type: 'Power' power_param { power: 2 scale: -1 shift: 1 }",
       "name: 'p' type: 'Power' power_param { power: 1 scale: 3 }", "name: 's' type: 'Swish'",
       "name: 's' type: 'Swish' swish_param { beta: -0.7 }"},
      {2, 3, 4}, /*eltwise=*/true);
  // Clip's kinks at +-1 (inputs within 0.02 of them are not compared).
  this->ExpectLayerGradient("name: 'c' type: 'Clip' clip_param { min: -1 max: 1 }", {2, 3, 4},
                            {test::GradientCheck::kEltwise, 1e-2f, 1e-3f, 1.0f, 0.02f});
  // PReLU's slopes too.
  this->CheckGradients({"name: 'r' type: 'PReLU' prelu_param { filler { type: 'gaussian' std: 0.5 } }",
                        "name: 'r' type: 'PReLU' prelu_param { channel_shared: true }"},
                       {2, 3, 2, 2}, /*eltwise=*/false);
  this->ExpectDeviceOk();
}

// In place (top == bottom) the layers that need their input in backward keep
// a copy of it (on the device they run on): the same bits as out of place.
TYPED_TEST(LayerDeviceTest, ElementwiseInPlaceIsOutOfPlace) {
  for (const char* text :
       {"name: 'b' type: 'BNLL'", "name: 'e' type: 'ELU'", "name: 'x' type: 'Exp'",
        "name: 'l' type: 'Log' log_param { shift: 5 }", "name: 'p' type: 'Power' power_param { power: 1.5 shift: 4 }",
        "name: 'r' type: 'PReLU'", "name: 'c' type: 'Clip' clip_param { min: -0.5 max: 0.7 }",
        "name: 's' type: 'Swish' swish_param { beta: 2 }"}) {
    SCOPED_TRACE(text);
    Blob x(std::vector<int>{2, 3, 5}), top, y;
    FillGaussian(&x, &this->rng_);
    y.CopyFrom(x, false, true);
    auto out_of_place = this->MakeLayer(text);
    auto in_place = this->MakeLayer(text);
    this->SetUpLayer(out_of_place.get(), {&x}, {&top});
    this->SetUpLayer(in_place.get(), {&y}, {&y});
    out_of_place->Forward({&x}, {&top});
    in_place->Forward({&y}, {&y});
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int i = 0; i < top.count(); ++i) top.mutable_cpu_diff()[i] = normal(this->rng_);
    y.CopyFrom(top, /*copy_diff=*/true);
    out_of_place->Backward({&top}, {true}, {&x});
    in_place->Backward({&y}, {true}, {&y});
    for (int i = 0; i < top.count(); ++i) {
      EXPECT_EQ(top.cpu_data()[i], y.cpu_data()[i]) << i;
      EXPECT_EQ(x.cpu_diff()[i], y.cpu_diff()[i]) << i;
    }
    for (size_t p = 0; p < out_of_place->blobs().size(); ++p) {
      for (int i = 0; i < out_of_place->blobs()[p]->count(); ++i) {
        EXPECT_EQ(out_of_place->blobs()[p]->cpu_diff()[i], in_place->blobs()[p]->cpu_diff()[i]) << i;
      }
    }
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, EuclideanLossValueAndGradient) {
  this->FillBottoms({2, 2}, {1, 2, 3, 4}, {2, 2}, {0, 0, 1, 1});
  auto layer = this->MakeLayer("name: 'l' type: 'EuclideanLoss'");
  this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  layer->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  EXPECT_EQ(4.5f, this->top_.cpu_data()[0]);  // (1 + 4 + 4 + 9) / 2 / 2
  this->top_.mutable_cpu_diff()[0] = 2.0f;
  layer->Backward({&this->top_}, {true, true}, {&this->bottom_, &this->bottom2_});
  const float diff[] = {1, 2, 2, 3};  // (a - b) * 2 / 2, and its negation
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(diff[i], this->bottom_.cpu_diff()[i]) << i;
    EXPECT_EQ(-diff[i], this->bottom2_.cpu_diff()[i]) << i;
  }
  Blob a(std::vector<int>{3, 2, 2}), b(std::vector<int>{3, 4}), loss;
  FillGaussian(&a, &this->rng_);
  FillGaussian(&b, &this->rng_);
  auto l = this->MakeLayer("name: 'l' type: 'EuclideanLoss'");
  test::ExpectGradient(l.get(), {&a, &b}, {&loss}, {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-2f});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, SigmoidCrossEntropyLossValueAndGradient) {
  this->FillBottoms({2, 2}, {0, 0, 100, -100}, {2, 2}, {1, 0, 0.75f, 0});
  {
    auto layer = this->MakeLayer("name: 'l' type: 'SigmoidCrossEntropyLoss'");
    this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
    layer->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
    // log 2 + log 2 + 25 + 0, over the batch of 2.
    EXPECT_NEAR(std::log(2.0) + 12.5, this->top_.cpu_data()[0], 1e-5);
  }
  {
    auto layer = this->MakeLayer(
        "name: 'l' type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: 1 normalization: VALID }");
    this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
    layer->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
    EXPECT_NEAR((std::log(2.0) + 25) / 3, this->top_.cpu_data()[0], 1e-5);  // the first target ignored
    this->top_.mutable_cpu_diff()[0] = 3.0f;
    layer->Backward({&this->top_}, {true, false}, {&this->bottom_, &this->bottom2_});
    // (sigmoid(x) - t) * 3 / 3: ignored 0, 0.5, 1 - 0.75, 0 - 0.
    EXPECT_EQ(0.0f, this->bottom_.cpu_diff()[0]);
    EXPECT_EQ(0.5f, this->bottom_.cpu_diff()[1]);
    EXPECT_EQ(0.25f, this->bottom_.cpu_diff()[2]);
    EXPECT_EQ(0.0f, this->bottom_.cpu_diff()[3]);
  }
  for (const char* extra : {"", "loss_param { ignore_label: 1 normalization: VALID }"}) {
    Blob scores(std::vector<int>{3, 4}), targets(std::vector<int>{3, 4}), loss;
    FillGaussian(&scores, &this->rng_);
    for (int i = 0; i < targets.count(); ++i) targets.mutable_cpu_data()[i] = 0.25f * static_cast<float>(i % 5);
    auto l = this->MakeLayer(std::string("name: 'l' type: 'SigmoidCrossEntropyLoss' ") + extra);
    SCOPED_TRACE(extra);
    test::ExpectGradient(l.get(), {&scores, &targets}, {&loss},
                         {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-2f, 0.0f, -1.0f, 0});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ConcatAndSliceValuesAndGradients) {
  this->FillBottoms({2, 1, 2}, OneToN(4), {2, 2, 2}, {11, 12, 13, 14, 15, 16, 17, 18});
  auto concat = this->MakeLayer("name: 'c' type: 'Concat'");
  this->SetUpLayer(concat.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  concat->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  this->ExpectNear({1, 2, 11, 12, 13, 14, 3, 4, 15, 16, 17, 18}, this->top_);
  Blob first, second;
  auto slice = this->MakeLayer("name: 's' type: 'Slice' slice_param { slice_point: 1 }");
  this->SetUpLayer(slice.get(), {&this->top_}, {&first, &second});
  slice->Forward({&this->top_}, {&first, &second});
  this->ExpectNear(OneToN(4), first);
  this->ExpectNear({11, 12, 13, 14, 15, 16, 17, 18}, second);
  for (const char* axis : {"0", "1", "2"}) {
    Blob a(std::vector<int>{2, 3, 2}), b(std::vector<int>{2, 3, 2}), top;
    FillGaussian(&a, &this->rng_);
    FillGaussian(&b, &this->rng_);
    auto c = this->MakeLayer(std::string("name: 'c' type: 'Concat' concat_param { axis: ") + axis + " }");
    SCOPED_TRACE(axis);
    test::ExpectGradient(c.get(), {&a, &b}, {&top}, {test::GradientCheck::kSumOfSquares});
    Blob whole(std::vector<int>{2, 4, 2}), t1, t2;
    FillGaussian(&whole, &this->rng_);
    auto s = this->MakeLayer(std::string("name: 's' type: 'Slice' slice_param { axis: ") + axis + " }");
    test::ExpectGradient(s.get(), {&whole}, {&t1, &t2}, {test::GradientCheck::kSumOfSquares});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ArgMaxTopKWithTies) {
  this->bottom_.Reshape({2, 4});
  SetBlobData(&this->bottom_, {1, 3, 3, 2, 0, -1, 5, 5});
  auto layer = this->MakeLayer("name: 'a' type: 'ArgMax' argmax_param { top_k: 2 out_max_val: true }");
  this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
  layer->Forward({&this->bottom_}, {&this->top_});
  // Per item: the indices (ties to the larger), then the values.
  this->ExpectNear({2, 1, 3, 3, 3, 2, 5, 5}, this->top_);
  Blob along;
  auto axis = this->MakeLayer("name: 'a' type: 'ArgMax' argmax_param { axis: 0 }");
  this->SetUpLayer(axis.get(), {&this->bottom_}, {&along});
  axis->Forward({&this->bottom_}, {&along});
  this->ExpectNear({0, 0, 1, 1}, along);
  this->ExpectDeviceOk();
}

// Issue 31's Caffe layers, part B: HingeLoss, MultinomialLogisticLoss,
// InfogainLoss, ContrastiveLoss, BatchReindex, Filter, Embed and Parameter
// (values worked by hand, as in their own tests, and gradient checks).
TYPED_TEST(LayerDeviceTest, CaffeLabelLossesValuesAndGradients) {
  this->FillBottoms({2, 3}, {0.5f, -0.2f, 1.5f, -1, 0.3f, 2}, {2}, {2, 0});
  auto hinge = this->MakeLayer("name: 'h' type: 'HingeLoss' hinge_loss_param { norm: L2 }");
  this->SetUpLayer(hinge.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  hinge->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  this->ExpectNear({(2.89f + 14.69f) / 2}, this->top_);  // margins [1.5, 0.8, 0], [2, 1.3, 3], squared
  hinge->Backward({&this->top_}, {true, false}, {&this->bottom_, &this->bottom2_});
  const float hinge_diff[] = {1.5f, 0.8f, 0, -2, 1.3f, 3};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(hinge_diff[i], this->bottom_.cpu_diff()[i]) << i;

  SetBlobData(&this->bottom_, {0.2f, 0.3f, 0.5f, 0.6f, 0.4f, 0.0f});
  SetBlobData(&this->bottom2_, {2, 1});
  auto mll = this->MakeLayer("name: 'm' type: 'MultinomialLogisticLoss'");
  this->SetUpLayer(mll.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  mll->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  this->ExpectNear({-(std::log(0.5f) + std::log(0.4f)) / 2}, this->top_);
  mll->Backward({&this->top_}, {true, false}, {&this->bottom_, &this->bottom2_});
  EXPECT_FLOAT_EQ(-1.0f, this->bottom_.cpu_diff()[2]);
  EXPECT_FLOAT_EQ(-1.25f, this->bottom_.cpu_diff()[4]);
  EXPECT_EQ(0.0f, this->bottom_.cpu_diff()[3]);

  // Infogain with H = identity is SoftmaxWithLoss: scores [1, 2, 3] and
  // [1, 1, 1], labels 2 and 0.
  SetBlobData(&this->bottom_, {1, 2, 3, 1, 1, 1});
  SetBlobData(&this->bottom2_, {2, 0});
  Blob h(std::vector<int>{3, 3});
  SetBlobData(&h, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  auto infogain = this->MakeLayer("name: 'i' type: 'InfogainLoss'");
  this->SetUpLayer(infogain.get(), {&this->bottom_, &this->bottom2_, &h}, {&this->top_});
  infogain->Forward({&this->bottom_, &this->bottom2_, &h}, {&this->top_});
  this->ExpectNear({(0.40760596f + 1.09861229f) / 2}, this->top_);

  for (const char* text : {"name: 'h' type: 'HingeLoss'", "name: 'h' type: 'HingeLoss' hinge_loss_param { norm: L2 }",
                           "name: 'm' type: 'MultinomialLogisticLoss'", "name: 'i' type: 'InfogainLoss'"}) {
    SCOPED_TRACE(text);
    const bool infogain_layer = std::string(text).find("Infogain") != std::string::npos;
    Blob x(std::vector<int>{4, 5}), label(std::vector<int>{4}), matrix(std::vector<int>{5, 5}), loss;
    std::uniform_real_distribution<float> unit(0.2f, 1.0f);
    for (int i = 0; i < x.count(); ++i) x.mutable_cpu_data()[i] = unit(this->rng_);
    for (int i = 0; i < matrix.count(); ++i) matrix.mutable_cpu_data()[i] = unit(this->rng_);
    SetBlobData(&label, {0, 4, 2, 2});
    auto l = this->MakeLayer(text);
    std::vector<Blob*> bottoms = {&x, &label};
    if (infogain_layer) bottoms.push_back(&matrix);
    test::ExpectGradient(l.get(), bottoms, {&loss}, {test::GradientCheck::kExhaustive, 1e-3f, 1e-2f, 1.0f, 0.01f, 0});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ContrastiveLossValuesAndGradients) {
  this->FillBottoms({2, 2}, {1, 2, 0, 0}, {2, 2}, {1, 0, 0.3f, 0.4f});
  Blob sim(std::vector<int>{2});
  SetBlobData(&sim, {1, 0});
  auto layer = this->MakeLayer("name: 'c' type: 'ContrastiveLoss' contrastive_loss_param { legacy_version: true }");
  this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_, &sim}, {&this->top_});
  layer->Forward({&this->bottom_, &this->bottom2_, &sim}, {&this->top_});
  this->ExpectNear({(4.0f + 0.75f) / 4}, this->top_);
  layer->Backward({&this->top_}, {true, true, false}, {&this->bottom_, &this->bottom2_, &sim});
  const float da[] = {0, 1, 0.15f, 0.2f};
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(da[i], this->bottom_.cpu_diff()[i]) << i;
    EXPECT_FLOAT_EQ(-da[i], this->bottom2_.cpu_diff()[i]) << i;
  }
  for (const char* legacy : {"false", "true"}) {
    for (int bottom : {0, 1}) {
      Blob a(std::vector<int>{4, 3}), b(std::vector<int>{4, 3}), s(std::vector<int>{4}), loss;
      FillGaussian(&a, &this->rng_);
      FillGaussian(&b, &this->rng_);
      SetBlobData(&s, {1, 0, 0, 1});
      auto l = this->MakeLayer(std::string("name: 'c' type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 "
                                           "legacy_version: ") +
                               legacy + " }");
      test::ExpectGradient(l.get(), {&a, &b, &s}, {&loss},
                           {test::GradientCheck::kExhaustive, 1e-3f, 1e-2f, 0.0f, -1.0f, bottom});
    }
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, BatchReindexFilterEmbedParameter) {
  this->FillBottoms({3, 2}, {1, 2, 3, 4, 5, 6}, {4}, {2, 0, 2, 1});
  auto reindex = this->MakeLayer("name: 'r' type: 'BatchReindex'");
  this->SetUpLayer(reindex.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  reindex->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  this->ExpectNear({5, 6, 1, 2, 5, 6, 3, 4}, this->top_);
  const std::vector<float> top_diff = {1, 2, 3, 4, 5, 6, 7, 8};
  std::copy(top_diff.begin(), top_diff.end(), this->top_.mutable_cpu_diff());
  reindex->Backward({&this->top_}, {true, false}, {&this->bottom_, &this->bottom2_});
  EXPECT_EQ((std::vector<float>{3, 4, 7, 8, 6, 8}), test::BlobDiff(this->bottom_));

  Blob selector(std::vector<int>{3, 1});
  SetBlobData(&selector, {1, 0, 1});
  auto filter = this->MakeLayer("name: 'f' type: 'Filter'");
  this->SetUpLayer(filter.get(), {&this->bottom_, &selector}, {&this->top2_});
  filter->Forward({&this->bottom_, &selector}, {&this->top2_});
  this->ExpectNear({1, 2, 5, 6}, this->top2_);
  std::copy(top_diff.begin(), top_diff.begin() + 4, this->top2_.mutable_cpu_diff());
  filter->Backward({&this->top2_}, {true, false}, {&this->bottom_, &selector});
  EXPECT_EQ((std::vector<float>{1, 2, 0, 0, 3, 4}), test::BlobDiff(this->bottom_));

  Blob idx(std::vector<int>{3}), embedded;
  SetBlobData(&idx, {2, 0, 2});
  auto embed = this->MakeLayer(
      "name: 'e' type: 'Embed' embed_param { num_output: 2 input_dim: 3 bias_filler { type: 'constant' value: 1 } }");
  this->SetUpLayer(embed.get(), {&idx}, {&embedded});
  SetBlobData(embed->blobs()[0].get(), {0, 1, 2, 3, 4, 5});
  embed->Forward({&idx}, {&embedded});
  this->ExpectNear({5, 6, 1, 2, 5, 6}, embedded);
  std::copy(top_diff.begin(), top_diff.begin() + 6, embedded.mutable_cpu_diff());
  embed->Backward({&embedded}, {false}, {&idx});
  EXPECT_EQ((std::vector<float>{3, 4, 0, 0, 6, 8}), test::BlobDiff(*embed->blobs()[0]));
  EXPECT_EQ((std::vector<float>{9, 12}), test::BlobDiff(*embed->blobs()[1]));

  Blob p;
  auto parameter = this->MakeLayer("name: 'p' type: 'Parameter' parameter_param { shape { dim: 2 } }");
  this->SetUpLayer(parameter.get(), {}, {&p});
  SetBlobData(parameter->blobs()[0].get(), {7, 8});
  parameter->Forward({}, {&p});
  this->ExpectNear({7, 8}, p);
  std::copy(top_diff.begin(), top_diff.begin() + 2, p.mutable_cpu_diff());
  parameter->Backward({&p}, {}, {});
  EXPECT_EQ((std::vector<float>{1, 2}), test::BlobDiff(*parameter->blobs()[0]));

  Blob data(std::vector<int>{4, 3}), order(std::vector<int>{5}), gathered;
  FillGaussian(&data, &this->rng_);
  SetBlobData(&order, {3, 3, 0, 1, 2});
  auto r = this->MakeLayer("name: 'r' type: 'BatchReindex'");
  test::ExpectGradient(r.get(), {&data, &order}, {&gathered},
                       {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0, -1, 0});
  Blob chosen(std::vector<int>{4}), filtered;
  SetBlobData(&chosen, {0, 1, 1, 0});
  auto f = this->MakeLayer("name: 'f' type: 'Filter'");
  test::ExpectGradient(f.get(), {&data, &chosen}, {&filtered},
                       {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0, -1, 0});
  Blob words(std::vector<int>{2, 3}), vectors;
  SetBlobData(&words, {4, 0, 4, 1, 2, 1});
  auto e = this->MakeLayer(
      "name: 'e' type: 'Embed' embed_param { num_output: 3 input_dim: 5 weight_filler { type: 'gaussian' } "
      "bias_filler { type: 'gaussian' } }");
  test::ExpectGradient(e.get(), {&words}, {&vectors}, {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-3f, 0, -1, -2});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, TileValuesAndGradient) {
  this->ExpectForward("name: 't' type: 'Tile' tile_param { tiles: 2 }", {2, 3}, {1, 2, 3, 4, 5, 6},
                      {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  this->CheckGradients(
      {"name: 't' type: 'Tile' tile_param { tiles: 3 }", "name: 't' type: 'Tile' tile_param { axis: -1 tiles: 2 }"},
      {2, 3, 4}, /*eltwise=*/false);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, ReductionValuesAndGradient) {
  this->bottom_.Reshape({2, 3});
  SetBlobData(&this->bottom_, {1, -2, 3, -4, 5, 0});
  const char* params[] = {"operation: SUM", "operation: ASUM", "operation: SUMSQ coeff: 2", "operation: MEAN"};
  const std::vector<float> expected[] = {{2, 1}, {6, 9}, {28, 82}, {2.0f / 3, 1.0f / 3}};
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(params[k]);
    auto layer =
        this->MakeLayer(std::string("name: 'r' type: 'Reduction' reduction_param { axis: 1 ") + params[k] + " }");
    this->SetUpLayer(layer.get(), {&this->bottom_}, {&this->top_});
    layer->Forward({&this->bottom_}, {&this->top_});
    this->ExpectNear(expected[k], this->top_);
  }
  this->CheckGradients({"name: 'r' type: 'Reduction' reduction_param { operation: SUMSQ axis: 1 }",
                        "name: 'r' type: 'Reduction' reduction_param { operation: ASUM axis: -1 coeff: 2 }",
                        "name: 'r' type: 'Reduction' reduction_param { operation: MEAN }"},
                       {2, 3, 4}, /*eltwise=*/false);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, CropValuesAndGradient) {
  this->bottom_.Reshape({1, 1, 4, 4});
  SetBlobData(&this->bottom_, OneToN(16));
  this->bottom2_.Reshape({1, 1, 2, 3});
  auto layer = this->MakeLayer("name: 'c' type: 'Crop' crop_param { offset: 1 }");
  this->SetUpLayer(layer.get(), {&this->bottom_, &this->bottom2_}, {&this->top_});
  layer->Forward({&this->bottom_, &this->bottom2_}, {&this->top_});
  this->ExpectNear({6, 7, 8, 10, 11, 12}, this->top_);
  Blob bottom(std::vector<int>{2, 3, 4, 5}), reference(std::vector<int>{2, 2, 3, 3}), top;
  FillGaussian(&bottom, &this->rng_);
  auto crop = this->MakeLayer("name: 'c' type: 'Crop' crop_param { axis: 1 offset: 1 offset: 0 offset: 2 }");
  test::ExpectGradient(crop.get(), {&bottom, &reference}, {&top}, {test::GradientCheck::kSumOfSquares});
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, MVNValuesAndGradient) {
  this->ExpectForward("name: 'm' type: 'MVN'", {1, 2, 2, 2}, {1, 2, 3, 4, 5, 5, 5, 5},
                      {-1.3416408f, -0.4472136f, 0.4472136f, 1.3416408f, 0, 0, 0, 0});
  this->CheckGradients({"name: 'm' type: 'MVN'", "name: 'm' type: 'MVN' mvn_param { across_channels: true }",
                        "name: 'm' type: 'MVN' mvn_param { normalize_variance: false }"},
                       {2, 3, 2, 3}, /*eltwise=*/false);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, Im2colValuesAndGradient) {
  this->ExpectForward("name: 'i' type: 'Im2col' convolution_param { kernel_size: 2 }", {1, 1, 3, 3}, OneToN(9),
                      {1, 2, 4, 5, 2, 3, 5, 6, 4, 5, 7, 8, 5, 6, 8, 9});
  this->CheckGradients({"name: 'i' type: 'Im2col' convolution_param { kernel_size: 3 pad: 1 stride: 2 }"}, {2, 2, 5, 4},
                       /*eltwise=*/false);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, SPPValuesAndGradient) {
  this->ExpectForward("name: 's' type: 'SPP' spp_param { pyramid_height: 2 pool: AVE }", {1, 1, 4, 4}, OneToN(16),
                      {8.5f, 3.5f, 5.5f, 11.5f, 13.5f});
  this->CheckGradients({"name: 's' type: 'SPP' spp_param { pyramid_height: 3 pool: AVE }"}, {2, 2, 8, 7},
                       /*eltwise=*/false);
  this->ExpectLayerGradient("name: 's' type: 'SPP' spp_param { pyramid_height: 2 }", {2, 2, 5, 5},
                            {test::GradientCheck::kSumOfSquares}, test::BottomFill::kDistinct);
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, LSTMUnitValuesAndGradient) {
  Blob c_prev(std::vector<int>{1, 2, 2}), x(std::vector<int>{1, 2, 8}), cont(std::vector<int>{1, 2}), c, h;
  SetBlobData(&c_prev, {0.5f, -1, 2, -1});
  SetBlobData(&x, {1, -2, 0.5f, 0, -1, 2, 0.3f, -0.7f, 0.2f, 0.1f, 3, -3, 1, 1, 0.5f, -0.5f});
  SetBlobData(&cont, {1, 0});
  auto layer = this->MakeLayer("name: 'u' type: 'LSTMUnit'");
  this->SetUpLayer(layer.get(), {&c_prev, &x, &cont}, {&c, &h});
  layer->Forward({&c_prev, &x, &cont}, {&c, &h});
  // Worked in double from c = f c_prev + i g, h = o tanh(c) (lstm_unit_layer_test).
  this->ExpectNear({0.52419625f, -0.57204241f, 0.25408772f, -0.24260189f}, c);
  this->ExpectNear({0.12934259f, -0.45524671f, 0.18185617f, -0.17395673f}, h);
  for (int check_bottom : {0, 1}) {
    Blob cp(std::vector<int>{1, 3, 4}), gates(std::vector<int>{1, 3, 16}), flags(std::vector<int>{1, 3}), c2, h2;
    FillGaussian(&cp, &this->rng_);
    FillGaussian(&gates, &this->rng_);
    SetBlobData(&flags, {1, 0, 1});
    auto unit = this->MakeLayer("name: 'u' type: 'LSTMUnit'");
    test::ExpectGradient(unit.get(), {&cp, &gates, &flags}, {&c2, &h2},
                         {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, check_bottom});
  }
  this->ExpectDeviceOk();
}

TYPED_TEST(LayerDeviceTest, LSTMValuesAndGradient) {
  // Worked in double from Caffe's unrolled net (lstm_layer_test).
  this->ExpectRecurrentValuesAndGradient("name: 'l' type: 'LSTM'",
                                         {{1, 0.5f, -1, 2}, {0, 0.1f, 0.2f, -0.1f}, {0.3f, -0.2f, 0.5f, 0.4f}},
                                         {0.17809375f, -0.03448605f});
}

TYPED_TEST(LayerDeviceTest, RNNValuesAndGradient) {
  // W_xh, b_h, W_hh, W_ho, b_o; worked in double from Caffe's unrolled net
  // (rnn_layer_test).
  this->ExpectRecurrentValuesAndGradient("name: 'r' type: 'RNN'", {{0.8f}, {0.1f}, {-0.5f}, {1.5f}, {-0.2f}},
                                         {0.45673334f, -0.90591541f});
}

}  // namespace
}  // namespace nereus

// Convolution and Deconvolution (base_conv_layer.h): exact forward values on
// tiny inputs, numeric gradient checks (group, pad, stride, dilation),
// Deconvolution as Convolution's adjoint, and configuration errors.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/base_conv_layer.h"
#include "worker/trainer/layers/im2col.h"

namespace nereus {
namespace {

using test::BlobData;
using test::ExpectBlobNear;
using test::ParseLayerParameter;
using test::SetBlobData;

std::vector<float> OneToN(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i + 1);
  return v;
}

// A Convolution layer 'conv' of `conv_param`, in prototxt.
std::string ConvText(const std::string& conv_param) {
  return "name: 'conv' type: 'Convolution' convolution_param { " + conv_param + " }";
}

// Gaussian weights and biases (std 0.5) for the gradient checks.
const char kGaussianFillers[] =
    " weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'gaussian' std: 0.5 }";

class ConvolutionLayerTest : public ::testing::Test {
 protected:
  // Sets the layer up on bottom_ (which the test has shaped and filled).
  std::unique_ptr<ConvolutionLayer> MakeLayer(const std::string& conv_param) {
    auto layer = std::make_unique<ConvolutionLayer>(ParseLayerParameter(ConvText(conv_param)));
    layer->set_rng(&rng_);
    const Status status = layer->SetUp({&bottom_}, {&top_});
    EXPECT_TRUE(status.ok()) << status.message();
    return layer;
  }

  // A layer of `conv_param` run forward on the 3x3 image 1..9 (into top_).
  std::unique_ptr<ConvolutionLayer> ForwardOneToNine(const std::string& conv_param) {
    bottom_.Reshape({1, 1, 3, 3});
    SetBlobData(&bottom_, OneToN(9));
    auto layer = MakeLayer(conv_param);
    layer->Forward({&bottom_}, {&top_});
    return layer;
  }

  std::mt19937 rng_{1701};
  Blob bottom_;
  Blob top_;
};

TEST_F(ConvolutionLayerTest, Im2ColLayout) {
  // 1 channel 3x3, kernel 2x2, stride 1: 4 rows (kernel taps) x 4 columns.
  layers::ConvGeometry g;
  g.channels = 1;
  g.height = g.width = 3;
  g.kernel_h = g.kernel_w = 2;
  const std::vector<float> im = OneToN(9);
  std::vector<float> col(16);
  layers::Im2Col(im.data(), g, col.data());
  const std::vector<float> expected = {1, 2, 4, 5,   // tap (0,0)
                                       2, 3, 5, 6,   // tap (0,1)
                                       4, 5, 7, 8,   // tap (1,0)
                                       5, 6, 8, 9};  // tap (1,1)
  EXPECT_EQ(expected, col);
  // Col2Im sums every copy back: the centre pixel (5) was read 4 times.
  std::vector<float> back(9);
  std::vector<float> ones(16, 1.0f);
  layers::Col2Im(ones.data(), g, back.data());
  EXPECT_EQ((std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1}), back);
}

TEST_F(ConvolutionLayerTest, ForwardDiagonalKernelWithBias) {
  bottom_.Reshape({1, 1, 3, 3});
  SetBlobData(&bottom_, OneToN(9));
  auto layer = MakeLayer("num_output: 1 kernel_size: 2");
  ASSERT_EQ(2u, layer->blobs().size());
  SetBlobData(layer->blobs()[0].get(), {1, 0, 0, 1});
  SetBlobData(layer->blobs()[1].get(), {0.5f});
  layer->Forward({&bottom_}, {&top_});
  EXPECT_EQ((std::vector<int>{1, 1, 2, 2}), top_.shape());
  // x(i,j) + x(i+1,j+1) + 0.5.
  ExpectBlobNear({6.5f, 8.5f, 12.5f, 14.5f}, top_);
}

TEST_F(ConvolutionLayerTest, ForwardPadAndStride) {
  auto layer = ForwardOneToNine(
      "num_output: 1 kernel_size: 2 pad: 1 stride: 2 bias_term: false "
      "weight_filler { type: 'constant' value: 1 }");
  ASSERT_EQ(1u, layer->blobs().size());
  // Output (3 + 2 - 2) / 2 + 1 = 2; windows start at -1 and 1 on each axis.
  EXPECT_EQ((std::vector<int>{1, 1, 2, 2}), top_.shape());
  ExpectBlobNear({1, 2 + 3, 4 + 7, 5 + 6 + 8 + 9}, top_);
}

TEST_F(ConvolutionLayerTest, ForwardRectangularKernelHW) {
  ForwardOneToNine(
      "num_output: 1 kernel_h: 1 kernel_w: 3 stride_h: 2 stride_w: 1 bias_term: false "
      "weight_filler { type: 'constant' value: 1 }");
  // Rows 0 and 2, each summed across: 1+2+3, 7+8+9.
  EXPECT_EQ((std::vector<int>{1, 1, 2, 1}), top_.shape());
  ExpectBlobNear({6, 24}, top_);
}

TEST_F(ConvolutionLayerTest, ForwardDilation) {
  ForwardOneToNine(
      "num_output: 1 kernel_size: 2 dilation: 2 bias_term: false weight_filler { type: 'constant' value: 1 }");
  // A dilated 2x2 kernel spans 3x3 and reads the four corners.
  EXPECT_EQ((std::vector<int>{1, 1, 1, 1}), top_.shape());
  ExpectBlobNear({1 + 3 + 7 + 9}, top_);
}

TEST_F(ConvolutionLayerTest, ForwardChannelsAndGroups) {
  bottom_.Reshape({1, 2, 2, 2});
  SetBlobData(&bottom_, {1, 2, 3, 4, 10, 20, 30, 40});
  {
    // Without groups each output sees both channels: ch0 - ch1.
    auto layer = MakeLayer("num_output: 1 kernel_size: 1 bias_term: false");
    SetBlobData(layer->blobs()[0].get(), {1, -1});
    layer->Forward({&bottom_}, {&top_});
    ExpectBlobNear({-9, -18, -27, -36}, top_);
  }
  {
    // group 2: output 0 sees only channel 0, output 1 only channel 1.
    auto layer = MakeLayer("num_output: 2 kernel_size: 1 group: 2 bias_term: false");
    EXPECT_EQ((std::vector<int>{2, 1, 1, 1}), layer->blobs()[0]->shape());
    SetBlobData(layer->blobs()[0].get(), {2, 3});
    layer->Forward({&bottom_}, {&top_});
    ExpectBlobNear({2, 4, 6, 8, 30, 60, 90, 120}, top_);
  }
}

TEST_F(ConvolutionLayerTest, TwoBottomsShareWeights) {
  Blob bottom2(std::vector<int>{1, 1, 2, 2});
  bottom_.Reshape({1, 1, 2, 2});
  SetBlobData(&bottom_, {1, 2, 3, 4});
  SetBlobData(&bottom2, {5, 6, 7, 8});
  Blob top2;
  ConvolutionLayer layer(
      ParseLayerParameter("name: 'conv' type: 'Convolution' convolution_param { num_output: 1 kernel_size: 2 "
                          "weight_filler { type: 'constant' value: 1 } bias_filler { type: 'constant' value: 1 } }"));
  layer.set_rng(&rng_);
  ASSERT_TRUE(layer.SetUp({&bottom_, &bottom2}, {&top_, &top2}).ok());
  layer.Forward({&bottom_, &bottom2}, {&top_, &top2});
  ExpectBlobNear({11}, top_);
  ExpectBlobNear({27}, top2);
}

TEST_F(ConvolutionLayerTest, GradientSimple) {
  test::ExpectLayerGradient<ConvolutionLayer>(
      ConvText("num_output: 2 kernel_size: 3 stride: 2" + std::string(kGaussianFillers)), {2, 3, 5, 4}, 1701);
}

TEST_F(ConvolutionLayerTest, GradientPadStrideGroup) {
  test::ExpectLayerGradient<ConvolutionLayer>(
      ConvText("num_output: 4 kernel_size: 3 pad: 1 stride: 2 group: 2" + std::string(kGaussianFillers)), {2, 4, 5, 5},
      1701);
}

TEST_F(ConvolutionLayerTest, GradientDilationRectangular) {
  test::ExpectLayerGradient<ConvolutionLayer>(
      ConvText("num_output: 2 kernel_h: 2 kernel_w: 3 pad_h: 1 pad_w: 0 stride_h: 1 stride_w: 2 dilation: 2" +
               std::string(kGaussianFillers)),
      {1, 2, 6, 5}, 1701);
}

TEST_F(ConvolutionLayerTest, BackwardAccumulatesParameterDiffs) {
  // Caffe semantics: parameter diffs are added to (the solver clears them).
  bottom_.Reshape({1, 1, 2, 2});
  SetBlobData(&bottom_, {1, 2, 3, 4});
  auto layer = MakeLayer("num_output: 1 kernel_size: 2");
  top_.mutable_cpu_diff()[0] = 1.0f;
  layer->Forward({&bottom_}, {&top_});
  top_.mutable_cpu_diff()[0] = 1.0f;
  caffe_set(4, 0.0f, layer->blobs()[0]->mutable_cpu_diff());
  caffe_set(1, 0.0f, layer->blobs()[1]->mutable_cpu_diff());
  layer->Backward({&top_}, {true}, {&bottom_});
  layer->Backward({&top_}, {true}, {&bottom_});
  EXPECT_EQ((std::vector<float>{2, 4, 6, 8}), test::BlobDiff(*layer->blobs()[0]));
  EXPECT_EQ((std::vector<float>{2}), test::BlobDiff(*layer->blobs()[1]));
}

// ---- Configuration errors name the layer and the problem ----

Status SetUpConv(const std::string& conv_param, std::vector<int> bottom_shape = {1, 2, 4, 4}) {
  std::mt19937 rng(1);
  Blob bottom(bottom_shape);
  Blob top;
  ConvolutionLayer layer(ParseLayerParameter("name: 'conv9' type: 'Convolution' " + conv_param));
  layer.set_rng(&rng);
  return layer.SetUp({&bottom}, {&top});
}

// Deconvolution is the transpose of Convolution through the same weights:
// <conv(x), y> = <x, deconv(y)> for any x, y (both written with
// BaseConvolutionLayer's helpers, with the roles of input and output swapped).
TEST(DeconvolutionLayerTest, IsTheAdjointOfConvolution) {
  std::mt19937 rng(7);
  Blob x(2, 4, 7, 6), conv_top, deconv_top;
  test::FillGaussian(&x, &rng);
  const std::string geometry = "kernel_h: 3 kernel_w: 2 stride: 2 pad: 1 group: 2 bias_term: false ";
  ConvolutionLayer conv(ParseLayerParameter("name: 'c' type: 'Convolution' convolution_param { num_output: 6 " +
                                            geometry + "weight_filler { type: 'gaussian' } }"));
  conv.set_rng(&rng);
  ASSERT_TRUE(conv.SetUp({&x}, {&conv_top}).ok());
  conv.Forward({&x}, {&conv_top});
  ASSERT_EQ((std::vector<int>{2, 6, 4, 4}), conv_top.shape());

  Blob y(conv_top.shape());
  test::FillGaussian(&y, &rng);
  DeconvolutionLayer deconv(
      ParseLayerParameter("name: 'd' type: 'Deconvolution' convolution_param { num_output: 4 " + geometry + "}"));
  deconv.set_rng(&rng);
  ASSERT_TRUE(deconv.SetUp({&y}, {&deconv_top}).ok());
  ASSERT_EQ(conv.blobs()[0]->shape(), deconv.blobs()[0]->shape());
  deconv.blobs()[0]->CopyFrom(*conv.blobs()[0]);
  deconv.Forward({&y}, {&deconv_top});
  ASSERT_EQ(x.shape(), deconv_top.shape());

  double lhs = 0, rhs = 0;
  for (int i = 0; i < y.count(); ++i) lhs += double(conv_top.cpu_data()[i]) * y.cpu_data()[i];
  for (int i = 0; i < x.count(); ++i) rhs += double(x.cpu_data()[i]) * deconv_top.cpu_data()[i];
  // Each side sums a few hundred float products of unit Gaussians: 1e-4
  // relative is far above float rounding, far below any wrong index.
  EXPECT_NEAR(lhs, rhs, 1e-4 * std::abs(lhs)) << lhs << " vs " << rhs;
  EXPECT_GT(std::abs(lhs), 1.0);
}

TEST(DeconvolutionLayerTest, EachInputPixelPaintsAWeightedKernel) {
  // Kernel 2, stride 2: each input value stamps value * W onto its own 2x2
  // block of the 4x4 output.
  Blob bottom(1, 1, 2, 2), top;
  SetBlobData(&bottom, {1, 2, 3, 4});
  std::mt19937 rng(1);
  DeconvolutionLayer layer(
      ParseLayerParameter("name: 'up' type: 'Deconvolution' convolution_param { num_output: 1 kernel_size: 2 stride: 2 "
                          "bias_filler { type: 'constant' value: 0.5 } }"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  EXPECT_EQ((std::vector<int>{1, 1, 4, 4}), top.shape());
  EXPECT_EQ((std::vector<int>{1, 1, 2, 2}), layer.blobs()[0]->shape());
  SetBlobData(layer.blobs()[0].get(), {1, 2, 3, 4});
  layer.Forward({&bottom}, {&top});
  EXPECT_EQ((std::vector<float>{1.5f, 2.5f, 2.5f, 4.5f,  //
                                3.5f, 4.5f, 6.5f, 8.5f,  //
                                3.5f, 6.5f, 4.5f, 8.5f,  //
                                9.5f, 12.5f, 12.5f, 16.5f}),
            BlobData(top));
}

TEST(DeconvolutionLayerTest, ShapesAndGradients) {
  const char* configs[] = {"num_output: 3 kernel_size: 3 stride: 2 pad: 1",
                           "num_output: 4 kernel_size: 2 stride: 1 group: 2",
                           "num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 2 bias_term: false"};
  const std::vector<std::vector<int>> shapes = {{2, 3, 5, 5}, {2, 4, 4, 4}, {2, 2, 5, 6}};
  for (int c = 0; c < 3; ++c) {
    SCOPED_TRACE(configs[c]);
    std::mt19937 rng(45);
    Blob bottom(2, 2, 3, 3), top;
    test::FillGaussian(&bottom, &rng);
    DeconvolutionLayer layer(
        ParseLayerParameter(std::string("name: 'up' type: 'Deconvolution' convolution_param { ") + configs[c] +
                            " weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }"));
    layer.set_rng(&rng);
    test::ExpectGradient(&layer, {&bottom}, {&top}, {test::GradientCheck::kSumOfSquares, 1e-2f, 1e-2f});
    EXPECT_EQ(shapes[c], top.shape());
  }
}

TEST(ConvolutionLayerConfigTest, KernelSizeZero) {
  const Status s = SetUpConv("convolution_param { num_output: 1 kernel_size: 0 }");
  test::ExpectErrorContains(s, {"conv9", "kernel size must be > 0"});
}

TEST(ConvolutionLayerConfigTest, MissingKernelOrNumOutput) {
  Status s = SetUpConv("convolution_param { num_output: 1 }");
  test::ExpectErrorContains(s, {"kernel"});
  s = SetUpConv("convolution_param { kernel_size: 3 }");
  test::ExpectErrorContains(s, {"num_output"});
  s = SetUpConv("convolution_param { num_output: 1 kernel_size: 3 kernel_h: 3 kernel_w: 3 }");
  test::ExpectErrorContains(s, {"not both"});
}

TEST(ConvolutionLayerConfigTest, GroupMustDivideChannels) {
  const Status s = SetUpConv("convolution_param { num_output: 3 kernel_size: 1 group: 3 }");
  test::ExpectErrorContains(s, {"divisible by group"});
}

TEST(ConvolutionLayerConfigTest, KernelLargerThanInput) {
  const Status s = SetUpConv("convolution_param { num_output: 1 kernel_size: 5 }");
  test::ExpectErrorContains(s, {"larger than the padded input"});
}

TEST(ConvolutionLayerConfigTest, OnlyTwoSpatialAxes) {
  const Status s = SetUpConv("convolution_param { num_output: 1 kernel_size: 1 }", {1, 2, 4});
  test::ExpectErrorContains(s, {"2-D"});
}

}  // namespace
}  // namespace nereus

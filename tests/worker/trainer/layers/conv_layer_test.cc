// Convolution and Deconvolution (base_conv_layer.h): exact forward values on
// tiny inputs, numeric gradient checks (group, pad, stride, dilation),
// Deconvolution as Convolution's adjoint, and configuration errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/gpu/cudnn.h"
#include "worker/trainer/gpu/device.h"
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

// The GPU's weight gradient plan (base_conv_layer.h): a chunk of images'
// image-major columns and their output diffs brought into rows, one GEMM per
// group over k S columns, against the CPU layer's one GEMM per image. The
// same products, summed in another order: each element within twice the
// recursive-summation bound of the exact sum, gamma_n sum |a_i b_i| with
// n = k S + k terms (the per-image GEMMs and their k additions into dW),
// gamma_n = n u / (1 - n u), u = 2^-24.
TEST_F(ConvolutionLayerTest, TheChunkedWeightGradientPlanIsThePerImageOneWithinRounding) {
  for (const char* geometry :
       {"num_output: 6 kernel_h: 3 kernel_w: 2 stride: 2 pad: 1 group: 2", "num_output: 4 kernel_size: 1"}) {
    SCOPED_TRACE(geometry);
    bottom_.Reshape({3, 4, 7, 6});
    test::FillGaussian(&bottom_, &rng_);
    auto layer = MakeLayer(std::string(geometry) + kGaussianFillers);
    layer->Forward({&bottom_}, {&top_});
    Blob diff(top_.shape());
    test::FillGaussian(&diff, &rng_);
    caffe_copy(diff.count(), diff.cpu_data(), top_.mutable_cpu_diff());
    caffe_set(layer->blobs()[0]->count(), 0.0f, layer->blobs()[0]->mutable_cpu_diff());
    layer->Backward({&top_}, {false}, {&bottom_});
    const std::vector<float> per_image = test::BlobDiff(*layer->blobs()[0]);

    // The plan, on the CPU: K = C/g kh kw rows per group, M = num_output/g.
    const caffe::ConvolutionParameter p = ParseLayerParameter(ConvText(geometry)).convolution_param();
    const int num = 3, group = static_cast<int>(p.group()), channels = 4, out = static_cast<int>(p.num_output());
    layers::ConvGeometry g;
    g.channels = channels;
    g.height = 7;
    g.width = 6;
    g.kernel_h = p.has_kernel_h() ? static_cast<int>(p.kernel_h()) : static_cast<int>(p.kernel_size(0));
    g.kernel_w = p.has_kernel_w() ? static_cast<int>(p.kernel_w()) : static_cast<int>(p.kernel_size(0));
    g.pad_h = g.pad_w = p.pad_size() > 0 ? static_cast<int>(p.pad(0)) : 0;
    g.stride_h = g.stride_w = p.stride_size() > 0 ? static_cast<int>(p.stride(0)) : 1;
    const int spatial = g.output_h() * g.output_w();
    ASSERT_EQ(top_.count(), num * out * spatial);
    const int kdim = channels / group * g.kernel_h * g.kernel_w, m = out / group;
    const int width = num * spatial;
    std::vector<float> columns(static_cast<size_t>(kdim) * group * width), rows(static_cast<size_t>(out) * width);
    layers::Im2ColImageMajor(bottom_.cpu_data(), g, num, columns.data());
    layers::ImagesToRows(top_.cpu_diff(), num, out, spatial, rows.data());
    std::vector<float> plan(per_image.size(), 0.0f);
    for (int grp = 0; grp < group; ++grp) {
      caffe_cpu_gemm(CblasNoTrans, CblasTrans, m, kdim, width, 1.0f, rows.data() + grp * m * width,
                     columns.data() + grp * kdim * width, 1.0f, plan.data() + grp * m * kdim);
    }
    // The bound, per element, from the same rows and columns in double.
    const double n = width + num, u = std::ldexp(1.0, -24), gamma = n * u / (1 - n * u);
    size_t differ = 0;
    for (int grp = 0; grp < group; ++grp) {
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < kdim; ++j) {
          double abs_sum = 0;
          for (int s = 0; s < width; ++s)
            abs_sum += std::abs(double(rows[(grp * m + i) * width + s]) * columns[(grp * kdim + j) * width + s]);
          const size_t e = (static_cast<size_t>(grp) * m + i) * kdim + j;
          EXPECT_LE(std::abs(double(plan[e]) - per_image[e]), 2 * gamma * abs_sum) << "element " << e;
          differ += plan[e] != per_image[e];
        }
      }
    }
    // Not a comparison of a thing with itself: a wrong index would be far out.
    EXPECT_GT(per_image.size(), 0u);
    RecordProperty(std::string("differing_elements_") + (group > 1 ? "3x2" : "1x1"), static_cast<int>(differ));
  }
}

// The engine of a convolution on a GPU (gpu/cudnn.h): Caffe's rule, and what
// each choice says.
TEST(ConvEngineTest, CaffesRuleForTheEngine) {
  using caffe::ConvolutionParameter;
  const gpu::CudnnAvailability found{true, "cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9)"};
  const gpu::CudnnAvailability missing{false,
                                       "libcudnn.so.9 not found (libcudnn.so.9: cannot open shared object file)"};
  const gpu::CudnnAvailability old{false, "cuDNN 8.9.7 is too old: Nereus needs cuDNN 9"};
  EXPECT_EQ(*gpu::ChooseConvEngine(ConvolutionParameter::DEFAULT, found, "conv1"), gpu::ConvEngine::kCudnn);
  EXPECT_EQ(*gpu::ChooseConvEngine(ConvolutionParameter::CUDNN, found, "conv1"), gpu::ConvEngine::kCudnn);
  EXPECT_EQ(*gpu::ChooseConvEngine(ConvolutionParameter::CAFFE, found, "conv1"), gpu::ConvEngine::kIm2col);
  EXPECT_EQ(*gpu::ChooseConvEngine(ConvolutionParameter::DEFAULT, missing, "conv1"), gpu::ConvEngine::kIm2col);
  EXPECT_EQ(*gpu::ChooseConvEngine(ConvolutionParameter::CAFFE, old, "conv1"), gpu::ConvEngine::kIm2col);
  const auto insisted = gpu::ChooseConvEngine(ConvolutionParameter::CUDNN, old, "conv2");
  ASSERT_FALSE(insisted.ok());
  EXPECT_EQ(insisted.status().message(),
            "layer conv2 asks for engine: CUDNN, which this machine cannot give: cuDNN 8.9.7 is too old: Nereus "
            "needs cuDNN 9 (engine: DEFAULT or CAFFE runs im2col + GEMM)");
  EXPECT_EQ(gpu::ConvEngineLogLine(found), "convolutions: cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9)");
  EXPECT_EQ(gpu::ConvEngineLogLine(missing),
            "convolutions: im2col engine (cuDNN unused: libcudnn.so.9 not found (libcudnn.so.9: cannot open shared "
            "object file))");
}

TEST(ConvEngineTest, OnlyCudnn9WillDo) {
  EXPECT_EQ(gpu::FormatCudnnVersion(91900), "9.19.0");
  EXPECT_EQ(gpu::FormatCudnnVersion(90101), "9.1.1");
  EXPECT_TRUE(gpu::CheckCudnnVersion(90000).ok());
  EXPECT_TRUE(gpu::CheckCudnnVersion(91500).ok());
  EXPECT_EQ(gpu::FormatCudnnVersion(8907), "8.9.7");  // cuDNN 8 counted major * 1000.
  EXPECT_EQ(gpu::CheckCudnnVersion(8907).message(), "cuDNN 8.9.7 is too old: Nereus needs cuDNN 9");
  EXPECT_EQ(gpu::CheckCudnnVersion(100100).message(), "cuDNN 10.1.0 is too new: Nereus needs cuDNN 9");
}

TEST(ConvEngineTest, TheAlgorithmCacheKeyTellsEveryShapeApart) {
  gpu::ConvAlgoKey a;
  a.n = 32, a.c = 64, a.h = a.w = 224, a.k = 64, a.kernel_h = a.kernel_w = 3, a.pad_h = a.pad_w = 1;
  a.stride_h = a.stride_w = a.dilation_h = a.dilation_w = 1, a.workspace_limit = 1 << 30;
  EXPECT_EQ(a.ToString(), "fwd n32 c64 224x224 k64 3x3 pad 1,1 stride 1,1 dil 1,1 g1 fp32 ws 1073741824");
  std::set<gpu::ConvAlgoKey> keys = {a};
  // Every field is part of the key: changing any one makes a new entry.
  std::vector<gpu::ConvAlgoKey> changed(17, a);
  changed[0].pass = gpu::ConvAlgoKey::kBackwardFilter, changed[1].n = 16, changed[2].c = 3, changed[3].h = 112;
  changed[4].w = 112, changed[5].k = 128, changed[6].kernel_h = 1, changed[7].kernel_w = 1, changed[8].pad_h = 0;
  changed[9].pad_w = 0, changed[10].stride_h = 2, changed[11].stride_w = 2, changed[12].dilation_h = 2;
  changed[13].dilation_w = 2, changed[14].group = 2, changed[15].tf32 = true, changed[16].workspace_limit = 0;
  for (const auto& k : changed) {
    EXPECT_FALSE(k == a) << k.ToString();
    EXPECT_TRUE(keys.insert(k).second) << k.ToString();
  }
  gpu::ConvAlgoKey same = a;
  EXPECT_TRUE(same == a);
  EXPECT_FALSE(keys.insert(same).second);
}

// A layer that insists on cuDNN where none can be had (a host stand-in
// device here, as a machine without cuDNN) is refused at set-up, by name; one
// that leaves the choice to the engine runs on im2col.
TEST(ConvEngineTest, EngineCudnnWithoutCudnnIsAnErrorNamingTheLayer) {
  auto device = gpu::Device::CreateStandIn();
  std::mt19937 rng(1);
  Blob bottom(std::vector<int>{1, 2, 4, 4}), top;
  ConvolutionLayer insists(
      ParseLayerParameter("name: 'conv7' type: 'Convolution' convolution_param { num_output: 2 kernel_size: 3 "
                          "engine: CUDNN }"));
  insists.set_rng(&rng);
  insists.set_device(device.get());
  const Status st = insists.SetUp({&bottom}, {&top});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "layer conv7 asks for engine: CUDNN, which this machine cannot give: a host stand-in has no cuDNN "
            "(engine: DEFAULT or CAFFE runs im2col + GEMM)");
  ConvolutionLayer chooses(
      ParseLayerParameter("name: 'conv8' type: 'Convolution' convolution_param { num_output: 2 kernel_size: 3 }"));
  chooses.set_rng(&rng);
  chooses.set_device(device.get());
  ASSERT_TRUE(chooses.SetUp({&bottom}, {&top}).ok());
  EXPECT_EQ(chooses.engine(), gpu::ConvEngine::kIm2col);
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

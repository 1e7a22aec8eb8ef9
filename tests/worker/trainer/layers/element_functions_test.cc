// The per-element (__host__ __device__) functions of the layers with GPU
// code, on the CPU: exact values worked by hand for the ones the CPU loops
// call too, and, for the ones only the GPU kernels call (im2col by column,
// col2im, pooling and LRN gathered per input, the softmax loss gradient),
// bit-for-bit equality with the CPU layer they stand in for, over every
// element of several geometries. What a GPU kernel computes is one of these
// per thread, so this is its arithmetic, checked where there is no GPU.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/accuracy_layer.h"
#include "worker/trainer/layers/batch_norm_layer.h"
#include "worker/trainer/layers/bias_layer.h"
#include "worker/trainer/layers/concat_layer.h"
#include "worker/trainer/layers/eltwise_layer.h"
#include "worker/trainer/layers/im2col.h"
#include "worker/trainer/layers/loss_layers.h"
#include "worker/trainer/layers/lrn_layer.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/layers/pooling_layer.h"
#include "worker/trainer/layers/scale_layer.h"
#include "worker/trainer/layers/shape_layers.h"
#include "worker/trainer/layers/softmax_layer.h"
#include "worker/trainer/math/math_ops.h"

namespace nereus {
namespace {

using test::FillGaussian;
using test::ParseLayerParameter;

std::vector<float> Gaussian(int n, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(*rng);
  return v;
}

TEST(MathOpsTest, MaxMinAreStdMaxMin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float values[] = {-1.0f, 0.0f, -0.0f, 2.5f, nan};
  for (float a : values) {
    for (float b : values) {
      const float mx = ops::Max(a, b), mn = ops::Min(a, b);
      const float smx = std::max(a, b), smn = std::min(a, b);
      EXPECT_EQ(0, std::memcmp(&mx, &smx, sizeof(float))) << a << " " << b;
      EXPECT_EQ(0, std::memcmp(&mn, &smn, sizeof(float))) << a << " " << b;
    }
  }
  EXPECT_EQ(-1.0f, ops::Sign(-3.0f));
  EXPECT_EQ(0.0f, ops::Sign(0.0f));
  EXPECT_EQ(1.0f, ops::Sign(1e-30f));
  EXPECT_EQ(6.25f, ops::Sqr(2.5f));
  EXPECT_EQ(0.5f, ops::Div()(1.0f, 2.0f));
  EXPECT_EQ(std::exp(0.75f), ops::Exp(0.75f));
  EXPECT_EQ(std::pow(3.0f, -0.75f), ops::Pow(3.0f, -0.75f));
}

TEST(NeuronFunctionsTest, ExactValues) {
  EXPECT_EQ(2.0f, ops::ReLUForward(2.0f, 0.25f));
  EXPECT_EQ(-0.5f, ops::ReLUForward(-2.0f, 0.25f));
  EXPECT_EQ(0.0f, ops::ReLUForward(-2.0f, 0.0f));
  EXPECT_EQ(3.0f, ops::ReLUBackward(3.0f, 1.0f, 0.25f));
  EXPECT_EQ(0.75f, ops::ReLUBackward(3.0f, -1.0f, 0.25f));
  EXPECT_EQ(0.75f, ops::ReLUBackward(3.0f, 0.0f, 0.25f));  // x <= 0 takes the slope
  EXPECT_EQ(0.5f, ops::SigmoidForward(0.0f));
  EXPECT_EQ(1.0f, ops::SigmoidBackward(4.0f, 0.5f));  // 4 * 0.5 * (1 - 0.5)
  EXPECT_EQ(3.0f, ops::TanHBackward(4.0f, 0.5f));     // 4 * (1 - 0.25)
  EXPECT_EQ(1u, ops::DropoutKeep(101u, 100u));
  EXPECT_EQ(0u, ops::DropoutKeep(100u, 100u));  // Dropped at the threshold, as Caffe's mask > threshold.
  EXPECT_EQ(3.0f, ops::DropoutApply(1.5f, 1u, 2.0f));
  EXPECT_EQ(0.0f, ops::DropoutApply(1.5f, 0u, 2.0f));
}

TEST(NeuronFunctionsTest, ClipAndSwishExactValues) {
  EXPECT_EQ(-1.0f, ops::ClipForward(-3.0f, -1.0f, 2.0f));
  EXPECT_EQ(0.5f, ops::ClipForward(0.5f, -1.0f, 2.0f));
  EXPECT_EQ(2.0f, ops::ClipForward(7.0f, -1.0f, 2.0f));
  // The gradient passes at both ends, not beyond them.
  EXPECT_EQ(3.0f, ops::ClipBackward(3.0f, -1.0f, -1.0f, 2.0f));
  EXPECT_EQ(3.0f, ops::ClipBackward(3.0f, 2.0f, -1.0f, 2.0f));
  EXPECT_EQ(0.0f, ops::ClipBackward(3.0f, 2.5f, -1.0f, 2.0f));
  EXPECT_EQ(0.0f, ops::ClipBackward(3.0f, -1.5f, -1.0f, 2.0f));
  EXPECT_EQ(0.0f, ops::SwishForward(0.0f, 1.0f));  // 0 * sigmoid(0)
  EXPECT_EQ(1.0f, ops::SwishForward(2.0f, 0.0f));  // beta 0: x / 2
  // At x = 0: y = 0, s = 1/2: dy/dx = beta * 0 + 1/2 * (1 - 0).
  EXPECT_EQ(2.0f, ops::SwishBackward(4.0f, 0.0f, 0.0f, 1.0f));
  // Caffe's formula, dy (beta y + s (1 - beta y)), at x = 2, beta = 0 (s = 1/2, y = 1).
  EXPECT_EQ(1.5f, ops::SwishBackward(3.0f, 2.0f, 1.0f, 0.0f));
}

TEST(BiasFunctionsTest, ExactValues) {
  EXPECT_EQ(3.5f, ops::BiasForward(1.0f, 2.5f));
  // [outer 2, bias_dim 3, inner 4]: element 13 is (1, 0, 1).
  EXPECT_EQ(0, ops::BiasIndex(13, 3, 4));
  EXPECT_EQ(2, ops::BiasIndex(11, 3, 4));
  EXPECT_EQ(0, ops::BiasIndex(5, 1, 4));  // a scalar bias
}

TEST(NeuronFunctionsTest, SigmoidIsTheLogistic) {
  for (float x : {-20.0f, -1.0f, 0.3f, 5.0f}) {
    EXPECT_NEAR(1.0 / (1.0 + std::exp(-static_cast<double>(x))), ops::SigmoidForward(x), 1e-7) << x;
  }
}

// Geometries with padding, strides, dilation and rectangular kernels, in
// ConvGeometry's order: channels, height, width, kernel_h, kernel_w, pad_h,
// pad_w, stride_h, stride_w, dilation_h, dilation_w.
std::vector<layers::ConvGeometry> Geometries() {
  return {{2, 5, 5, 3, 3, 0, 0, 1, 1, 1, 1},
          {3, 7, 6, 3, 3, 1, 1, 2, 2, 1, 1},
          {2, 8, 9, 3, 2, 2, 1, 3, 2, 2, 1},
          {1, 6, 6, 1, 1, 0, 0, 1, 1, 1, 1},
          {2, 11, 11, 5, 5, 2, 2, 4, 4, 1, 1}};
}

TEST(Im2ColFunctionsTest, ColumnsAreIm2Col) {
  std::mt19937 rng(3);
  for (const layers::ConvGeometry& g : Geometries()) {
    const std::vector<float> im = Gaussian(g.channels * g.height * g.width, &rng);
    const int cols = g.output_h() * g.output_w();
    std::vector<float> expected(g.channels * g.kernel_h * g.kernel_w * cols);
    layers::Im2Col(im.data(), g, expected.data());
    std::vector<float> actual(expected.size(), std::numeric_limits<float>::quiet_NaN());
    for (int c = 0; c < g.channels; ++c) {
      for (int h = 0; h < g.output_h(); ++h) {
        for (int w = 0; w < g.output_w(); ++w) layers::Im2ColColumn(im.data(), g, c, h, w, actual.data());
      }
    }
    ASSERT_EQ(0, std::memcmp(expected.data(), actual.data(), expected.size() * sizeof(float)))
        << "kernel " << g.kernel_h << "x" << g.kernel_w << " stride " << g.stride_h;
  }
}

TEST(Im2ColFunctionsTest, GatheredCol2ImIsCol2Im) {
  std::mt19937 rng(4);
  for (const layers::ConvGeometry& g : Geometries()) {
    const std::vector<float> col = Gaussian(g.channels * g.kernel_h * g.kernel_w * g.output_h() * g.output_w(), &rng);
    std::vector<float> expected(g.channels * g.height * g.width);
    layers::Col2Im(col.data(), g, expected.data());
    std::vector<float> actual(expected.size());
    for (int c = 0; c < g.channels; ++c) {
      for (int h = 0; h < g.height; ++h) {
        for (int w = 0; w < g.width; ++w) {
          actual[(c * g.height + h) * g.width + w] = layers::Col2ImAt(col.data(), g, c, h, w);
        }
      }
    }
    // Bit for bit: the same additions in the same order.
    ASSERT_EQ(0, std::memcmp(expected.data(), actual.data(), expected.size() * sizeof(float)))
        << "kernel " << g.kernel_h << "x" << g.kernel_w << " stride " << g.stride_h << " dilation " << g.dilation_h;
  }
}

TEST(PoolingFunctionsTest, WindowValuesByHand) {
  // A 3x3 plane 1..9, kernel 2, stride 1, no padding: 2x2 outputs.
  const float plane[] = {1, 2, 3, 4, 9, 6, 7, 8, 5};
  ops::PoolGeometry g;
  g.height = g.width = 3;
  g.pooled_h = g.pooled_w = 2;
  g.kernel_h = g.kernel_w = 2;
  int argmax = -2;
  EXPECT_EQ(9.0f, ops::MaxPoolAt(plane, g, 0, 0, &argmax));
  EXPECT_EQ(4, argmax);
  EXPECT_EQ(9.0f, ops::MaxPoolAt(plane, g, 1, 1, &argmax));
  EXPECT_EQ(4, argmax);
  EXPECT_EQ(4.0f, ops::AvePoolAt(plane, g, 0, 0));  // (1 + 2 + 4 + 9) / 4
  EXPECT_EQ(7.0f, ops::AvePoolAt(plane, g, 1, 1));  // (9 + 6 + 8 + 5) / 4
  // The centre is every window's argmax: it gathers all four gradients.
  const float top_diff[] = {1, 2, 4, 8};
  const int mask[] = {4, 4, 4, 4};
  EXPECT_EQ(15.0f, ops::MaxPoolBackwardAt(top_diff, mask, g, 1, 1));
  EXPECT_EQ(0.0f, ops::MaxPoolBackwardAt(top_diff, mask, g, 0, 0));
  EXPECT_EQ(3.75f, ops::AvePoolBackwardAt(top_diff, g, 1, 1));  // 15 / 4
  EXPECT_EQ(0.25f, ops::AvePoolBackwardAt(top_diff, g, 0, 0));  // only window (0, 0)
}

// The GPU's gathered backward against the CPU's scattered one, bit for bit.
TEST(PoolingFunctionsTest, GatheredBackwardIsTheCpuBackward) {
  const char* configs[] = {"pool: MAX kernel_size: 3 stride: 2",
                           "pool: MAX kernel_size: 2 stride: 1 pad: 1",
                           "pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 pad_h: 1 pad_w: 0",
                           "pool: AVE kernel_size: 3 stride: 2",
                           "pool: AVE kernel_size: 3 stride: 1 pad: 1",
                           "pool: AVE kernel_size: 2 stride: 2 pad: 1"};
  std::mt19937 rng(5);
  for (const char* config : configs) {
    for (bool mask_top : {false, true}) {
      const bool max = std::string(config).find("MAX") != std::string::npos;
      if (mask_top && !max) continue;
      PoolingLayer layer(
          ParseLayerParameter(std::string("name: 'p' type: 'Pooling' pooling_param { ") + config + " }"));
      Blob bottom(2, 3, 7, 6), top, mask;
      test::FillDistinct(&bottom, &rng);  // A unique maximum in every window.
      std::vector<Blob*> tops = {&top};
      if (mask_top) tops.push_back(&mask);
      ASSERT_TRUE(layer.SetUp({&bottom}, tops).ok()) << config;
      layer.Forward({&bottom}, tops);
      std::vector<float> dy = Gaussian(top.count(), &rng);
      std::copy(dy.begin(), dy.end(), top.mutable_cpu_diff());
      layer.Backward(tops, {true}, {&bottom});
      const ops::PoolGeometry& g = layer.geometry();
      const int planes = 2 * 3;
      const int in_plane = g.height * g.width;
      const int out_plane = g.pooled_h * g.pooled_w;
      // MAX without a mask top keeps its argmax inside the layer: rebuild it
      // with the forward's element function.
      std::vector<int> argmax(top.count());
      for (int p = 0; p < planes; ++p) {
        for (int ph = 0; ph < g.pooled_h; ++ph) {
          for (int pw = 0; pw < g.pooled_w; ++pw) {
            const int o = p * out_plane + ph * g.pooled_w + pw;
            const float value = ops::MaxPoolAt(bottom.cpu_data() + p * in_plane, g, ph, pw, &argmax[o]);
            const float expected = max ? value : ops::AvePoolAt(bottom.cpu_data() + p * in_plane, g, ph, pw);
            ASSERT_EQ(top.cpu_data()[o], expected);
          }
        }
      }
      for (int p = 0; p < planes; ++p) {
        for (int h = 0; h < g.height; ++h) {
          for (int w = 0; w < g.width; ++w) {
            const float* td = top.cpu_diff() + p * out_plane;
            float gathered;
            if (!max) {
              gathered = ops::AvePoolBackwardAt(td, g, h, w);
            } else if (mask_top) {
              gathered = ops::MaxPoolBackwardAt(td, mask.cpu_data() + p * out_plane, g, h, w);
            } else {
              gathered = ops::MaxPoolBackwardAt(td, argmax.data() + p * out_plane, g, h, w);
            }
            const float scattered = bottom.cpu_diff()[p * in_plane + h * g.width + w];
            ASSERT_EQ(0, std::memcmp(&scattered, &gathered, sizeof(float)))
                << config << " plane " << p << " (" << h << ", " << w << "): " << scattered << " vs " << gathered;
          }
        }
      }
    }
  }
}

// LRN's forward and backward rebuilt from the element functions, as the GPU
// kernels run them, equal the layer's CPU result bit for bit.
TEST(LrnFunctionsTest, ElementFunctionsAreTheCpuLayer) {
  for (const char* region : {"ACROSS_CHANNELS", "WITHIN_CHANNEL"}) {
    LRNLayer layer(ParseLayerParameter(std::string("name: 'n' type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 "
                                                   "beta: 0.75 k: 2 norm_region: ") +
                                       region + " }"));
    std::mt19937 rng(6);
    Blob bottom(2, 5, 4, 3), top;
    FillGaussian(&bottom, &rng);
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
    layer.Forward({&bottom}, {&top});
    const std::vector<float> dy = Gaussian(top.count(), &rng);
    std::copy(dy.begin(), dy.end(), top.mutable_cpu_diff());
    layer.Backward({&top}, {true}, {&bottom});

    ops::LrnGeometry g;
    g.channels = 5;
    g.height = 4;
    g.width = 3;
    g.size = 3;
    g.pre_pad = 1;
    g.across = std::string(region) == "ACROSS_CHANNELS";
    const float offset = g.across ? 2.0f : 1.0f;
    const float coefficient = g.across ? 0.5f / 3 : 0.5f / 9;
    const int count = bottom.count(), image = 5 * 4 * 3;
    const float* x = bottom.cpu_data();
    std::vector<float> squares(count), scale(count), ratio(count);
    for (int i = 0; i < count; ++i) squares[i] = ops::Sqr(x[i]);
    auto window = [&](const std::vector<float>& in, int i) {
      const int n = i / image, c = (i % image) / 12, h = (i % 12) / 3, w = i % 3;
      return ops::LrnWindowSumAt(in.data() + n * image, g, c, h, w);
    };
    for (int i = 0; i < count; ++i) scale[i] = ops::LrnScale(window(squares, i), offset, coefficient);
    for (int i = 0; i < count; ++i) {
      const float y = ops::LrnForward(x[i], scale[i], 0.75f);
      ASSERT_EQ(0, std::memcmp(&y, top.cpu_data() + i, sizeof(float))) << region << " top " << i;
      ratio[i] = ops::LrnRatio(dy[i], top.cpu_data()[i], scale[i]);
    }
    const float cache = 2.0f * coefficient * 0.75f;
    for (int i = 0; i < count; ++i) {
      const float dx = ops::LrnBackward(dy[i], x[i], scale[i], window(ratio, i), 0.75f, cache);
      ASSERT_EQ(0, std::memcmp(&dx, bottom.cpu_diff() + i, sizeof(float))) << region << " bottom diff " << i;
    }
  }
}

TEST(SoftmaxFunctionsTest, NormalizerAndLoss) {
  EXPECT_EQ(12.0f, ops::SoftmaxLossNormalizer(caffe::LossParameter::FULL, 3, 4, 5));
  EXPECT_EQ(5.0f, ops::SoftmaxLossNormalizer(caffe::LossParameter::VALID, 3, 4, 5));
  EXPECT_EQ(1.0f, ops::SoftmaxLossNormalizer(caffe::LossParameter::VALID, 3, 4, 0));  // never below 1
  EXPECT_EQ(3.0f, ops::SoftmaxLossNormalizer(caffe::LossParameter::BATCH_SIZE, 3, 4, 5));
  EXPECT_EQ(1.0f, ops::SoftmaxLossNormalizer(caffe::LossParameter::NONE, 3, 4, 5));
  EXPECT_EQ(-std::log(0.25f), ops::SoftmaxLossAt(0.25f));
  EXPECT_EQ(-std::log(FLT_MIN), ops::SoftmaxLossAt(0.0f));               // clamped
  EXPECT_EQ(-0.375f, ops::SoftmaxLossGradAt(0.25f, true, false, 0.5f));  // (0.25 - 1) * 0.5
  EXPECT_EQ(0.125f, ops::SoftmaxLossGradAt(0.25f, false, false, 0.5f));
  EXPECT_EQ(0.0f, ops::SoftmaxLossGradAt(0.25f, true, true, 0.5f));
  const float x[] = {1.0f, 2.0f, 3.0f};
  float y[3];
  ops::SoftmaxAt(x, y, 3, 1);
  const double z = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_NEAR(std::exp(-2.0) / z, y[0], 1e-7);
  EXPECT_NEAR(1.0 / z, y[2], 1e-7);
  const float dy[] = {1.0f, 0.0f, 0.0f};
  float dx[3];
  ops::SoftmaxBackwardAt(y, dy, dx, 3, 1);
  EXPECT_EQ((1.0f - y[0]) * y[0], dx[0]);
  EXPECT_EQ((0.0f - y[0]) * y[1], dx[1]);
}

// SoftmaxWithLoss's gradient, element by element as the GPU kernel makes it,
// against the CPU layer's backward (with an ignored label), bit for bit.
TEST(SoftmaxFunctionsTest, LossGradientIsTheCpuBackward) {
  SoftmaxWithLossLayer layer(
      ParseLayerParameter("name: 'l' type: 'SoftmaxWithLoss' loss_param { ignore_label: 2 normalization: VALID }"));
  std::mt19937 rng(8);
  Blob scores(4, 5, 2, 3), labels(4, 1, 2, 3), loss, prob;
  FillGaussian(&scores, &rng);
  for (int i = 0; i < labels.count(); ++i) labels.mutable_cpu_data()[i] = static_cast<float>((i * 3) % 5);
  ASSERT_TRUE(layer.SetUp({&scores, &labels}, {&loss, &prob}).ok());
  layer.Forward({&scores, &labels}, {&loss, &prob});
  loss.mutable_cpu_diff()[0] = 0.75f;
  layer.Backward({&loss, &prob}, {true, false}, {&scores, &labels});
  int valid = 0;
  for (int i = 0; i < labels.count(); ++i) valid += labels.cpu_data()[i] != 2.0f;
  const float scale = 0.75f / ops::SoftmaxLossNormalizer(caffe::LossParameter::VALID, 4, 6, valid);
  for (int index = 0; index < scores.count(); ++index) {
    const int position = (index / 30) * 6 + index % 6;
    const int c = (index % 30) / 6;
    const int label = static_cast<int>(labels.cpu_data()[position]);
    const float g = ops::SoftmaxLossGradAt(prob.cpu_data()[index], c == label, label == 2, scale);
    ASSERT_EQ(0, std::memcmp(&g, scores.cpu_diff() + index, sizeof(float))) << index;
  }
}

TEST(AccuracyFunctionsTest, TopKWithTies) {
  const float scores[] = {0.1f, 0.5f, 0.5f, 0.2f};
  EXPECT_TRUE(ops::AccuracyHit(scores, 1, 4, 1, 2));   // 1 tie better: top-2
  EXPECT_FALSE(ops::AccuracyHit(scores, 1, 4, 1, 1));  // ties count against the label
  EXPECT_FALSE(ops::AccuracyHit(scores, 1, 4, 3, 2));  // two better
  EXPECT_TRUE(ops::AccuracyHit(scores, 1, 4, 3, 3));
  // Classes `inner` apart.
  const float strided[] = {0.9f, 0.0f, 0.1f, 0.0f};
  EXPECT_TRUE(ops::AccuracyHit(strided, 2, 2, 0, 1));
}

TEST(BatchNormFunctionsTest, ExactValues) {
  EXPECT_EQ(1.5f, ops::BnCenter(2.0f, 0.5f));
  EXPECT_EQ(2.0f, ops::BnStd(3.75f, 0.25f));
  EXPECT_EQ(0.75f, ops::BnNormalize(1.5f, 2.0f));
  EXPECT_EQ(1.5f, ops::BnStatsCount(1.0f, 0.5f));
  // (1 - 0.5 * (2 * 0.25 + 1)) / 2
  EXPECT_EQ(0.125f, ops::BnBackward(1.0f, 2.0f, 0.25f, 1.0f, 0.5f, 2.0f));
  EXPECT_EQ(3.0f, ops::ScaleForward(1.5f, 2.0f));
  EXPECT_EQ(3.5f, ops::ScaleForwardBias(1.5f, 2.0f, 0.5f));
}

TEST(EltwiseFunctionsTest, MaxTiesGoToTheLaterBottom) {
  float top = 0;
  int index = -1;
  ops::EltwiseMaxFirst(1.0f, 1.0f, &top, &index);
  EXPECT_EQ(1, index);
  ops::EltwiseMaxNext(1.0f, 2, &top, &index);  // not strictly greater
  EXPECT_EQ(1, index);
  ops::EltwiseMaxNext(1.5f, 2, &top, &index);
  EXPECT_EQ(2, index);
  EXPECT_EQ(1.5f, top);
  EXPECT_EQ(4.0f, ops::EltwiseMaxBackward(4.0f, 2, 2));
  EXPECT_EQ(0.0f, ops::EltwiseMaxBackward(4.0f, 2, 1));
}

// The neuron layers of neuron_layers.h other than ReLU, Sigmoid, TanH and
// Dropout (NeuronFunctionsTest), on values whose results are exact in binary
// (or exactly a library call's result).
TEST(ElementwiseFunctionsTest, ExactValues) {
  EXPECT_EQ(2.5f, ops::Abs(-2.5f));
  EXPECT_EQ(-3.0f, ops::AbsValBackward(3.0f, -2.0f));
  EXPECT_EQ(0.0f, ops::AbsValBackward(3.0f, 0.0f));  // sign(0) = 0
  EXPECT_EQ(3.0f, ops::AbsValBackward(3.0f, 0.5f));
  // BNLL: log(1 + exp(-100)) rounds to log(1) = 0 on either branch.
  EXPECT_EQ(100.0f, ops::BNLLForward(100.0f));
  EXPECT_EQ(0.0f, ops::BNLLForward(-100.0f));
  EXPECT_EQ(std::log(2.0f), ops::BNLLForward(0.0f));
  EXPECT_EQ(1.0f, ops::BNLLBackward(2.0f, 0.0f));  // 2 * 1 / 2
  // Clamped at 50: exp(50) / (exp(50) + 1) rounds to 1, where exp(1000)
  // would give inf / inf.
  EXPECT_EQ(2.0f, ops::BNLLBackward(2.0f, 1000.0f));
  EXPECT_EQ(2.0f, ops::ELUForward(2.0f, 0.5f));
  EXPECT_EQ(-0.5f, ops::ELUForward(-100.0f, 0.5f));  // 0.5 * (exp(-100) - 1), exp(-100) - 1 rounding to -1
  EXPECT_EQ(4.0f, ops::ELUBackward(4.0f, 1.0f, 1.0f, 0.5f));
  EXPECT_EQ(1.0f, ops::ELUBackward(4.0f, -1.0f, -0.25f, 0.5f));  // 4 * (-0.25 + 0.5)
  EXPECT_EQ(2.0f, ops::ELUBackward(4.0f, 0.0f, 0.0f, 0.5f));     // x = 0 takes alpha
  EXPECT_EQ(1.0f, ops::ExpForward(0.0f, 2.0f, 1.0f));
  EXPECT_EQ(3.0f, ops::ExpForward(0.0f, 2.0f, 3.0f));
  EXPECT_EQ(std::exp(1.5f), ops::ExpForward(1.5f, 1.0f, 1.0f));
  EXPECT_EQ(std::exp(0.75f) * 4.0f, ops::ExpForward(1.5f, 0.5f, 4.0f));
  EXPECT_EQ(6.0f, ops::ExpBackward(2.0f, 3.0f, 1.0f));
  EXPECT_EQ(3.0f, ops::ExpBackward(2.0f, 3.0f, 0.5f));
  EXPECT_EQ(0.0f, ops::LogForward(1.0f, 2.0f, -1.0f, 1.0f));  // log(2 - 1)
  EXPECT_EQ(std::log(4.0f) * 0.5f, ops::LogForward(1.5f, 2.0f, 1.0f, 0.5f));
  EXPECT_EQ(1.5f, ops::LogBackward(3.0f, 1.0f, 2.0f, 0.0f, 0.5f));   // 3 * (2 * 0.5) / (2 * 1)
  EXPECT_EQ(2.0f, ops::LogBackward(1.0f, 0.25f, 4.0f, 1.0f, 1.0f));  // 4 / (4 * 0.25 + 1)
  EXPECT_EQ(4.0f, ops::PowerForward(3.0f, 2.0f, 0.5f, 0.5f));        // (0.5 * 3 + 0.5)^2
  EXPECT_EQ(7.0f, ops::PowerForward(3.0f, 1.0f, 2.0f, 1.0f));        // power 1: no pow
  EXPECT_EQ(0.0f, ops::PowerBackward(5.0f, 3.0f, 0.0f, 2.0f, 1.0f));
  EXPECT_EQ(16.0f, ops::PowerBackward(2.0f, 3.0f, 1.0f, 8.0f, 1.0f));  // 2 * 1 * 8
  EXPECT_EQ(2.0f, ops::PowerBackward(1.0f, 3.0f, 2.0f, 0.5f, 0.5f));   // 1 * (2 * 0.5) * (0.5 * 3 + 0.5)
  EXPECT_EQ(96.0f, ops::PowerBackward(1.0f, 1.5f, 3.0f, 2.0f, 1.0f));  // 3 * 2 * (2 * 1.5 + 1)^2
  EXPECT_EQ(0.0f, ops::ThresholdForward(0.5f, 0.5f));                  // strictly greater
  EXPECT_EQ(1.0f, ops::ThresholdForward(0.625f, 0.5f));
  EXPECT_EQ(0, ops::PReLUChannel(7, 3, 2, false));  // element 7 of 3 channels of 2: (7 / 2) % 3
  EXPECT_EQ(2, ops::PReLUChannel(5, 3, 2, false));
  EXPECT_EQ(0, ops::PReLUChannel(5, 3, 2, true));
}

TEST(ElementwiseFunctionsTest, PReLUSlopeGradientByHand) {
  // 2 images of 2 channels of 2: channel 0 is elements 0, 1, 4, 5.
  const float x[] = {-1.0f, 2.0f, -3.0f, 0.5f, -0.5f, -2.0f, 1.0f, 0.0f};
  const float dy[] = {1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, 1.0f, 1.0f};
  EXPECT_EQ(-10.5f, ops::PReLUSlopeGradient(dy, x, 0, 2, 2, 2, false, 0.5f));  // 0.5 - 1 - 2 - 8
  EXPECT_EQ(-6.0f, ops::PReLUSlopeGradient(dy, x, 1, 2, 2, 2, false, 0.0f));   // x = 0 counts, adding 0
  EXPECT_EQ(-17.0f, ops::PReLUSlopeGradient(dy, x, 0, 2, 2, 2, true, 0.0f));
}

// The slope gradient gathered per slope (the GPU's thread, and now the CPU's
// loop) is the element-order scatter the CPU layer did before, bit for bit.
TEST(ElementwiseFunctionsTest, PReLUSlopeGradientIsTheScatteredSum) {
  std::mt19937 rng(11);
  const int num = 3, channels = 5, dim = 7, count = num * channels * dim;
  const std::vector<float> x = Gaussian(count, &rng), dy = Gaussian(count, &rng);
  for (bool shared : {false, true}) {
    const int slopes = shared ? 1 : channels;
    std::vector<float> scattered(slopes, 0.25f);
    for (int i = 0; i < count; ++i) {
      const int c = (i / dim) % channels / (shared ? channels : 1);
      scattered[c] += dy[i] * x[i] * (x[i] <= 0.0f ? 1.0f : 0.0f);
    }
    for (int c = 0; c < slopes; ++c) {
      const float g = ops::PReLUSlopeGradient(dy.data(), x.data(), c, num, channels, dim, shared, 0.25f);
      EXPECT_EQ(0, std::memcmp(&g, &scattered[c], sizeof(float))) << shared << " " << c;
    }
  }
}

TEST(LossFunctionsTest, ExactValues) {
  EXPECT_EQ(2.0f, ops::EuclideanLossValue(8.0f, 2));  // 8 / 2 / 2
  EXPECT_EQ(-1.5f, ops::EuclideanLossGradScale(-1.0f, 3.0f, 2));
  EXPECT_EQ(0.75f, ops::EuclideanLossGradScale(1.0f, 3.0f, 4));
  EXPECT_TRUE(ops::SigmoidCrossEntropyIgnored(2.0f, true, 2));
  EXPECT_TRUE(ops::SigmoidCrossEntropyIgnored(2.5f, true, 2));  // truncated to int, as Caffe
  EXPECT_FALSE(ops::SigmoidCrossEntropyIgnored(2.0f, false, 2));
  EXPECT_FALSE(ops::SigmoidCrossEntropyIgnored(1.0f, true, 2));
  EXPECT_EQ(-std::log(2.0f), ops::SigmoidCrossEntropyLogLikelihood(0.0f, 0.25f));
  // |x| = 100: log(1 + exp(-100)) rounds to 0, so the exact t x - max(x, 0).
  EXPECT_EQ(0.0f, ops::SigmoidCrossEntropyLogLikelihood(100.0f, 1.0f));
  EXPECT_EQ(-100.0f, ops::SigmoidCrossEntropyLogLikelihood(100.0f, 0.0f));
  EXPECT_EQ(-100.0f, ops::SigmoidCrossEntropyLogLikelihood(-100.0f, 1.0f));
  EXPECT_EQ(0.0f, ops::SigmoidCrossEntropyLogLikelihood(-100.0f, 0.0f));
  EXPECT_EQ(-25.0f, ops::SigmoidCrossEntropyLogLikelihood(100.0f, 0.75f));
  EXPECT_EQ(-1.0f, ops::SigmoidCrossEntropyGradient(0.0f, 1.0f, false, 2.0f));  // (0.5 - 1) * 2
  EXPECT_EQ(0.0f, ops::SigmoidCrossEntropyGradient(0.0f, 1.0f, true, 2.0f));
  EXPECT_EQ(0.25f, ops::SigmoidCrossEntropyGradient(100.0f, 0.75f, false, 1.0f));  // sigmoid(100) = 1
}

TEST(ConcatFunctionsTest, IndexByHand) {
  // A part of 3 along the axis at offset 1 of a whole of 5, inner 2: part
  // element 5 (outer 0, axis 2, inner 1) is whole (0, 3, 1) = 7; element 6
  // (outer 1, axis 0, inner 0) is whole (1, 1, 0) = 12.
  EXPECT_EQ(7, ops::ConcatIndex(5, 2, 5, 3, 1));
  EXPECT_EQ(12, ops::ConcatIndex(6, 2, 5, 3, 1));
  EXPECT_EQ(0, ops::ConcatIndex(0, 2, 5, 3, 0));
}

// Every element of every bottom of a CPU Concat is at ConcatIndex in its top,
// and every top element is reached once; Slice's tops are the same places.
TEST(ConcatFunctionsTest, IndexIsTheCpuConcatAndSlice) {
  std::mt19937 rng(12);
  for (int axis : {0, 1, 2}) {
    Blob a(std::vector<int>{2, 3, 4}), b(std::vector<int>{2, 3, 4}), c(std::vector<int>{2, 3, 4});
    std::vector<int> shape_b = b.shape(), shape_c = c.shape();
    shape_b[axis] = 1;
    shape_c[axis] = 2;
    b.Reshape(shape_b);
    c.Reshape(shape_c);
    FillGaussian(&a, &rng);
    FillGaussian(&b, &rng);
    FillGaussian(&c, &rng);
    ConcatLayer concat(
        ParseLayerParameter("name: 'c' type: 'Concat' concat_param { axis: " + std::to_string(axis) + " }"));
    Blob top;
    ASSERT_TRUE(concat.SetUp({&a, &b, &c}, {&top}).ok());
    concat.Forward({&a, &b, &c}, {&top});
    const int inner = top.count(axis + 1);
    std::vector<int> reached(top.count(), 0);
    int offset = 0;
    for (Blob* part : {&a, &b, &c}) {
      for (int i = 0; i < part->count(); ++i) {
        const int at = ops::ConcatIndex(i, inner, top.shape(axis), part->shape(axis), offset);
        ASSERT_GE(at, 0);
        ASSERT_LT(at, top.count());
        EXPECT_EQ(part->cpu_data()[i], top.cpu_data()[at]) << axis << " " << i;
        ++reached[at];
      }
      offset += part->shape(axis);
    }
    for (int k = 0; k < top.count(); ++k) EXPECT_EQ(1, reached[k]) << axis << " " << k;
    SliceLayer slice(ParseLayerParameter("name: 's' type: 'Slice' slice_param { axis: " + std::to_string(axis) +
                                         " slice_point: 3 slice_point: 4 }"));
    Blob sa, sb, sc;
    ASSERT_TRUE(slice.SetUp({&top}, {&sa, &sb, &sc}).ok());
    slice.Forward({&top}, {&sa, &sb, &sc});
    offset = 0;
    for (Blob* part : {&sa, &sb, &sc}) {
      for (int i = 0; i < part->count(); ++i) {
        EXPECT_EQ(top.cpu_data()[ops::ConcatIndex(i, inner, top.shape(axis), part->shape(axis), offset)],
                  part->cpu_data()[i])
            << axis << " " << i;
      }
      offset += part->shape(axis);
    }
  }
}

TEST(ArgMaxFunctionsTest, RanksByHand) {
  const float x[] = {1.0f, 3.0f, 3.0f, 2.0f};
  float value = 0.0f;
  int index = -1;
  ops::ArgMaxNext(x, 4, 1, true, value, index, &value, &index);
  EXPECT_EQ(3.0f, value);
  EXPECT_EQ(2, index);  // the tie goes to the larger index
  ops::ArgMaxNext(x, 4, 1, false, value, index, &value, &index);
  EXPECT_EQ(1, index);
  ops::ArgMaxNext(x, 4, 1, false, value, index, &value, &index);
  EXPECT_EQ(3, index);
  ops::ArgMaxNext(x, 4, 1, false, value, index, &value, &index);
  EXPECT_EQ(1.0f, value);
  EXPECT_EQ(0, index);
  // Entries 2 apart: 1, 3 (indices 0, 1).
  ops::ArgMaxNext(x, 2, 2, true, 0.0f, -1, &value, &index);
  EXPECT_EQ(3.0f, value);
  EXPECT_EQ(1, index);
  float out[4] = {};
  ops::ArgMaxWrite(out, 1, 0, 1, 1, false, true, 2.5f, 3);  // item 1: index then value
  EXPECT_EQ(3.0f, out[2]);
  EXPECT_EQ(2.5f, out[3]);
}

// The GPU's rank-at-a-time selection (ArgMaxNext, ArgMaxWrite per rank, as
// the kernel runs them) gives the CPU layer's top bit for bit, ties included.
TEST(ArgMaxFunctionsTest, RanksAreTheCpuLayer) {
  std::mt19937 rng(13);
  for (const char* param : {"top_k: 1", "top_k: 3 out_max_val: true", "top_k: 4", "top_k: 2 axis: 1",
                            "top_k: 3 axis: 2 out_max_val: true", "axis: 0"}) {
    Blob bottom(std::vector<int>{3, 4, 5}), top;
    FillGaussian(&bottom, &rng);
    for (int i = 0; i < bottom.count(); ++i) {  // multiples of 0.5: many ties
      bottom.mutable_cpu_data()[i] = std::round(2.0f * bottom.cpu_data()[i]) / 2.0f;
    }
    ArgMaxLayer layer(ParseLayerParameter(std::string("name: 'a' type: 'ArgMax' argmax_param { ") + param + " }"));
    ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok()) << param;
    layer.Forward({&bottom}, {&top});
    const caffe::ArgMaxParameter& p = layer.layer_param().argmax_param();
    const int axis = p.has_axis() ? bottom.CanonicalAxisIndex(p.axis()) : -1;
    const int dim = p.has_axis() ? bottom.shape(axis) : bottom.count(1);
    const int axis_dist = p.has_axis() ? bottom.count(axis) / dim : 1;
    const int top_k = static_cast<int>(p.top_k());
    std::vector<float> out(top.count(), std::numeric_limits<float>::quiet_NaN());
    for (int i = 0; i < bottom.count() / dim; ++i) {
      const float* x = bottom.cpu_data() + (i / axis_dist) * dim * axis_dist + i % axis_dist;
      float value = 0.0f;
      int index = -1;
      for (int j = 0; j < top_k; ++j) {
        ops::ArgMaxNext(x, dim, axis_dist, j == 0, value, index, &value, &index);
        ops::ArgMaxWrite(out.data(), i, j, top_k, axis_dist, p.has_axis(), p.out_max_val(), value, index);
      }
    }
    ASSERT_EQ(0, std::memcmp(out.data(), top.cpu_data(), sizeof(float) * out.size())) << param;
  }
}

}  // namespace
}  // namespace nereus

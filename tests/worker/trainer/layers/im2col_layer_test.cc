// Im2col: exact columns (stride 1; pad and stride 2; a kernel the size of
// the image; another channel axis), col2im's backward values, numeric
// gradients, and configuration errors.
#include "worker/trainer/layers/im2col_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

TEST(Im2colLayerTest, ForwardColumns) {
  // x(h, w) = 3h + w; kernel 2: one row per tap (kh, kw), one column per
  // output position.
  ExpectLayerForward<Im2colLayer>("name: 'i' type: 'Im2col' convolution_param { kernel_size: 2 }", {1, 1, 3, 3},
                                  Iota(9), {1, 4, 2, 2}, {0, 1, 3, 4, 1, 2, 4, 5, 3, 4, 6, 7, 4, 5, 7, 8}, 0.0f);
  // Pad 1, stride 2: tap (kh, kw) of output (oh, ow) reads (2 oh + kh - 1,
  // 2 ow + kw - 1), 0 in the padding.
  ExpectLayerForward<Im2colLayer>("name: 'i' type: 'Im2col' convolution_param { kernel_size: 2 pad: 1 stride: 2 }",
                                  {1, 1, 3, 3}, Iota(9), {1, 4, 2, 2}, {0, 0, 0, 4, 0, 0, 3, 5, 0, 1, 0, 7, 0, 2, 6, 8},
                                  0.0f);
  // kernel_h/kernel_w, two channels: channel 1's taps follow channel 0's.
  ExpectLayerForward<Im2colLayer>("name: 'i' type: 'Im2col' convolution_param { kernel_h: 1 kernel_w: 2 }",
                                  {1, 2, 1, 3}, Iota(6), {1, 4, 1, 2}, {0, 1, 1, 2, 3, 4, 4, 5}, 0.0f);
  // Channel axis 0 of a [2, 3, 3] bottom, kernel 3: one output position,
  // whose column is the image itself.
  ExpectLayerForward<Im2colLayer>("name: 'i' type: 'Im2col' convolution_param { axis: 0 kernel_size: 3 }", {2, 3, 3},
                                  Iota(18), {18, 1, 1}, Iota(18), 0.0f);
  // Axis -3 of [2, 1, 1, 2, 2]: four images of one channel, kernel 1: the
  // identity.
  ExpectLayerForward<Im2colLayer>("name: 'i' type: 'Im2col' convolution_param { axis: -3 kernel_size: 1 }",
                                  {2, 2, 1, 1, 2}, Iota(8), {2, 2, 1, 1, 2}, Iota(8), 0.0f);
}

TEST(Im2colLayerTest, BackwardAddsEveryTapThatReadAnElement) {
  Blob bottom(std::vector<int>{2, 1, 3, 3}), top;
  Im2colLayer layer(ParseLayerParameter("name: 'i' type: 'Im2col' convolution_param { kernel_size: 2 }"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ASSERT_EQ((std::vector<int>{2, 4, 2, 2}), top.shape());
  std::fill(top.mutable_cpu_diff(), top.mutable_cpu_diff() + 16, 1.0f);       // image 0: ones
  std::fill(top.mutable_cpu_diff() + 16, top.mutable_cpu_diff() + 32, 0.5f);  // image 1: halves
  caffe_set(18, 9.0f, bottom.mutable_cpu_diff());                             // overwritten
  layer.Backward({&top}, {true}, {&bottom});
  // Corners are read by 1 tap, edges by 2, the centre by 4.
  EXPECT_EQ((std::vector<float>{1, 2, 1, 2, 4, 2, 1, 2, 1, 0.5f, 1, 0.5f, 1, 2, 1, 0.5f, 1, 0.5f}), BlobDiff(bottom));
}

TEST(Im2colLayerTest, Gradients) {
  for (const char* param : {"kernel_size: 3", "kernel_size: 2 pad: 1 stride: 2", "kernel_h: 3 kernel_w: 2 dilation: 2",
                            "kernel_size: 2 axis: 0"}) {
    SCOPED_TRACE(param);
    const std::vector<int> shape =
        std::string(param).find("axis") != std::string::npos ? std::vector<int>{2, 4, 5} : std::vector<int>{2, 2, 5, 5};
    ExpectLayerGradient<Im2colLayer>(std::string("name: 'i' type: 'Im2col' convolution_param { ") + param + " }", shape,
                                     16, BottomFill::kGaussian, {GradientCheck::kSumOfSquares});
  }
}

TEST(Im2colLayerTest, BadParametersAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<int>& shape) {
    Im2colLayer layer(ParseLayerParameter("name: 'i' type: 'Im2col' " + param));
    return SetUpOn(&layer, {shape});
  };
  ExpectErrorContains(set_up("", {1, 1, 3, 3}),
                      {"layer i (Im2col)", "kernel (or kernel_h and kernel_w) must be given"});
  ExpectErrorContains(set_up("convolution_param { kernel_size: 2 stride: 0 }", {1, 1, 3, 3}),
                      {"layer i (Im2col)", "stride must be > 0"});
  ExpectErrorContains(set_up("convolution_param { kernel_size: 5 }", {1, 1, 3, 3}),
                      {"layer i (Im2col)", "kernel is larger than the padded input"});
  ExpectErrorContains(set_up("convolution_param { kernel_size: 2 }", {1, 1, 3, 3, 3}),
                      {"layer i (Im2col)", "only 2 spatial axes", "has 3 after axis 1"});
  ExpectErrorContains(set_up("convolution_param { kernel_size: 2 axis: 4 }", {1, 1, 3, 3}),
                      {"layer i (Im2col)", "axis 4 is out of range"});
  // Convolution's other fields are not Im2col's: accepted, as Caffe does.
  EXPECT_TRUE(
      set_up("convolution_param { kernel_size: 2 num_output: 7 group: 3 bias_term: false }", {1, 1, 3, 3}).ok());
}

}  // namespace
}  // namespace test
}  // namespace nereus

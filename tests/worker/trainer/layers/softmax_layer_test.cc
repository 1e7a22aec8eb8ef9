// Softmax: exact values (along any axis, without overflow) and gradients.
#include "worker/trainer/layers/softmax_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"

namespace nereus {
namespace test {
namespace {

// softmax([1, 2, 3]) and softmax([1, 1, 1]).
const float kSoftmaxP1 = 0.09003057f, kSoftmaxP2 = 0.24472847f, kSoftmaxP3 = 0.66524096f;

TEST(SoftmaxLayerTest, Forward) {
  Blob bottom(std::vector<int>{2, 3}), top;
  SetBlobData(&bottom, {1, 2, 3, 101, 101, 101});
  SoftmaxLayer layer(ParseLayerParameter("name: 'prob' type: 'Softmax'"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  // Large inputs do not overflow (the max is subtracted first).
  ExpectBlobNear({kSoftmaxP1, kSoftmaxP2, kSoftmaxP3, 1.0f / 3, 1.0f / 3, 1.0f / 3}, top, 1e-6f);
}

TEST(SoftmaxLayerTest, ForwardAlongAxis) {
  // [1, 3, 1, 2]: the softmax runs over the 3 channels at each of 2 positions.
  Blob bottom(1, 3, 1, 2), top;
  SetBlobData(&bottom, {1, 0, 2, 0, 3, 0});
  SoftmaxLayer layer(ParseLayerParameter("name: 'prob' type: 'Softmax'"));
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  layer.Forward({&bottom}, {&top});
  ExpectBlobNear({kSoftmaxP1, 1.0f / 3, kSoftmaxP2, 1.0f / 3, kSoftmaxP3, 1.0f / 3}, top, 1e-6f);
  // axis: -1 on the same data normalises pairs: softmax([1, 0]) etc.
  SoftmaxLayer last(ParseLayerParameter("name: 'prob' type: 'Softmax' softmax_param { axis: -1 }"));
  ASSERT_TRUE(last.SetUp({&bottom}, {&top}).ok());
  last.Forward({&bottom}, {&top});
  const float a = 1.0f / (1.0f + std::exp(-1.0f)), b = 1.0f / (1.0f + std::exp(-2.0f)),
              c = 1.0f / (1.0f + std::exp(-3.0f));
  ExpectBlobNear({a, 1 - a, b, 1 - b, c, 1 - c}, top, 1e-6f);
}

TEST(SoftmaxLayerTest, Gradient) {
  test::ExpectLayerGradient<SoftmaxLayer>("name: 'prob' type: 'Softmax'", {2, 4, 2, 1}, 1701);
}

}  // namespace
}  // namespace test
}  // namespace nereus

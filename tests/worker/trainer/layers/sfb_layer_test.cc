// InnerProduct's sufficient factors (Layer::WeightGradientFactors): after a
// backward, left^T * right over the factors' rows equals the weight gradient
// the layer computed, plain, transposed and with another axis.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/inner_product_layer.h"

namespace nereus {
namespace {

using test::ParseLayerParameter;

void ExpectFactorsGiveTheWeightDiff(const std::string& ip_param, const std::vector<int>& bottom_shape,
                                    int expected_rows) {
  SCOPED_TRACE(ip_param);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-4, 4);
  Blob bottom(bottom_shape);
  Blob top;
  InnerProductLayer layer(
      ParseLayerParameter("name: 'ip' type: 'InnerProduct' inner_product_param { " + ip_param + " }"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
  // Small integers everywhere: every product and sum is exact in float32.
  for (int i = 0; i < bottom.count(); ++i) bottom.mutable_cpu_data()[i] = static_cast<float>(small(rng));
  layer.Forward({&bottom}, {&top});
  for (int i = 0; i < top.count(); ++i) top.mutable_cpu_diff()[i] = static_cast<float>(small(rng));
  Blob& w = *layer.blobs()[0];
  for (int i = 0; i < w.count(); ++i) w.mutable_cpu_diff()[i] = 0.0f;
  layer.Backward({&top}, {false}, {&bottom});

  Layer::GradientFactors f;
  ASSERT_TRUE(layer.WeightGradientFactors(0, {&bottom}, {&top}, &f));
  EXPECT_EQ(f.rows, expected_rows);
  // The blobs are named, which side of each the layer's backward read.
  const bool transposed = ip_param.find("transpose: true") != std::string::npos;
  EXPECT_EQ(f.left.blob, transposed ? &bottom : &top);
  EXPECT_EQ(f.left.diff, !transposed);
  EXPECT_EQ(f.right.blob, transposed ? &top : &bottom);
  EXPECT_EQ(f.right.diff, transposed);
  const int rows = w.shape(0), cols = w.shape(1);
  const float* left = f.left.cpu();
  const float* right = f.right.cpu();
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      float g = 0;
      for (int s = 0; s < f.rows; ++s) g += left[s * rows + i] * right[s * cols + j];
      ASSERT_EQ(g, w.cpu_diff()[i * cols + j]) << i << ", " << j;
    }
  // The bias is not a product of factors.
  EXPECT_FALSE(layer.WeightGradientFactors(1, {&bottom}, {&top}, &f));
}

TEST(InnerProductFactorsTest, PlainTransposedAndOtherAxis) {
  ExpectFactorsGiveTheWeightDiff("num_output: 3", {4, 5}, 4);                  // W 3 x 5: top diff, bottom.
  ExpectFactorsGiveTheWeightDiff("num_output: 3 transpose: true", {4, 5}, 4);  // W 5 x 3: bottom, top diff.
  ExpectFactorsGiveTheWeightDiff("num_output: 2", {2, 3, 2, 2}, 2);            // axis 1: 12 inputs per row.
  ExpectFactorsGiveTheWeightDiff("num_output: 2 axis: 2", {2, 3, 2, 2}, 6);    // axis 2: 6 rows of 4 inputs.
}

}  // namespace
}  // namespace nereus

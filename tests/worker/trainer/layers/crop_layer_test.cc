// Crop: exact values (one offset, one per axis, from axis 0 or 1),
// backward's scatter, numeric gradients, bottom 1's zero gradient, and
// configuration errors.
#include "worker/trainer/layers/crop_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"

namespace nereus {
namespace test {
namespace {

// Crop of a bottom of `shape` holding 0, 1, 2, ... to `reference`'s shape.
std::vector<float> CropIota(const std::string& param, const std::vector<int>& shape, const std::vector<int>& reference,
                            std::vector<int>* top_shape = nullptr) {
  Blob bottom(shape), ref(reference), top;
  std::iota(bottom.mutable_cpu_data(), bottom.mutable_cpu_data() + bottom.count(), 0.0f);
  CropLayer layer(ParseLayerParameter("name: 'c' type: 'Crop' " + param));
  const Status s = layer.SetUp({&bottom, &ref}, {&top});
  EXPECT_TRUE(s.ok()) << s;
  layer.Forward({&bottom, &ref}, {&top});
  if (top_shape != nullptr) *top_shape = top.shape();
  return BlobData(top);
}

TEST(CropLayerTest, ForwardValues) {
  // x(h, w) = 4h + w on a 4x4 image.
  std::vector<int> shape;
  // No offset: the top-left corner; axes 0 and 1 kept (the default axis 2).
  EXPECT_EQ((std::vector<float>{0, 1, 2, 4, 5, 6}), CropIota("", {1, 1, 4, 4}, {5, 7, 2, 3}, &shape));
  EXPECT_EQ((std::vector<int>{1, 1, 2, 3}), shape);
  // One offset for both cropped axes.
  EXPECT_EQ((std::vector<float>{5, 6, 7, 9, 10, 11}), CropIota("crop_param { offset: 1 }", {1, 1, 4, 4}, {1, 1, 2, 3}));
  // One offset per cropped axis: rows from 2, columns from 0.
  EXPECT_EQ((std::vector<float>{8, 9, 12, 13}),
            CropIota("crop_param { offset: 2 offset: 0 }", {1, 1, 4, 4}, {1, 1, 2, 2}));
  // From axis 1 (channels cropped too) of [2, 3, 2, 2]: channel 1, the
  // second column of each row.
  EXPECT_EQ((std::vector<float>{5, 7, 17, 19}),
            CropIota("crop_param { axis: 1 offset: 1 offset: 0 offset: 1 }", {2, 3, 2, 2}, {9, 1, 2, 1}, &shape));
  EXPECT_EQ((std::vector<int>{2, 1, 2, 1}), shape);
  // Axis -1: the last axis only.
  EXPECT_EQ((std::vector<float>{2, 3, 6, 7}), CropIota("crop_param { axis: -1 offset: 2 }", {2, 4}, {1, 2}));
  // Axis 0: every axis.
  EXPECT_EQ((std::vector<float>{7}), CropIota("crop_param { axis: 0 offset: 1 offset: 3 }", {2, 4}, {1, 1}));
}

TEST(CropLayerTest, BackwardScattersTheTopGradient) {
  Blob bottom(std::vector<int>{1, 1, 3, 3}), ref(std::vector<int>{1, 1, 2, 2}), top;
  CropLayer layer(ParseLayerParameter("name: 'c' type: 'Crop' crop_param { offset: 1 offset: 0 }"));
  ASSERT_TRUE(layer.SetUp({&bottom, &ref}, {&top}).ok());
  layer.Forward({&bottom, &ref}, {&top});
  SetBlobData(&top, {0, 0, 0, 0});
  for (int i = 0; i < 4; ++i) top.mutable_cpu_diff()[i] = static_cast<float>(i + 1);
  caffe_set(9, 5.0f, bottom.mutable_cpu_diff());  // overwritten, not added to
  caffe_set(4, 5.0f, ref.mutable_cpu_diff());
  layer.Backward({&top}, {true, true}, {&bottom, &ref});
  EXPECT_EQ((std::vector<float>{0, 0, 0, 1, 2, 0, 3, 4, 0}), BlobDiff(bottom));
  EXPECT_EQ((std::vector<float>{0, 0, 0, 0}), BlobDiff(ref));  // a shape only
  // A net may ask for it (the reference can come from a trained branch).
  EXPECT_TRUE(layer.AllowForceBackward(1));
}

// A reference that a trained branch produces (FCN-style nets crop to a
// convolution's output): the net is built and trains; the reference's
// gradient through the Crop is 0, so the convolution's weights get none.
TEST(CropLayerTest, AReferenceFromATrainedBranchIsAccepted) {
  caffe::NetParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "name: 'n' force_backward: true "
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 dim: 1 dim: 6 dim: 6 } } } "
      "layer { name: 'ref' type: 'Convolution' bottom: 'data' top: 'ref' "
      "  convolution_param { num_output: 1 kernel_size: 3 weight_filler { type: 'constant' value: 1 } } } "
      "layer { name: 'crop' type: 'Crop' bottom: 'data' bottom: 'ref' top: 'crop' crop_param { offset: 1 } } "
      "layer { name: 'loss' type: 'Reduction' bottom: 'crop' top: 'loss' loss_weight: 1 }",
      &param));
  auto net = Net::Create(param, DefaultLayerRegistry());
  ASSERT_TRUE(net.ok()) << net.status();
  ASSERT_TRUE((*net)->ForwardBackward().ok());
  const std::vector<std::string>& names = (*net)->layer_names();
  const auto ref = std::find(names.begin(), names.end(), "ref");
  ASSERT_NE(names.end(), ref);  // (a Split of 'data' comes before it)
  const Blob& weights = *(*net)->layers()[ref - names.begin()]->blobs()[0];
  EXPECT_EQ(std::vector<float>(9, 0.0f), BlobDiff(weights));
}

TEST(CropLayerTest, Gradient) {
  for (const char* param : {"crop_param { offset: 1 }", "crop_param { axis: 1 offset: 0 offset: 1 offset: 2 }"}) {
    SCOPED_TRACE(param);
    std::mt19937 rng(13);
    Blob bottom(std::vector<int>{2, 3, 4, 5}), ref(std::vector<int>{2, 2, 3, 3}), top;
    FillGaussian(&bottom, &rng);
    CropLayer layer(ParseLayerParameter(std::string("name: 'c' type: 'Crop' ") + param));
    ExpectGradient(&layer, {&bottom, &ref}, {&top}, {GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, 0});
  }
}

TEST(CropLayerTest, BadParametersAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<std::vector<int>>& shapes) {
    CropLayer layer(ParseLayerParameter("name: 'c' type: 'Crop' " + param));
    return SetUpOn(&layer, shapes);
  };
  ExpectErrorContains(
      set_up("crop_param { offset: 2 }", {{1, 1, 4, 4}, {1, 1, 3, 3}}),
      {"layer c (Crop)", "the crop of axis 2 is out of bounds: size 3 at offset 2 of a bottom of size 4"});
  ExpectErrorContains(set_up("", {{1, 1, 4, 4}, {1, 1, 5, 3}}), {"layer c (Crop)", "axis 2 is out of bounds"});
  ExpectErrorContains(set_up("crop_param { offset: 1 offset: 1 offset: 1 }", {{1, 1, 4, 4}, {1, 1, 2, 2}}),
                      {"layer c (Crop)", "3 offsets but 2 axes are cropped"});
  ExpectErrorContains(set_up("crop_param { axis: 4 }", {{1, 1, 4, 4}, {1, 1, 2, 2}}),
                      {"layer c (Crop)", "axis 4 is out of range"});
  ExpectErrorContains(set_up("", {{1, 1, 4, 4}, {1, 2}}), {"layer c (Crop)", "fewer than bottom 0's 4"});
  // One bottom is a count error.
  CropLayer one(ParseLayerParameter("name: 'c' type: 'Crop'"));
  ExpectErrorContains(SetUpOn(&one, {{1, 1, 4, 4}}), {"c"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

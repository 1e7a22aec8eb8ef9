#include "bench/sim/models.h"

#include <gtest/gtest.h>

namespace nereus {
namespace bench {
namespace {

TEST(ModelsTest, ParameterCountsMatchPublishedTotals) {
  EXPECT_EQ(ModelByName("vgg19")->parameters(), 143667240u);
  EXPECT_EQ(ModelByName("resnet50")->parameters(), 25557032u);
  EXPECT_EQ(ModelByName("lenet")->parameters(), 431080u);
  // VGG19-22K (Poseidon): fc8 becomes 4096 x 21841, about 229M in all.
  EXPECT_EQ(ModelByName("vgg19_22k")->parameters(), 143667240u - 4097000u + 89482577u);
  EXPECT_FALSE(ModelByName("alexnet").ok());
}

TEST(ModelsTest, LayerStructure) {
  auto vgg = ModelByName("vgg19").value();
  ASSERT_EQ(vgg.layers.size(), 19u);
  EXPECT_EQ(vgg.layers[16].name, "fc6");
  EXPECT_EQ(vgg.layers[16].params[0], (std::vector<int64_t>{4096, 25088}));  // 102,760,448 weights
  // About 19.6 GMACs per image forward.
  EXPECT_NEAR(vgg.forward_flops() / 2e9, 19.6, 0.1);
  auto resnet = ModelByName("resnet50").value();
  EXPECT_EQ(resnet.layers.size(), 54u);  // 53 convolutions and the classifier.
  // ResNet-50 v1 as in Caffe (stride in the first 1x1): the paper's 3.8 billion multiply-adds.
  EXPECT_NEAR(resnet.forward_flops() / 2e9, 3.86, 0.01);
}

TEST(ModelsTest, InceptionV3MatchesThePaper) {
  auto inception = ModelByName("inception_v3").value();
  // 94 convolutions (batch-norm scale and shift each) and the classifier,
  // worked out by hand from the paper's modules; Keras counts 23,851,784
  // with its moving statistics and without the scale.
  EXPECT_EQ(inception.layers.size(), 95u);
  EXPECT_EQ(inception.parameters(), 23834568u);
  // The paper's "5 billion multiply-adds"; the usual count is 5.72 G.
  EXPECT_NEAR(inception.forward_flops() / 2e9, 5.713, 0.001);
  EXPECT_EQ(inception.layers.back().params[0], (std::vector<int64_t>{1000, 2048}));
  EXPECT_EQ(inception.layers[5].name, "mixed5b_1x1");
}

}  // namespace
}  // namespace bench
}  // namespace nereus

#include "worker/trainer/data/memory_data_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/net_test_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace data {
namespace {

const char kParam[] =
    "name: 'mem' type: 'MemoryData' top: 'data' top: 'label' "
    "memory_data_param { batch_size: 2 channels: 1 height: 2 width: 3 }";

class MemoryDataLayerTest : public ::testing::Test {
 protected:
  Status SetUpLayer(Layer* layer) {
    layer->set_rng(&rng_);
    return layer->SetUp({}, {&data_, &label_});
  }
  std::mt19937 rng_{3};
  Blob data_, label_;
};

// Reset hands the layer arrays; Forwards read them batch by batch, wrapping.
TEST_F(MemoryDataLayerTest, ResetArraysAreReadBatchByBatchAndWrap) {
  MemoryDataLayer layer(test::ParseLayerParameter(kParam));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(data_.shape(), (std::vector<int>{2, 1, 2, 3}));
  EXPECT_EQ(label_.shape(), (std::vector<int>{2}));
  std::vector<float> values(4 * 6), labels = {7, 8, 9, 10};
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  ASSERT_TRUE(layer.Reset(values.data(), labels.data(), 4).ok());
  for (int pass = 0; pass < 3; ++pass) {
    layer.Forward({}, {&data_, &label_});
    ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
    const int first = (pass % 2) * 2;
    EXPECT_EQ(label_.cpu_data()[0], labels[first]);
    EXPECT_EQ(label_.cpu_data()[1], labels[first + 1]);
    for (int i = 0; i < 12; ++i) ASSERT_EQ(data_.cpu_data()[i], values[first * 6 + i]);
  }
  // A new Reset starts again at its first item.
  std::vector<float> other(2 * 6, -1.0f), other_labels = {1, 2};
  ASSERT_TRUE(layer.Reset(other.data(), other_labels.data(), 2).ok());
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(label_.cpu_data()[0], 1.0f);
  EXPECT_EQ(data_.cpu_data()[11], -1.0f);
}

// AddDatumVector transforms Datum records (here a scale and a centred crop)
// into arrays the layer owns.
TEST_F(MemoryDataLayerTest, AddDatumVectorTransformsAndOwnsItsCopy) {
  caffe::LayerParameter param = test::ParseLayerParameter(kParam);
  param.set_phase(caffe::TEST);
  param.mutable_transform_param()->set_scale(0.5f);
  param.mutable_transform_param()->set_crop_size(2);
  param.mutable_memory_data_param()->set_width(2);
  MemoryDataLayer layer(param);
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  {
    std::vector<caffe::Datum> datums(2);
    for (int i = 0; i < 2; ++i) {
      datums[i].set_channels(1);
      datums[i].set_height(2);
      datums[i].set_width(4);
      datums[i].set_data(std::string{static_cast<char>(10 * i), static_cast<char>(10 * i + 1),
                                     static_cast<char>(10 * i + 2), static_cast<char>(10 * i + 3),
                                     static_cast<char>(10 * i + 4), static_cast<char>(10 * i + 5),
                                     static_cast<char>(10 * i + 6), static_cast<char>(10 * i + 7)});
      datums[i].set_label(i + 3);
    }
    ASSERT_TRUE(layer.AddDatumVector(datums).ok());
  }  // The Datum records are gone; the layer kept its copy.
  layer.Forward({}, {&data_, &label_});
  ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  // Centred crop of 2x4 to 2x2: columns 1 and 2.
  EXPECT_EQ(std::vector<float>(data_.cpu_data(), data_.cpu_data() + 8),
            (std::vector<float>{0.5f, 1.0f, 2.5f, 3.0f, 5.5f, 6.0f, 7.5f, 8.0f}));
  EXPECT_EQ(label_.cpu_data()[1], 4.0f);
}

TEST_F(MemoryDataLayerTest, MisuseIsAnErrorNotACrash) {
  MemoryDataLayer layer(test::ParseLayerParameter(kParam));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(layer.forward_error().ToString(),
            "FAILED_PRECONDITION: layer mem (MemoryData): no data: hand the layer its arrays (Reset) or Datum "
            "records (AddDatumVector) first");
  std::vector<float> values(3 * 6), labels(3);
  EXPECT_EQ(layer.Reset(values.data(), labels.data(), 3).message(),
            "layer mem (MemoryData): Reset with 3 items; give a positive multiple of the batch size 2");
  EXPECT_FALSE(layer.Reset(nullptr, labels.data(), 2).ok());
  std::vector<caffe::Datum> wrong(2);
  for (auto& d : wrong) {
    d.set_channels(3);
    d.set_height(2);
    d.set_width(3);
    d.set_data(std::string(18, '\0'));
  }
  EXPECT_EQ(layer.AddDatumVector(wrong).message(),
            "layer mem (MemoryData): Datum 0 given to AddDatumVector: transformed to 3x2x3, but "
            "memory_data_param says 1x2x3");
  ASSERT_TRUE(layer.set_batch_size(3).ok());
  EXPECT_TRUE(layer.Reset(values.data(), labels.data(), 3).ok());
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(data_.shape(), (std::vector<int>{3, 1, 2, 3}));
  MemoryDataLayer unsized(test::ParseLayerParameter("name: 'mem' type: 'MemoryData' top: 'data' top: 'label'"));
  EXPECT_NE(SetUpLayer(&unsized).message().find("must be given and positive"), std::string::npos);
}

// Through the trainer's API: find the layer in a Net, feed it, train on it;
// a label the loss cannot take names the item.
TEST_F(MemoryDataLayerTest, FedThroughTheNet) {
  auto net = test::TrainNetFromText(std::string("layer { ") + kParam +
                                        " }\n"
                                        "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip' "
                                        "inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }\n"
                                        "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                                        "top: 'loss' }\n",
                                    "net.prototxt");
  ASSERT_TRUE(net.ok()) << net.status();
  auto memory = AsMemoryDataLayer((*net)->layer_by_name("mem"));
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(AsMemoryDataLayer((*net)->layer_by_name("ip")).status().message(),
            "layer ip is a InnerProduct layer, not MemoryData");
  std::vector<float> values(4 * 6, 0.25f), labels = {0, 1, 2, 5};
  ASSERT_TRUE((*memory)->Reset(values.data(), labels.data(), 4).ok());
  auto loss = (*net)->Forward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_GT(*loss, 0.0f);
  EXPECT_EQ((*net)->Forward().status().message(),
            "layer mem (MemoryData): item 3 of the data given: label 5 is out of range for layer loss "
            "(SoftmaxWithLoss), which takes labels 0 to 2");
}

}  // namespace
}  // namespace data
}  // namespace nereus

#include "worker/trainer/data/image_data_layer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/data_layer_fixture.h"
#include "tests/support/gradient_checker.h"
#include "tests/support/image_test_util.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/data/image_io.h"
#include "worker/trainer/data/register_data_layers.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {
namespace data {
namespace {

// Pixel (h, w, c) of image i (BGR as written).
std::uint8_t Pixel(int i, int h, int w, int c) { return static_cast<std::uint8_t>(i * 20 + h * 4 + w + c * 100); }

class ImageDataLayerTest : public test::DataLayerFixture {
 protected:
  ImageDataLayerTest() : DataLayerFixture(99) {}

  static constexpr int kImages = 7;

  void SetUp() override {
    NEREUS_IMAGES_OR_SKIP();
    std::filesystem::create_directory(dir_.File("images"));
    std::string list;
    for (int i = 0; i < kImages; ++i) {
      test::WriteImage(dir_.File("images/" + std::to_string(i) + ".png"),
                       test::MakeImage(3, 4, 3, [i](int h, int w, int c) { return Pixel(i, h, w, c); }));
      list += std::to_string(i) + ".png " + std::to_string(i) + "\n";
    }
    test::WriteText(dir_.File("list.txt"), list);
  }

  caffe::LayerParameter Param(const std::string& extra) const {
    return test::ParseLayerParameter(
        "name: 'images' type: 'ImageData' top: 'data' top: 'label' phase: TRAIN image_data_param { source: '" +
        dir_.File("list.txt") + "' root_folder: '" + dir_.path() + "/images/' " + extra + " }");
  }
};

TEST_F(ImageDataLayerTest, ReadsTheListInOrderWithTheImagesPixelsAndWraps) {
  ImageDataLayer layer(Param("batch_size: 3"));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(data_.shape(), (std::vector<int>{3, 3, 3, 4}));
  EXPECT_EQ(label_.shape(), (std::vector<int>{3}));
  EXPECT_EQ(ForwardLabelsOk(&layer), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(ForwardLabelsOk(&layer), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(ForwardLabelsOk(&layer), (std::vector<int>{6, 0, 1}));
  // Item 0 is image 6: planar channels, BGR as decoded.
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 4; ++w) ASSERT_EQ(data_.cpu_data()[(c * 3 + h) * 4 + w], Pixel(6, h, w, c));
}

TEST_F(ImageDataLayerTest, ResizeGrayAndTransformAsCaffe) {
  caffe::LayerParameter param = Param("batch_size: 2 new_height: 6 new_width: 8 is_color: false");
  param.mutable_transform_param()->set_scale(0.5f);
  param.mutable_transform_param()->add_mean_value(10);
  ImageDataLayer layer(param);
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(data_.shape(), (std::vector<int>{2, 1, 6, 8}));
  ForwardLabelsOk(&layer);
  for (int i = 0; i < 2; ++i) {
    // Caffe: imread(GRAYSCALE), cv::resize to 8 wide, 6 high, then
    // (pixel - mean) * scale.
    auto want = ReadImageToDatum(dir_.File("images/" + std::to_string(i) + ".png"), i, 6, 8, false);
    ASSERT_TRUE(want.ok()) << want.status();
    for (int p = 0; p < 48; ++p) {
      ASSERT_EQ(data_.cpu_data()[i * 48 + p], (static_cast<std::uint8_t>(want->data()[p]) - 10.0f) * 0.5f) << p;
    }
  }
  // A crop in TEST is centred.
  caffe::LayerParameter crop = Param("batch_size: 1");
  crop.set_phase(caffe::TEST);
  crop.mutable_transform_param()->set_crop_size(2);
  ImageDataLayer cropped(crop);
  ASSERT_TRUE(SetUpLayer(&cropped).ok());
  ForwardLabelsOk(&cropped);
  EXPECT_EQ(data_.shape(), (std::vector<int>{1, 3, 2, 2}));
  EXPECT_EQ(data_.cpu_data()[0], Pixel(0, 0, 1, 0));  // h_off (3-2)/2 = 0, w_off (4-2)/2 = 1.
}

TEST_F(ImageDataLayerTest, RootFolderIsPrependedAsWritten) {
  // Without root_folder the list's paths are relative to the working
  // directory: here they name nothing.
  caffe::LayerParameter param = Param("batch_size: 1");
  param.mutable_image_data_param()->clear_root_folder();
  ImageDataLayer layer(param);
  Status st = SetUpLayer(&layer);
  EXPECT_EQ(st.message(), "layer images (ImageData): image list '" + dir_.File("list.txt") +
                              "' line 1 (image '0.png'): cannot open image file '0.png': No such file or directory");
  // A root folder is a plain prefix, as in Caffe.
  caffe::LayerParameter prefixed = Param("batch_size: 1");
  prefixed.mutable_image_data_param()->set_root_folder(dir_.path() + "/images/");
  ImageDataLayer ok(prefixed);
  EXPECT_TRUE(SetUpLayer(&ok).ok());
}

TEST_F(ImageDataLayerTest, ShuffleVisitsEveryImageOncePerPassInANewOrder) {
  ImageDataLayer layer(Param("batch_size: 7 shuffle: true"));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  std::vector<std::vector<int>> passes;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<int> labels = ForwardLabelsOk(&layer);
    // Each image's pixels travel with its label.
    for (int n = 0; n < 7; ++n) ASSERT_EQ(data_.cpu_data()[n * 36], Pixel(labels[n], 0, 0, 0));
    passes.push_back(labels);
    std::sort(labels.begin(), labels.end());
    EXPECT_EQ(labels, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  }
  EXPECT_FALSE(passes[0] == passes[1] && passes[1] == passes[2]) << "never reshuffled";
  EXPECT_NE(passes[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST_F(ImageDataLayerTest, TwoShardsAreDisjointAndCoverTheList) {
  LayerRegistry registry;
  RegisterDataLayers(&registry, DataLayerOptions{1, 2});
  auto one = registry.Create(Param("batch_size: 3"));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(SetUpLayer(one->get()).ok());
  EXPECT_EQ(ForwardLabelsOk(one->get()), (std::vector<int>{1, 3, 5}));
  ImageDataLayer zero(Param("batch_size: 4"), DataLayerOptions{0, 2});
  ASSERT_TRUE(SetUpLayer(&zero).ok());
  EXPECT_EQ(zero.shard_size(), 4u);
  EXPECT_EQ(ForwardLabelsOk(&zero), (std::vector<int>{0, 2, 4, 6}));
  // A TEST-phase layer reads the whole list, whatever the worker.
  caffe::LayerParameter test_phase = Param("batch_size: 7");
  test_phase.set_phase(caffe::TEST);
  auto whole = registry.Create(test_phase);
  ASSERT_TRUE(whole.ok());
  ASSERT_TRUE(SetUpLayer(whole->get()).ok());
  EXPECT_EQ(ForwardLabelsOk(whole->get()), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST_F(ImageDataLayerTest, BadImagesAndLinesAreErrorsNamingTheListLine) {
  // An image that does not decode: the Forward that needs it says so, after
  // the good batches.
  test::WriteText(dir_.File("images/broken.png"), "not a png");
  test::WriteText(dir_.File("list.txt"), "0.png 0\n1.png 1\nbroken.png 2\n3.png 3\n");
  ImageDataLayer layer(Param("batch_size: 2"));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(ForwardLabelsOk(&layer), (std::vector<int>{0, 1}));
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(layer.forward_error().ToString(),
            "DATA_LOSS: layer images (ImageData): image list '" + dir_.File("list.txt") + "' line 3 (image '" +
                dir_.path() + "/images/broken.png'): image file '" + dir_.path() +
                "/images/broken.png' does not decode as an image (9 bytes in no format OpenCV reads)");
  // An image of another size than the first.
  test::WriteImage(dir_.File("images/wide.png"), test::MakeImage(3, 9, 3, [](int, int, int) { return 0; }));
  test::WriteText(dir_.File("list.txt"), "0.png 0\nwide.png 1\n");
  ImageDataLayer mixed(Param("batch_size: 2"));
  ASSERT_TRUE(SetUpLayer(&mixed).ok());
  mixed.Forward({}, {&data_, &label_});
  EXPECT_NE(mixed.forward_error().message().find("line 2 (image '" + dir_.path() +
                                                 "/images/wide.png'): image of shape 3x3x9; the first image read, "
                                                 "whose shape every image must have, is 3x3x4"),
            std::string::npos)
      << mixed.forward_error();
  // A line without a label: a set-up error.
  test::WriteText(dir_.File("list.txt"), "0.png 0\n1.png\n");
  ImageDataLayer unlabeled(Param("batch_size: 1"));
  EXPECT_EQ(SetUpLayer(&unlabeled).message(), "layer images (ImageData): image list '" + dir_.File("list.txt") +
                                                  "' line 2: '1.png' has no label (each line is 'PATH LABEL')");
}

TEST_F(ImageDataLayerTest, ConfigurationErrorsNameTheField) {
  ImageDataLayer half(Param("batch_size: 1 new_height: 4"));
  EXPECT_NE(SetUpLayer(&half).message().find("give both new_height and new_width"), std::string::npos);
  ImageDataLayer old(Param("batch_size: 1 crop_size: 2"));
  EXPECT_NE(SetUpLayer(&old).message().find("deprecated; put them in transform_param"), std::string::npos);
  caffe::LayerParameter no_source = Param("batch_size: 1");
  no_source.mutable_image_data_param()->clear_source();
  ImageDataLayer none(no_source);
  EXPECT_NE(SetUpLayer(&none).message().find("image_data_param.source is required"), std::string::npos);
}

// In a build without OpenCV the image layers refuse to run, saying why.
TEST(ImageDataWithoutOpenCvTest, RefusesToRunSayingWhy) {
  if (ImageCodecsBuilt()) GTEST_SKIP() << "built with OpenCV: this checks a build without it";
  test::TempDir dir;
  test::WriteText(dir.File("list.txt"), "a.png 0\n");
  caffe::LayerParameter param;
  param.set_name("images");
  param.mutable_image_data_param()->set_source(dir.File("list.txt"));
  test::ExpectRefusedWithoutOpenCv<ImageDataLayer>(param);
}

}  // namespace
}  // namespace data
}  // namespace nereus

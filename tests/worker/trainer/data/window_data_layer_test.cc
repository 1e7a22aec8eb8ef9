// WindowData on a tiny window file: two uniformly coloured images, so every
// warped window is the colour of its image, background first, with Caffe's
// context padding geometry.
#include "worker/trainer/data/window_data_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/data_layer_fixture.h"
#include "tests/support/gradient_checker.h"
#include "tests/support/image_test_util.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/blob.h"

namespace nereus {
namespace data {
namespace {

// Image i is uniformly BGR (kColor[i][0], [1], [2]).
constexpr int kColor[2][3] = {{10, 20, 30}, {40, 50, 60}};

class WindowDataLayerTest : public test::DataLayerFixture {
 protected:
  WindowDataLayerTest() : DataLayerFixture(21) {}

  void SetUp() override {
    NEREUS_IMAGES_OR_SKIP();
    for (int i = 0; i < 2; ++i) {
      test::WriteImage(dir_.File("im" + std::to_string(i) + ".png"),
                       test::MakeImage(20, 24, 3, [i](int, int, int c) { return kColor[i][c]; }));
    }
    // Image 0: two background windows (overlap < 0.5; the second's class
    // 3 becomes 0); image 1: three foreground windows (overlap >= 0.5) of
    // classes 1 and 2.
    WriteWindows(
        "# 0\nim0.png\n3\n20\n24\n2\n"
        "0 0.1 0 0 23 19\n"
        "3 0.3 4 4 11 11\n"
        "# 1\nim1.png\n3\n20\n24\n3\n"
        "1 0.9 0 0 23 19\n"
        "2 0.7 2 2 9 9\n"
        "1 0.5 0 0 3 3\n");
  }
  void WriteWindows(const std::string& text) { test::WriteText(dir_.File("windows.txt"), text); }

  caffe::LayerParameter Param(const std::string& extra = "", int crop = 8) const {
    return test::ParseLayerParameter(
        "name: 'win' type: 'WindowData' top: 'data' top: 'label' phase: TRAIN "
        "transform_param { crop_size: " +
        std::to_string(crop) + " } window_data_param { source: '" + dir_.File("windows.txt") + "' root_folder: '" +
        dir_.path() + "/' batch_size: 4 fg_fraction: 0.5 " + extra + " }");
  }
  // Value at item n, channel c, row h, column w of the last batch.
  float At(int n, int c, int h, int w) const { return data_.cpu_data()[((n * 3 + c) * 8 + h) * 8 + w]; }
};

TEST_F(WindowDataLayerTest, SamplesBackgroundThenForegroundWindowsWarpedFromTheirImages) {
  WindowDataLayer layer(Param());
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(layer.background_windows(), 2u);
  EXPECT_EQ(layer.foreground_windows(), 3u);
  EXPECT_EQ(data_.shape(), (std::vector<int>{4, 3, 8, 8}));
  EXPECT_EQ(label_.shape(), (std::vector<int>{4}));
  for (int iter = 0; iter < 5; ++iter) {
    layer.Forward({}, {&data_, &label_});
    ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
    for (int n = 0; n < 4; ++n) {
      const int label = static_cast<int>(label_.cpu_data()[n]);
      const int image = n < 2 ? 0 : 1;  // Background (class 0, image 0) first.
      if (n < 2) {
        EXPECT_EQ(label, 0);  // A background window's class is 0, whatever the file says.
      } else {
        EXPECT_TRUE(label == 1 || label == 2) << label;
      }
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < 8; ++h)
          for (int w = 0; w < 8; ++w) ASSERT_EQ(At(n, c, h, w), kColor[image][c]) << n << c << h << w;
    }
  }
}

// Caffe's context padding: the whole 24x20 image with context_pad 2 at crop
// 8 is warped to the centre 4x4, the rest (outside the image) is 0; then
// the mean is subtracted and the result scaled.
TEST_F(WindowDataLayerTest, ContextPaddingLeavesZerosOutsideTheImage) {
  WriteWindows("# 0\nim1.png\n3\n20\n24\n2\n1 0.9 0 0 23 19\n0 0.0 0 0 23 19\n");
  caffe::LayerParameter param = Param("context_pad: 2");
  param.mutable_transform_param()->set_scale(0.5f);
  param.mutable_transform_param()->add_mean_value(40);
  param.mutable_transform_param()->set_mirror(true);
  WindowDataLayer layer(param);
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  layer.Forward({}, {&data_, &label_});
  ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  for (int n = 0; n < 4; ++n) {
    for (int c = 0; c < 3; ++c) {
      for (int h = 0; h < 8; ++h) {
        for (int w = 0; w < 8; ++w) {
          const bool inside = h >= 2 && h < 6 && w >= 2 && w < 6;
          ASSERT_EQ(At(n, c, h, w), inside ? (kColor[1][c] - 40) * 0.5f : 0.0f) << n << c << h << w;
        }
      }
    }
  }
}

TEST_F(WindowDataLayerTest, ShardsSampleDisjointWindowsAndImagesMayBeCached) {
  // Windows 0..4 in file order; shard 1 of 2 keeps 1 (background) and 3 (foreground, class 2).
  WindowDataLayer one(Param("cache_images: true"), DataLayerOptions{1, 2});
  ASSERT_TRUE(SetUpLayer(&one).ok());
  EXPECT_EQ(one.background_windows(), 1u);
  EXPECT_EQ(one.foreground_windows(), 1u);
  one.Forward({}, {&data_, &label_});
  ASSERT_TRUE(one.forward_error().ok()) << one.forward_error();
  EXPECT_EQ(std::vector<float>(label_.cpu_data(), label_.cpu_data() + 4), (std::vector<float>{0, 0, 2, 2}));
  EXPECT_EQ(At(3, 2, 7, 7), kColor[1][2]);
}

TEST_F(WindowDataLayerTest, AMalformedWindowFileIsASetUpErrorNamingTheLine) {
  struct Case {
    std::string file;
    std::string error;
  };
  const Case cases[] = {
      {"# 0\nim0.png\n3\n20\n24\n1\n0 0.1 0 0 23\n", "line 7: ends where a window's y2 was expected"},
      {"# 0\nim0.png\n3\n20\n24\n1\n0 0.1 0 0 23 x\n", "line 7: a window's y2 'x' is not an integer"},
      {"# 0\nim0.png\n3\n20\n24\n1\n0 0.9 0 0 23 19\n", "line 7: a foreground window (overlap 0.900000) of class 0"},
      {"# 1\nim0.png\n3\n20\n24\n0\n", "line 1: image index 1, expected 0"},
      {"im0.png\n", "line 1: 'im0.png' where '# IMAGE_INDEX' was expected"},
      {"# 0\nim0.png\n1\n20\n24\n0\n", "line 3: image '" + dir_.path() + "/im0.png' has 1 channels"},
      {"# 0\nim0.png\n3\n20\n24\n1\n0 0.1 9 0 3 19\n", "line 7: window 9 0 3 19 is not a box"},
  };
  for (const Case& c : cases) {
    WriteWindows(c.file);
    WindowDataLayer layer(Param());
    const Status st = SetUpLayer(&layer);
    EXPECT_NE(st.message().find("window file '" + dir_.File("windows.txt") + "' " + c.error), std::string::npos)
        << c.file << "\n"
        << st;
  }
  WriteWindows("# 0\nim0.png\n3\n20\n24\n1\n0 0.1 0 0 23 19\n");
  WindowDataLayer no_foreground(Param());
  EXPECT_NE(SetUpLayer(&no_foreground).message().find("has no foreground window for shard 0 of 1"), std::string::npos);
  WindowDataLayer no_crop(Param("", 0));
  EXPECT_NE(SetUpLayer(&no_crop).message().find("transform_param.crop_size is required"), std::string::npos);
}

TEST_F(WindowDataLayerTest, AnImageThatDoesNotDecodeIsAForwardErrorNamingItsWindow) {
  test::WriteText(dir_.File("im1.png"), "not an image");
  WindowDataLayer layer(Param());
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  layer.Forward({}, {&data_, &label_});
  EXPECT_NE(layer.forward_error().message().find("window file '" + dir_.File("windows.txt") + "' line "),
            std::string::npos)
      << layer.forward_error();
  EXPECT_NE(layer.forward_error().message().find("(image '" + dir_.path() + "/im1.png'): image file '" + dir_.path() +
                                                 "/im1.png' does not decode as an image"),
            std::string::npos)
      << layer.forward_error();
}

// A window that reaches past its image (the file lies) is an error, not a
// read outside the image.
TEST_F(WindowDataLayerTest, AWindowOutsideItsImageIsAForwardError) {
  WriteWindows("# 0\nim0.png\n3\n20\n24\n2\n1 0.9 0 0 30 19\n0 0.1 0 0 5 5\n");
  WindowDataLayer layer(Param());
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  layer.Forward({}, {&data_, &label_});
  EXPECT_NE(layer.forward_error().message().find("line 7 (image '" + dir_.path() +
                                                 "/im0.png'): window 0 0 30 19 lies outside the 24x20 image"),
            std::string::npos)
      << layer.forward_error();
}

// In a build without OpenCV the layer refuses to run, saying why.
TEST(WindowDataWithoutOpenCvTest, RefusesToRunSayingWhy) {
  if (ImageCodecsBuilt()) GTEST_SKIP() << "built with OpenCV: this checks a build without it";
  test::TempDir dir;
  test::WriteText(dir.File("windows.txt"), "# 0\nim0.png\n3\n20\n24\n0\n");
  test::ExpectRefusedWithoutOpenCv<WindowDataLayer>(test::ParseLayerParameter(
      "name: 'win' type: 'WindowData' top: 'data' top: 'label' transform_param { crop_size: 8 } "
      "window_data_param { source: '" +
      dir.File("windows.txt") + "' batch_size: 2 }"));
}

}  // namespace
}  // namespace data
}  // namespace nereus

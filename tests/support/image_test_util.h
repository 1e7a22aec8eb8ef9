// Helpers of the image data tests: small synthetic images written as PNG
// files (lossless, so a decoded pixel is the pixel written) through the
// trainer's own image_io (OpenCV stays inside it), and list files; an image
// layer's refusal in a build without OpenCV.
#ifndef NEREUS_TESTS_SUPPORT_IMAGE_TEST_UTIL_H_
#define NEREUS_TESTS_SUPPORT_IMAGE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "proto/caffe.pb.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/data/image_io.h"

// Skips a test in a build without OpenCV (it has a test of its own that the
// image layers and tools refuse to run there).
#define NEREUS_IMAGES_OR_SKIP()                                                                             \
  do {                                                                                                      \
    if (!::nereus::data::ImageCodecsBuilt()) GTEST_SKIP() << "built without OpenCV (configure found none)"; \
  } while (0)

namespace nereus {
namespace test {

// A height x width image of `channels` whose pixel (h, w, c) is
// pixel(h, w, c) (interleaved, as OpenCV keeps them: BGR for color).
inline data::Image MakeImage(int height, int width, int channels,
                             const std::function<std::uint8_t(int, int, int)>& pixel) {
  data::Image image;
  image.height = height;
  image.width = width;
  image.channels = channels;
  image.pixels.resize(static_cast<std::size_t>(height) * width * channels);
  for (int h = 0; h < height; ++h)
    for (int w = 0; w < width; ++w)
      for (int c = 0; c < channels; ++c)
        image.pixels[(static_cast<std::size_t>(h) * width + w) * channels + c] = pixel(h, w, c);
  return image;
}

// Writes `image` encoded by its extension ("x.png", "x.jpg").
inline void WriteImage(const std::string& path, const data::Image& image) {
  const std::size_t dot = path.rfind('.');
  auto bytes = data::EncodeImage(image, path.substr(dot + 1));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::ofstream out(path, std::ios::binary);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  ASSERT_TRUE(out.good()) << path;
}

// In a build without OpenCV an image layer (ImageData, WindowData) of
// `param` refuses to set up, saying why.
template <class ImageLayer>
void ExpectRefusedWithoutOpenCv(const caffe::LayerParameter& param) {
  ImageLayer layer(param);
  std::mt19937 rng;
  layer.set_rng(&rng);
  Blob data, label;
  EXPECT_NE(layer.SetUp({}, {&data, &label}).message().find("built without OpenCV"), std::string::npos);
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_IMAGE_TEST_UTIL_H_

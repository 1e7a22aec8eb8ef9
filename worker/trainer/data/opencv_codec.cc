// The OpenCV plug-in (libnereus_opencv_codec.so): image_codec.h's table over
// OpenCV's imgcodecs and imgproc. The only file that includes OpenCV.
#include <cstdint>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "worker/trainer/data/image_codec.h"

namespace nereus {
namespace data {
namespace {

int ReadFlag(ImageColor color) {
  switch (color) {
    case ImageColor::kColor:
      return cv::IMREAD_COLOR;
    case ImageColor::kGray:
      return cv::IMREAD_GRAYSCALE;
    case ImageColor::kNative:
      return cv::IMREAD_UNCHANGED;
  }
  return cv::IMREAD_COLOR;
}

// A decoded cv::Mat as an Image.
int FromMat(const cv::Mat& mat, Image* out, std::string* error) {
  if (mat.depth() != CV_8U) {
    *error = "decodes to " + std::to_string(8 * mat.elemSize1()) + "-bit samples; only 8-bit images are supported";
    return kCodecInvalidArgument;
  }
  out->height = mat.rows;
  out->width = mat.cols;
  out->channels = mat.channels();
  const std::size_t row = static_cast<std::size_t>(out->width) * out->channels;
  out->pixels.resize(row * out->height);
  for (int h = 0; h < out->height; ++h) std::memcpy(out->pixels.data() + row * h, mat.ptr<std::uint8_t>(h), row);
  return kCodecOk;
}

cv::Mat ToMat(const Image& image) {
  // A header over the pixels (no copy); callers copy what they keep.
  return cv::Mat(image.height, image.width, CV_MAKETYPE(CV_8U, image.channels),
                 const_cast<std::uint8_t*>(image.pixels.data()));
}

int Decode(const char* bytes, std::size_t size, ImageColor color, Image* out, std::string* error) {
  const cv::Mat buffer(1, static_cast<int>(size), CV_8U, const_cast<char*>(bytes));
  cv::Mat mat;
  try {
    mat = cv::imdecode(buffer, ReadFlag(color));
  } catch (const cv::Exception& e) {
    *error = std::string("does not decode as an image: ") + e.what();
    return kCodecDataLoss;
  }
  if (mat.empty()) {
    *error = "does not decode as an image (" + std::to_string(size) + " bytes in no format OpenCV reads)";
    return kCodecDataLoss;
  }
  return FromMat(mat, out, error);
}

int Resize(const Image& image, int height, int width, Image* out, std::string* error) {
  cv::Mat resized;
  try {
    cv::resize(ToMat(image), resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
  } catch (const cv::Exception& e) {
    *error = std::string("cannot resize: ") + e.what();
    return kCodecInvalidArgument;
  }
  return FromMat(resized, out, error);
}

int Encode(const Image& image, const std::string& extension, std::string* out, std::string* error) {
  std::vector<std::uint8_t> buffer;
  bool ok = false;
  try {
    ok = cv::imencode("." + extension, ToMat(image), buffer);
  } catch (const cv::Exception& e) {
    *error = std::string(": ") + e.what();
    return kCodecInvalidArgument;
  }
  if (!ok) {
    error->clear();
    return kCodecInvalidArgument;
  }
  out->assign(buffer.begin(), buffer.end());
  return kCodecOk;
}

constexpr ImageCodec kCodec = {kImageCodecVersion, &Decode, &Resize, &Encode};

}  // namespace
}  // namespace data
}  // namespace nereus

extern "C" __attribute__((visibility("default"))) const nereus::data::ImageCodec* nereus_image_codec() {
  return &nereus::data::kCodec;
}

// The interface between image_io.cc and the OpenCV plug-in
// (libnereus_opencv_codec.so, opencv_codec.cc): the three operations that
// need OpenCV, as a table of functions the plug-in exports. The plug-in is
// loaded at run time (dlopen), so that nothing else links OpenCV: Debian's
// libopencv-imgcodecs pulls in GDAL, Poppler, ICU and codecs (about 150
// libraries, 900 MB with their dependencies), which a worker that reads no
// image must not need (the GPU archive, scripts/gpu_pack.sh, leaves them
// out). Both sides are built by the same build, with the same compiler and
// standard library, so the table passes C++ types.
#ifndef NEREUS_WORKER_TRAINER_DATA_IMAGE_CODEC_H_
#define NEREUS_WORKER_TRAINER_DATA_IMAGE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nereus {
namespace data {

// How to decode: OpenCV's IMREAD_COLOR (3 channels, BGR), IMREAD_GRAYSCALE
// (1 channel), or IMREAD_UNCHANGED (the file's own channels: Caffe's
// "native" decoding of an encoded Datum).
enum class ImageColor { kColor, kGray, kNative };

// 8-bit pixels, rows of width x channels interleaved (OpenCV's layout; BGR
// for color).
struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;

  std::uint8_t at(int h, int w, int c) const {
    return pixels[(static_cast<std::size_t>(h) * width + w) * channels + c];
  }
};

// Raised whenever the table changes: image_io.cc refuses a plug-in of
// another version.
inline constexpr int kImageCodecVersion = 1;

// What a call returns: kCodecOk, or the error's kind (*error says what).
enum ImageCodecResult : int { kCodecOk = 0, kCodecDataLoss = 1, kCodecInvalidArgument = 2 };

struct ImageCodec {
  int version;
  // Decodes `size` bytes as `color` (cv::imdecode); kCodecDataLoss when
  // they are no image, kCodecInvalidArgument when it is not 8-bit.
  int (*decode)(const char* bytes, std::size_t size, ImageColor color, Image* out, std::string* error);
  // Resizes to height x width, bilinear (cv::resize), both positive.
  int (*resize)(const Image& image, int height, int width, Image* out, std::string* error);
  // Encodes as the file extension `extension` (cv::imencode).
  int (*encode)(const Image& image, const std::string& extension, std::string* out, std::string* error);
};

// The plug-in's one exported symbol (extern "C", unmangled):
//   const nereus::data::ImageCodec* nereus_image_codec();
inline constexpr const char* kImageCodecSymbol = "nereus_image_codec";
inline constexpr const char* kImageCodecLibrary = "libnereus_opencv_codec.so";

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_IMAGE_CODEC_H_

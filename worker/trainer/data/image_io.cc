#include "worker/trainer/data/image_io.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#ifdef NEREUS_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace nereus {
namespace data {
namespace {

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read image file '" + path + "': " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return NotFoundError("cannot read image file '" + path + "': " + std::strerror(errno));
  return bytes;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Caffe's matchExt: does the file's extension name `encoding` (jpeg counts
// as jpg)?
bool ExtensionMatches(const std::string& path, const std::string& encoding) {
  const std::size_t dot = path.rfind('.');
  const std::string ext = Lower(dot != std::string::npos ? path.substr(dot + 1) : path);
  const std::string en = Lower(encoding);
  return ext == en || (en == "jpg" && ext == "jpeg");
}

#ifdef NEREUS_HAVE_OPENCV
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

// A decoded cv::Mat as an Image; `what` names it in errors.
StatusOr<Image> FromMat(const cv::Mat& mat, const std::string& what) {
  if (mat.depth() != CV_8U) {
    return InvalidArgumentError(what + " decodes to " + std::to_string(8 * mat.elemSize1()) +
                                "-bit samples; only 8-bit images are supported");
  }
  Image image;
  image.height = mat.rows;
  image.width = mat.cols;
  image.channels = mat.channels();
  const std::size_t row = static_cast<std::size_t>(image.width) * image.channels;
  image.pixels.resize(row * image.height);
  for (int h = 0; h < image.height; ++h) std::memcpy(image.pixels.data() + row * h, mat.ptr<std::uint8_t>(h), row);
  return image;
}

cv::Mat ToMat(const Image& image) {
  // A header over the pixels (no copy); callers copy what they keep.
  return cv::Mat(image.height, image.width, CV_MAKETYPE(CV_8U, image.channels),
                 const_cast<std::uint8_t*>(image.pixels.data()));
}

StatusOr<Image> Decode(std::string_view bytes, ImageColor color, const std::string& what) {
  if (bytes.empty()) return DataLossError(what + " is empty, not an image");
  const cv::Mat buffer(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data()));
  cv::Mat mat;
  try {
    mat = cv::imdecode(buffer, ReadFlag(color));
  } catch (const cv::Exception& e) {
    return DataLossError(what + " does not decode as an image: " + e.what());
  }
  if (mat.empty()) {
    return DataLossError(what + " does not decode as an image (" + std::to_string(bytes.size()) +
                         " bytes in no format OpenCV reads)");
  }
  return FromMat(mat, what);
}
#endif

}  // namespace

#ifdef NEREUS_HAVE_OPENCV
bool ImageCodecsAvailable() { return true; }
#else
bool ImageCodecsAvailable() { return false; }
#endif

Status NoImageCodecsError(const std::string& what) {
  return FailedPreconditionError(what +
                                 " needs image decoding, and this Nereus was built without OpenCV (install "
                                 "libopencv-imgcodecs-dev and libopencv-imgproc-dev, e.g. scripts/install_deps.sh, "
                                 "then configure and build again)");
}

StatusOr<Image> ReadImageFile(const std::string& path, ImageColor color) {
#ifdef NEREUS_HAVE_OPENCV
  // Read here, decoded from memory: a missing file and one that does not
  // decode are told apart (cv::imread says neither).
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  return Decode(bytes, color, "image file '" + path + "'");
#else
  return NoImageCodecsError("reading image file '" + path + "'");
#endif
}

StatusOr<Image> DecodeImage(std::string_view bytes, ImageColor color) {
#ifdef NEREUS_HAVE_OPENCV
  return Decode(bytes, color, "the encoded image");
#else
  return NoImageCodecsError("an encoded image");
#endif
}

StatusOr<Image> ResizeImage(const Image& image, int height, int width) {
#ifdef NEREUS_HAVE_OPENCV
  if (height <= 0 || width <= 0 || image.height <= 0 || image.width <= 0) {
    return InvalidArgumentError("cannot resize a " + std::to_string(image.height) + "x" + std::to_string(image.width) +
                                " image to " + std::to_string(height) + "x" + std::to_string(width));
  }
  cv::Mat resized;
  cv::resize(ToMat(image), resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
  return FromMat(resized, "the resized image");
#else
  return NoImageCodecsError("resizing an image");
#endif
}

Image CropImage(const Image& image, int x, int y, int width, int height) {
  CHECK(x >= 0 && y >= 0 && width >= 0 && height >= 0 && x + width <= image.width && y + height <= image.height)
      << "crop " << x << "," << y << " " << width << "x" << height << " outside a " << image.width << "x"
      << image.height << " image";
  Image out;
  out.height = height;
  out.width = width;
  out.channels = image.channels;
  const std::size_t row = static_cast<std::size_t>(width) * image.channels;
  out.pixels.resize(row * height);
  for (int h = 0; h < height; ++h) {
    const std::uint8_t* from = &image.pixels[(static_cast<std::size_t>(y + h) * image.width + x) * image.channels];
    std::copy(from, from + row, out.pixels.data() + row * h);
  }
  return out;
}

StatusOr<std::string> EncodeImage(const Image& image, const std::string& extension) {
#ifdef NEREUS_HAVE_OPENCV
  std::vector<std::uint8_t> buffer;
  bool ok = false;
  try {
    ok = cv::imencode("." + extension, ToMat(image), buffer);
  } catch (const cv::Exception& e) {
    return InvalidArgumentError("cannot encode an image as '" + extension + "': " + e.what());
  }
  if (!ok) return InvalidArgumentError("cannot encode an image as '" + extension + "'");
  return std::string(buffer.begin(), buffer.end());
#else
  return NoImageCodecsError("encoding an image");
#endif
}

void ImageToDatum(const Image& image, caffe::Datum* datum) {
  datum->set_channels(image.channels);
  datum->set_height(image.height);
  datum->set_width(image.width);
  datum->clear_float_data();
  datum->set_encoded(false);
  std::string planar(image.pixels.size(), '\0');
  const std::size_t plane = static_cast<std::size_t>(image.height) * image.width;
  for (std::size_t p = 0; p < plane; ++p) {
    for (int c = 0; c < image.channels; ++c) {
      planar[c * plane + p] = static_cast<char>(image.pixels[p * image.channels + c]);
    }
  }
  datum->set_data(std::move(planar));
}

namespace {

// Caffe's ReadImageToCVMat: decoded in color or gray, resized when both
// sizes are positive.
StatusOr<Image> ReadAndResize(const std::string& path, int height, int width, bool is_color) {
  ASSIGN_OR_RETURN(Image image, ReadImageFile(path, is_color ? ImageColor::kColor : ImageColor::kGray));
  if (height > 0 && width > 0) return ResizeImage(image, height, width);
  return image;
}

}  // namespace

StatusOr<caffe::Datum> ReadImageToDatum(const std::string& path, int label, int height, int width, bool is_color) {
  ASSIGN_OR_RETURN(const Image image, ReadAndResize(path, height, width, is_color));
  caffe::Datum datum;
  ImageToDatum(image, &datum);
  datum.set_label(label);
  return datum;
}

StatusOr<caffe::Datum> ReadImageToEncodedDatum(const std::string& path, int label, int height, int width, bool is_color,
                                               const std::string& encoding, Image* decoded) {
  // Decoded even when the file's bytes are kept: Caffe stores only images
  // that decode.
  ASSIGN_OR_RETURN(Image image, ReadAndResize(path, height, width, is_color));
  if (decoded != nullptr) *decoded = image;
  caffe::Datum datum;
  datum.set_label(label);
  datum.set_encoded(true);
  if ((image.channels == 3) == is_color && height == 0 && width == 0 && ExtensionMatches(path, encoding)) {
    ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path));
    datum.set_data(std::move(bytes));
    return datum;
  }
  auto encoded = EncodeImage(image, encoding);
  if (!encoded.ok()) return Status(encoded.status().code(), "image file '" + path + "': " + encoded.status().message());
  datum.set_data(std::move(encoded).value());
  return datum;
}

Status DecodeDatum(caffe::Datum* datum, ImageColor color) {
  if (!datum->encoded()) return Status::OK();
  ASSIGN_OR_RETURN(const Image image, DecodeImage(datum->data(), color));
  ImageToDatum(image, datum);
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

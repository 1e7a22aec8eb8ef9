#include "worker/trainer/data/image_io.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "common/base/file_util.h"

namespace nereus {
namespace data {
namespace {

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

// Where the plug-in is looked for: beside the running binary's folder
// (build/lib/ for build/bin/, an installation's lib/ for its bin/), beside
// the binary, then by name (the loader's path: LD_LIBRARY_PATH, RUNPATH).
std::vector<std::string> CodecCandidates() {
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path().parent_path() / "lib" / kImageCodecLibrary).string());
    out.push_back((exe.parent_path() / kImageCodecLibrary).string());
  }
  out.push_back(kImageCodecLibrary);
  return out;
}

// The plug-in's table, or why there is none. Loaded on every call with
// RTLD_NODELETE: the first call maps the library, later ones find it mapped
// (the loader's own reference count), and dlclose never unmaps it, so the
// table stays valid with no handle kept here.
StatusOr<const ImageCodec*> LoadCodec(const std::string& what) {
#ifndef NEREUS_HAVE_OPENCV
  return FailedPreconditionError(what +
                                 " needs image decoding, and this Nereus was built without OpenCV (install "
                                 "libopencv-imgcodecs-dev and libopencv-imgproc-dev, e.g. scripts/install_deps.sh, "
                                 "then configure and build again)");
#else
  std::string tried;
  for (const std::string& path : CodecCandidates()) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why != nullptr ? why : path);
      continue;
    }
    using Entry = const ImageCodec* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(handle, kImageCodecSymbol));
    const ImageCodec* codec = entry != nullptr ? entry() : nullptr;
    ::dlclose(handle);
    if (codec == nullptr) return FailedPreconditionError(what + ": " + path + " exports no " + kImageCodecSymbol);
    if (codec->version != kImageCodecVersion) {
      return FailedPreconditionError(what + ": " + path + " is the image plug-in of version " +
                                     std::to_string(codec->version) + ", this build needs version " +
                                     std::to_string(kImageCodecVersion) + " (a plug-in of another build)");
    }
    return codec;
  }
  return FailedPreconditionError(what + " needs image decoding, through the OpenCV plug-in " + kImageCodecLibrary +
                                 ", which could not be loaded (" + tried +
                                 "): it is built beside nereus_worker (build/lib/) and installed in lib/ when "
                                 "OpenCV is found");
#endif
}

StatusOr<Image> Decode(std::string_view bytes, ImageColor color, const std::string& what) {
  ASSIGN_OR_RETURN(const ImageCodec* codec, LoadCodec(what));
  if (bytes.empty()) return DataLossError(what + " is empty, not an image");
  Image image;
  std::string error;
  switch (codec->decode(bytes.data(), bytes.size(), color, &image, &error)) {
    case kCodecOk:
      return image;
    case kCodecDataLoss:
      return DataLossError(what + " " + error);
    default:
      return InvalidArgumentError(what + " " + error);
  }
}

}  // namespace

bool ImageCodecsAvailable() { return LoadCodec("images").ok(); }

#ifdef NEREUS_HAVE_OPENCV
bool ImageCodecsBuilt() { return true; }
#else
bool ImageCodecsBuilt() { return false; }
#endif

Status NoImageCodecsError(const std::string& what) {
  auto codec = LoadCodec(what);
  return codec.ok() ? Status::OK() : codec.status();
}

StatusOr<Image> ReadImageFile(const std::string& path, ImageColor color) {
  // Read here, decoded from memory: a missing file and one that does not
  // decode are told apart (cv::imread says neither).
  RETURN_IF_ERROR(NoImageCodecsError("reading image file '" + path + "'"));
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path, "image file"));
  return Decode(bytes, color, "image file '" + path + "'");
}

StatusOr<Image> DecodeImage(std::string_view bytes, ImageColor color) {
  return Decode(bytes, color, "the encoded image");
}

StatusOr<Image> ResizeImage(const Image& image, int height, int width) {
  ASSIGN_OR_RETURN(const ImageCodec* codec, LoadCodec("resizing an image"));
  if (height <= 0 || width <= 0 || image.height <= 0 || image.width <= 0) {
    return InvalidArgumentError("cannot resize a " + std::to_string(image.height) + "x" + std::to_string(image.width) +
                                " image to " + std::to_string(height) + "x" + std::to_string(width));
  }
  Image resized;
  std::string error;
  if (codec->resize(image, height, width, &resized, &error) != kCodecOk) {
    return InvalidArgumentError("the resized image " + error);
  }
  return resized;
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
  ASSIGN_OR_RETURN(const ImageCodec* codec, LoadCodec("encoding an image"));
  std::string out, error;
  if (codec->encode(image, extension, &out, &error) != kCodecOk) {
    return InvalidArgumentError("cannot encode an image as '" + extension + "'" + error);
  }
  return out;
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
    ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path, "image file"));
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

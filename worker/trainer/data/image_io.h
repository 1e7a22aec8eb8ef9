// Images as Caffe reads and writes them (util/io.cpp), through OpenCV's
// imgcodecs and imgproc: decoding a file or an encoded Datum (imread /
// imdecode), resizing (cv::resize, bilinear), encoding (imencode), and
// Caffe's Datum layout of an image. OpenCV stays inside image_io.cc; nothing
// else sees a cv::Mat.
//
// OpenCV is optional at build time (Debian's libopencv-imgcodecs-dev and
// libopencv-imgproc-dev): without it ImageCodecsAvailable() is false and
// every function that decodes, encodes or resizes returns FAILED_PRECONDITION
// (NoImageCodecsError), so the layers and tools that need images refuse to
// run, saying why.
//
// Thread-safety: every function may run on any thread.
#ifndef NEREUS_WORKER_TRAINER_DATA_IMAGE_IO_H_
#define NEREUS_WORKER_TRAINER_DATA_IMAGE_IO_H_

#include <string>
#include <string_view>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/image_codec.h"

namespace nereus {
namespace data {

// Whether this build decodes images (OpenCV was found when it was configured
// and its plug-in loads).
bool ImageCodecsAvailable();
// Whether this build was configured with OpenCV (its plug-in built): where it
// was, a plug-in that does not load is an error, never a reason to skip.
bool ImageCodecsBuilt();
// The FAILED_PRECONDITION of a build without OpenCV, saying what needs it.
Status NoImageCodecsError(const std::string& what);

// Reads and decodes the image file at `path` (cv::imread). Errors name the
// file: NOT_FOUND when it cannot be read, DATA_LOSS when it does not decode
// as an image, INVALID_ARGUMENT for a decoded image that is not 8-bit.
StatusOr<Image> ReadImageFile(const std::string& path, ImageColor color);
// Decodes encoded image bytes (cv::imdecode); errors as ReadImageFile's,
// without a file name.
StatusOr<Image> DecodeImage(std::string_view bytes, ImageColor color);
// cv::resize to height x width, bilinear (Caffe's default interpolation).
StatusOr<Image> ResizeImage(const Image& image, int height, int width);
// The width x height region of `image` at column x, row y (inside it).
Image CropImage(const Image& image, int x, int y, int width, int height);
// cv::imencode with the file extension `extension` ("png", "jpg").
StatusOr<std::string> EncodeImage(const Image& image, const std::string& extension);

// Caffe's CVMatToDatum: channels x height x width bytes (planar) in
// datum->data, encoded false, float_data cleared; the label is kept.
void ImageToDatum(const Image& image, caffe::Datum* datum);

// Caffe's ReadImageToCVMat then CVMatToDatum: the file decoded in color or
// gray, resized when height and width are both positive, as a raw Datum.
StatusOr<caffe::Datum> ReadImageToDatum(const std::string& path, int label, int height, int width, bool is_color);
// Caffe's ReadImageToDatum with an encoding ("png", "jpg"): the file's own
// bytes when they already are what was asked (the extension matches, no
// resize, and its channels are those of is_color), else the decoded and
// resized image encoded again; datum->encoded() is true (and, as in Caffe,
// channels, height and width are not set). `decoded`, when not null, gets
// the image as decoded and resized.
StatusOr<caffe::Datum> ReadImageToEncodedDatum(const std::string& path, int label, int height, int width, bool is_color,
                                               const std::string& encoding, Image* decoded = nullptr);

// Replaces an encoded Datum by the raw Datum of its image (Caffe's
// DecodeDatumToCVMat + CVMatToDatum), keeping the label; a raw Datum is left
// as it is. Errors as DecodeImage's.
Status DecodeDatum(caffe::Datum* datum, ImageColor color);

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_IMAGE_IO_H_

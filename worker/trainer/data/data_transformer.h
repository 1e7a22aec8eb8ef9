// DataTransformer: Caffe's transform_param applied to one Datum, producing
// floats for a Data layer's top blob. Same arithmetic and the same order of
// random draws as Caffe's DataTransformer<float>::Transform(Datum, Blob*):
//
//   out[c][h][w] = (in[c][h_off + h][w_off + w] - mean) * scale
//
// where mean is mean_file's value at that input position, or mean_value[c]
// (one value for all channels, or one per channel), or 0; the crop offsets
// are random in TRAIN (uniform over the valid positions) and centred in TEST;
// with mirror, TRAIN flips each image horizontally with probability 1/2.
// One deliberate difference from Caffe: Caffe also mirrors at random in TEST
// when mirror is set; Nereus never mirrors in TEST, so test passes are
// deterministic. force_color/force_gray only concern encoded images, which
// the layers decode (image_io.h, DecodeDatum) before they transform them.
//
// Randomness comes from the std::mt19937 the caller passes (Caffe's Rand(n)
// is `rng() % n`); there is no global RNG. Draw order per datum: the mirror
// coin (TRAIN with mirror), then the crop row and column offsets (TRAIN with
// crop_size).
//
// Thread-safety: Transform is const and may run on any thread, one rng per
// thread.
#ifndef NEREUS_WORKER_TRAINER_DATA_DATA_TRANSFORMER_H_
#define NEREUS_WORKER_TRAINER_DATA_DATA_TRANSFORMER_H_

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"

namespace nereus {
namespace data {

class DataTransformer {
 public:
  // Checks the parameter and loads mean_file (a binary BlobProto). Errors:
  // mean_file together with mean_value, a mean_file that cannot be read or
  // parsed (naming the file).
  static StatusOr<std::unique_ptr<DataTransformer>> Create(const caffe::TransformationParameter& param,
                                                           caffe::Phase phase);

  // Shape of one transformed datum: {1, channels, height', width'} with
  // height' = width' = crop_size when cropping. Errors: an encoded datum
  // (decode it first), no channels, a crop larger than the image, a data size that does not match
  // channels*height*width, a mean that does not fit the datum.
  StatusOr<std::vector<int>> InferShape(const caffe::Datum& datum) const;

  // Writes channels*height'*width' floats to `out`. `rng` may be null only
  // when no random draw is needed (TEST phase, or TRAIN without mirror and
  // crop). Errors as for InferShape.
  Status Transform(const caffe::Datum& datum, float* out, std::mt19937* rng) const;

  const caffe::TransformationParameter& param() const { return param_; }
  // The mean_file's values (channels x height x width), empty without one.
  const std::vector<float>& mean_file_values() const { return mean_; }
  int mean_channels() const { return mean_channels_; }
  int mean_height() const { return mean_height_; }
  int mean_width() const { return mean_width_; }

 private:
  DataTransformer(const caffe::TransformationParameter& param, caffe::Phase phase) : param_(param), phase_(phase) {}

  const caffe::TransformationParameter param_;
  const caffe::Phase phase_;
  // mean_file contents, channels x height x width, when a mean_file is given.
  std::vector<float> mean_;
  int mean_channels_ = 0;
  int mean_height_ = 0;
  int mean_width_ = 0;
};

// "CxHxW": a Datum's shape as the data layers' messages give it.
std::string DatumShapeString(const caffe::Datum& datum);

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DATA_TRANSFORMER_H_

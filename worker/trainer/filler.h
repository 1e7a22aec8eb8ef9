// Fillers initialise parameter blobs: Caffe's fillers, every one of them,
// with Caffe's semantics (filler.hpp): constant (value), uniform (min, max),
// gaussian (mean, std, and sparse: each value kept with probability
// sparse / shape(0)), positive_unitball (uniform, every row of the first
// axis scaled to sum 1), xavier and msra (variance_norm FAN_IN, FAN_OUT or
// AVERAGE) and bilinear (upsampling kernels). Randomness comes from an engine
// the caller passes (the Net's, seeded from the solver's random_seed): a
// std::mt19937 with the standard distributions, so the values are not Caffe's
// (Boost's generators), only distributed as Caffe's. Where Caffe dies on a
// CHECK (sparse on a non-gaussian filler, sparse above shape(0), bilinear on
// a non-square filter) Nereus returns InvalidArgument naming the filler and
// the blob's shape.
#ifndef NEREUS_WORKER_TRAINER_FILLER_H_
#define NEREUS_WORKER_TRAINER_FILLER_H_

#include <memory>
#include <random>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/blob.h"

namespace nereus {

class Filler {
 public:
  explicit Filler(const caffe::FillerParameter& param) : filler_param_(param) {}
  virtual ~Filler() = default;
  // Fills blob->data. `rng` may be null for the constant and bilinear
  // fillers only. Errors: a blob the filler cannot fill (see above).
  virtual Status Fill(Blob* blob, std::mt19937* rng) const = 0;

 protected:
  caffe::FillerParameter filler_param_;
};

// Builds the filler named by param.type(). An unknown type, or a bad
// parameter (std <= 0, min > max, sparse < -1 or on another type than
// gaussian), is InvalidArgument naming it.
StatusOr<std::unique_ptr<Filler>> CreateFiller(const caffe::FillerParameter& param);

// CreateFiller(param) then Fill(blob, rng).
Status FillBlob(const caffe::FillerParameter& param, Blob* blob, std::mt19937* rng);

// `filler` when the prototxt gave one (`given`), else a constant filler of
// `value`: Caffe's default for scales (1), their biases (0), PReLU's slopes
// (0.25).
caffe::FillerParameter FillerOrConstant(bool given, const caffe::FillerParameter& filler, float value);

// Fan-in and fan-out as Caffe computes them for xavier/msra:
// fan_in = count / shape(0); fan_out = count / shape(1), or count for a
// blob with fewer than 2 axes.
int FillerFanIn(const Blob& blob);
int FillerFanOut(const Blob& blob);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_FILLER_H_

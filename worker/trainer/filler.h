// Fillers initialise parameter blobs (Caffe's fillers): constant, uniform,
// gaussian, xavier and msra. Randomness comes from an engine the caller
// passes (the Net's, seeded from the solver's random_seed).
#ifndef NEREUS_WORKER_TRAINER_FILLER_H_
#define NEREUS_WORKER_TRAINER_FILLER_H_

#include <memory>
#include <random>

#include "common/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/blob.h"

namespace nereus {

class Filler {
 public:
  explicit Filler(const caffe::FillerParameter& param) : filler_param_(param) {}
  virtual ~Filler() = default;
  // Fills blob->data. `rng` may be null for the constant filler only.
  virtual void Fill(Blob* blob, std::mt19937* rng) const = 0;

 protected:
  caffe::FillerParameter filler_param_;
};

// Builds the filler named by param.type(). An unknown type, or a parameter
// Nereus does not support (gaussian `sparse`), is InvalidArgument naming it.
StatusOr<std::unique_ptr<Filler>> CreateFiller(const caffe::FillerParameter& param);

// CreateFiller(param) then Fill(blob, rng).
Status FillBlob(const caffe::FillerParameter& param, Blob* blob, std::mt19937* rng);

// Fan-in and fan-out as Caffe computes them for xavier/msra:
// fan_in = count / shape(0); fan_out = count / shape(1), or count for a
// blob with fewer than 2 axes.
int FillerFanIn(const Blob& blob);
int FillerFanOut(const Blob& blob);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_FILLER_H_

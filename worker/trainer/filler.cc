#include "worker/trainer/filler.h"

#include <cmath>

#include "worker/trainer/math_functions.h"

namespace nereus {
namespace {

class ConstantFiller : public Filler {
 public:
  using Filler::Filler;
  void Fill(Blob* blob, std::mt19937* rng) const override {
    CHECK(blob->count() > 0 || blob->num_axes() > 0) << "filling an empty blob";
    caffe_set(blob->count(), filler_param_.value(), blob->mutable_cpu_data());
  }
};

class UniformFiller : public Filler {
 public:
  using Filler::Filler;
  void Fill(Blob* blob, std::mt19937* rng) const override {
    caffe_rng_uniform(blob->count(), filler_param_.min(), filler_param_.max(), blob->mutable_cpu_data(), rng);
  }
};

class GaussianFiller : public Filler {
 public:
  using Filler::Filler;
  void Fill(Blob* blob, std::mt19937* rng) const override {
    caffe_rng_gaussian(blob->count(), filler_param_.mean(), filler_param_.std(), blob->mutable_cpu_data(), rng);
  }
};

float VarianceNormN(const caffe::FillerParameter& param, const Blob& blob) {
  const int fan_in = FillerFanIn(blob);
  const int fan_out = FillerFanOut(blob);
  float n = static_cast<float>(fan_in);  // FAN_IN, Caffe's default.
  if (param.variance_norm() == caffe::FillerParameter::AVERAGE) {
    n = (fan_in + fan_out) / 2.0f;
  } else if (param.variance_norm() == caffe::FillerParameter::FAN_OUT) {
    n = static_cast<float>(fan_out);
  }
  return n;
}

// U(-sqrt(3/n), +sqrt(3/n)).
class XavierFiller : public Filler {
 public:
  using Filler::Filler;
  void Fill(Blob* blob, std::mt19937* rng) const override {
    CHECK_GT(blob->count(), 0) << "xavier filler on an empty blob";
    const float scale = std::sqrt(3.0f / VarianceNormN(filler_param_, *blob));
    caffe_rng_uniform(blob->count(), -scale, scale, blob->mutable_cpu_data(), rng);
  }
};

// N(0, sqrt(2/n)).
class MsraFiller : public Filler {
 public:
  using Filler::Filler;
  void Fill(Blob* blob, std::mt19937* rng) const override {
    CHECK_GT(blob->count(), 0) << "msra filler on an empty blob";
    const float std = std::sqrt(2.0f / VarianceNormN(filler_param_, *blob));
    caffe_rng_gaussian(blob->count(), 0.0f, std, blob->mutable_cpu_data(), rng);
  }
};

}  // namespace

int FillerFanIn(const Blob& blob) {
  CHECK_GT(blob.num_axes(), 0);
  CHECK_GT(blob.shape(0), 0);
  return blob.count() / blob.shape(0);
}

int FillerFanOut(const Blob& blob) {
  if (blob.num_axes() > 1) {
    CHECK_GT(blob.shape(1), 0);
    return blob.count() / blob.shape(1);
  }
  return blob.count();
}

StatusOr<std::unique_ptr<Filler>> CreateFiller(const caffe::FillerParameter& param) {
  const std::string& type = param.type();
  if (param.sparse() >= 0) {
    return InvalidArgumentError("filler \"" + type + "\": sparse = " + std::to_string(param.sparse()) +
                                " is not supported by Nereus");
  }
  std::unique_ptr<Filler> filler;
  if (type == "constant") {
    filler = std::make_unique<ConstantFiller>(param);
  } else if (type == "uniform") {
    if (param.min() > param.max())
      return InvalidArgumentError("uniform filler needs min <= max, got min " + std::to_string(param.min()) + " max " +
                                  std::to_string(param.max()));
    filler = std::make_unique<UniformFiller>(param);
  } else if (type == "gaussian") {
    if (param.std() <= 0)
      return InvalidArgumentError("gaussian filler needs std > 0, got " + std::to_string(param.std()));
    filler = std::make_unique<GaussianFiller>(param);
  } else if (type == "xavier") {
    filler = std::make_unique<XavierFiller>(param);
  } else if (type == "msra") {
    filler = std::make_unique<MsraFiller>(param);
  } else {
    return InvalidArgumentError("unknown filler type \"" + type +
                                "\" (supported: constant, uniform, gaussian, xavier, msra)");
  }
  return filler;
}

Status FillBlob(const caffe::FillerParameter& param, Blob* blob, std::mt19937* rng) {
  ASSIGN_OR_RETURN(std::unique_ptr<Filler> filler, CreateFiller(param));
  filler->Fill(blob, rng);
  return Status::OK();
}

}  // namespace nereus

#include "worker/trainer/filler.h"

#include <cmath>
#include <vector>

#include "worker/trainer/math/math_functions.h"

namespace nereus {
namespace {

// "filler \"gaussian\" on a blob of shape 3 4 (12): ".
std::string FillerError(const caffe::FillerParameter& param, const Blob& blob) {
  return "filler \"" + param.type() + "\" on a blob of shape " + blob.shape_string() + ": ";
}

class ConstantFiller : public Filler {
 public:
  using Filler::Filler;
  Status Fill(Blob* blob, std::mt19937* rng) const override {
    caffe_set(blob->count(), filler_param_.value(), blob->mutable_cpu_data());
    return Status::OK();
  }
};

class UniformFiller : public Filler {
 public:
  using Filler::Filler;
  Status Fill(Blob* blob, std::mt19937* rng) const override {
    caffe_rng_uniform(blob->count(), filler_param_.min(), filler_param_.max(), blob->mutable_cpu_data(), rng);
    return Status::OK();
  }
};

// N(mean, std); with sparse = s >= 0, then each value is kept with
// probability s / shape(0) and zeroed otherwise (Caffe's draw order: every
// Gaussian value, then every Bernoulli draw). For an InnerProduct weight
// (num_output x inputs) shape(0) is num_output, as in Caffe, although its
// comment speaks of the mean number of non-zero inputs per output.
class GaussianFiller : public Filler {
 public:
  using Filler::Filler;
  Status Fill(Blob* blob, std::mt19937* rng) const override {
    const int sparse = filler_param_.sparse();
    float non_zero_probability = 1.0f;
    if (sparse >= 0) {
      if (blob->num_axes() < 1 || blob->shape(0) == 0) {
        return InvalidArgumentError(FillerError(filler_param_, *blob) + "sparse needs a blob with a first axis");
      }
      non_zero_probability = static_cast<float>(sparse) / static_cast<float>(blob->shape(0));
      if (non_zero_probability > 1.0f) {
        return InvalidArgumentError(FillerError(filler_param_, *blob) + "sparse " + std::to_string(sparse) +
                                    " exceeds the " + std::to_string(blob->shape(0)) +
                                    " outputs of the blob's first axis (sparse / outputs is a probability)");
      }
    }
    float* data = blob->mutable_cpu_data();
    caffe_rng_gaussian(blob->count(), filler_param_.mean(), filler_param_.std(), data, rng);
    if (sparse >= 0) {
      std::vector<int> mask(static_cast<size_t>(blob->count()));
      caffe_rng_bernoulli(blob->count(), non_zero_probability, mask.data(), rng);
      for (int i = 0; i < blob->count(); ++i) data[i] *= static_cast<float>(mask[i]);
    }
    return Status::OK();
  }
};

// U(0, 1), then every row (the values sharing an index of the first axis)
// divided by its sum, summed in order in float: each row sums to 1.
class PositiveUnitballFiller : public Filler {
 public:
  using Filler::Filler;
  Status Fill(Blob* blob, std::mt19937* rng) const override {
    if (blob->count() == 0) return InvalidArgumentError(FillerError(filler_param_, *blob) + "the blob is empty");
    float* data = blob->mutable_cpu_data();
    caffe_rng_uniform(blob->count(), 0.0f, 1.0f, data, rng);
    const int rows = blob->num_axes() > 0 ? blob->shape(0) : 1;
    const int dim = blob->count() / rows;
    for (int i = 0; i < rows; ++i) {
      float sum = 0;
      for (int j = 0; j < dim; ++j) sum += data[i * dim + j];
      for (int j = 0; j < dim; ++j) data[i * dim + j] /= sum;
    }
    return Status::OK();
  }
};

Status CheckFans(const caffe::FillerParameter& param, const Blob& blob) {
  if (blob.count() == 0) return InvalidArgumentError(FillerError(param, blob) + "the blob is empty");
  return Status::OK();
}

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

// The fan-scaled fillers, n from VarianceNormN: Xavier U(-sqrt(3/n),
// +sqrt(3/n)); MSRA N(0, sqrt(2/n)).
class FanScaledFiller : public Filler {
 public:
  enum Kind { kXavier, kMsra };
  FanScaledFiller(const caffe::FillerParameter& param, Kind kind) : Filler(param), kind_(kind) {}
  Status Fill(Blob* blob, std::mt19937* rng) const override {
    RETURN_IF_ERROR(CheckFans(filler_param_, *blob));
    const float n = VarianceNormN(filler_param_, *blob);
    if (kind_ == kXavier) {
      const float scale = std::sqrt(3.0f / n);
      caffe_rng_uniform(blob->count(), -scale, scale, blob->mutable_cpu_data(), rng);
    } else {
      caffe_rng_gaussian(blob->count(), 0.0f, std::sqrt(2.0f / n), blob->mutable_cpu_data(), rng);
    }
    return Status::OK();
  }

 private:
  Kind kind_;
};

// Bilinear interpolation kernels for a Deconvolution that upsamples: with
// K = width = height, f = ceil(K / 2) and c = (K - 1) / (2 f), the value at
// (y, x) of every K x K filter is (1 - |x / f - c|) * (1 - |y / f - c|)
// (x / f - c in float as in Caffe; the product in double, rounded once).
// Exact for the even sizes used to upsample by a power of 2 (4, 8, 16, ...).
class BilinearFiller : public Filler {
 public:
  using Filler::Filler;
  Status Fill(Blob* blob, std::mt19937* rng) const override {
    if (blob->num_axes() != 4) {
      return InvalidArgumentError(FillerError(filler_param_, *blob) + "the blob must have 4 axes");
    }
    if (blob->width() != blob->height()) {
      return InvalidArgumentError(FillerError(filler_param_, *blob) + "the filter must be square");
    }
    const int width = blob->width();
    if (width == 0) return InvalidArgumentError(FillerError(filler_param_, *blob) + "the blob is empty");
    float* data = blob->mutable_cpu_data();
    const int f = static_cast<int>(std::ceil(width / 2.0));
    const float c = static_cast<float>((width - 1) / (2.0 * f));
    for (int i = 0; i < blob->count(); ++i) {
      const float x = static_cast<float>(i % width);
      const float y = static_cast<float>((i / width) % blob->height());
      const double wx = 1.0 - std::fabs(static_cast<double>(x / f - c));
      const double wy = 1.0 - std::fabs(static_cast<double>(y / f - c));
      data[i] = static_cast<float>(wx * wy);
    }
    return Status::OK();
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
  if (param.sparse() != -1 && type != "gaussian") {
    return InvalidArgumentError("filler \"" + type + "\": sparse = " + std::to_string(param.sparse()) +
                                " is only for the gaussian filler (Caffe: sparsity not supported by this filler)");
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
    if (param.sparse() < -1) {
      return InvalidArgumentError("gaussian filler: sparse must be -1 (dense) or >= 0, got " +
                                  std::to_string(param.sparse()));
    }
    filler = std::make_unique<GaussianFiller>(param);
  } else if (type == "positive_unitball") {
    filler = std::make_unique<PositiveUnitballFiller>(param);
  } else if (type == "xavier") {
    filler = std::make_unique<FanScaledFiller>(param, FanScaledFiller::kXavier);
  } else if (type == "msra") {
    filler = std::make_unique<FanScaledFiller>(param, FanScaledFiller::kMsra);
  } else if (type == "bilinear") {
    filler = std::make_unique<BilinearFiller>(param);
  } else {
    return InvalidArgumentError("unknown filler type \"" + type +
                                "\" (Caffe's: constant, uniform, gaussian, positive_unitball, xavier, msra, bilinear)");
  }
  return filler;
}

Status FillBlob(const caffe::FillerParameter& param, Blob* blob, std::mt19937* rng) {
  ASSIGN_OR_RETURN(std::unique_ptr<Filler> filler, CreateFiller(param));
  return filler->Fill(blob, rng);
}

caffe::FillerParameter FillerOrConstant(bool given, const caffe::FillerParameter& filler, float value) {
  if (given) return filler;
  caffe::FillerParameter constant;
  constant.set_type("constant");
  constant.set_value(value);
  return constant;
}

}  // namespace nereus

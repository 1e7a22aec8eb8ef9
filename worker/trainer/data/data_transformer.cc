#include "worker/trainer/data/data_transformer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "worker/trainer/blob.h"

namespace nereus {
namespace data {

StatusOr<std::unique_ptr<DataTransformer>> DataTransformer::Create(const caffe::TransformationParameter& param,
                                                                   caffe::Phase phase) {
  std::unique_ptr<DataTransformer> t(new DataTransformer(param, phase));
  if (param.has_mean_file() && param.mean_value_size() > 0) {
    return InvalidArgumentError("transform_param: specify either mean_file or mean_value, not both");
  }
  if (param.has_mean_file()) {
    const std::string& path = param.mean_file();
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      return NotFoundError("transform_param: cannot open mean_file '" + path + "': " + std::strerror(errno));
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    caffe::BlobProto proto;
    if (!proto.ParseFromString(bytes)) {
      return DataLossError("transform_param: mean_file '" + path + "' is not a binary BlobProto");
    }
    Blob mean;
    RETURN_IF_ERROR(mean.FromProto(proto, /*reshape=*/true).Annotate("transform_param: mean_file '" + path + "'"));
    if (mean.num_axes() > 4 || mean.num() != 1) {
      return InvalidArgumentError("transform_param: mean_file '" + path +
                                  "' must hold one 1 x C x H x W mean, it has shape " + mean.shape_string());
    }
    t->mean_channels_ = mean.channels();
    t->mean_height_ = mean.height();
    t->mean_width_ = mean.width();
    t->mean_.assign(mean.cpu_data(), mean.cpu_data() + mean.count());
  }
  return t;
}

StatusOr<std::vector<int>> DataTransformer::InferShape(const caffe::Datum& datum) const {
  if (datum.encoded()) {
    return InvalidArgumentError("an encoded Datum (a compressed image) must be decoded before it is transformed");
  }
  const int channels = datum.channels();
  const int height = datum.height();
  const int width = datum.width();
  if (channels <= 0 || height <= 0 || width <= 0) {
    return InvalidArgumentError("Datum has shape " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                                std::to_string(width) + "; every dimension must be positive");
  }
  const std::size_t size = static_cast<std::size_t>(channels) * height * width;
  const bool has_uint8 = !datum.data().empty();
  const std::size_t have = has_uint8 ? datum.data().size() : static_cast<std::size_t>(datum.float_data_size());
  if (have != size) {
    return InvalidArgumentError("Datum of shape " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                                std::to_string(width) + " holds " + std::to_string(have) +
                                (has_uint8 ? " data bytes" : " float_data values") + ", expected " +
                                std::to_string(size));
  }
  const int crop = static_cast<int>(param_.crop_size());
  if (crop > 0 && (crop > height || crop > width)) {
    return InvalidArgumentError("transform_param crop_size " + std::to_string(crop) + " is larger than the " +
                                std::to_string(height) + "x" + std::to_string(width) + " image");
  }
  if (!mean_.empty() && (mean_channels_ != channels || mean_height_ != height || mean_width_ != width)) {
    return InvalidArgumentError("mean_file '" + param_.mean_file() + "' is " + std::to_string(mean_channels_) + "x" +
                                std::to_string(mean_height_) + "x" + std::to_string(mean_width_) +
                                " but the Datum is " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                                std::to_string(width));
  }
  const int n_means = param_.mean_value_size();
  if (n_means > 1 && n_means != channels) {
    return InvalidArgumentError("transform_param has " + std::to_string(n_means) +
                                " mean_value entries; give one, or one per channel (" + std::to_string(channels) + ")");
  }
  return std::vector<int>{1, channels, crop > 0 ? crop : height, crop > 0 ? crop : width};
}

Status DataTransformer::Transform(const caffe::Datum& datum, float* out, std::mt19937* rng) const {
  ASSIGN_OR_RETURN(std::vector<int> shape, InferShape(datum));
  const int channels = datum.channels();
  const int datum_height = datum.height();
  const int datum_width = datum.width();
  const int height = shape[2];
  const int width = shape[3];
  const int crop = static_cast<int>(param_.crop_size());
  const float scale = param_.scale();
  const bool train = phase_ == caffe::TRAIN;

  auto rand = [rng](int n) -> int {
    CHECK(rng != nullptr) << "DataTransformer needs an RNG for mirror/crop in TRAIN";
    return static_cast<int>((*rng)() % static_cast<unsigned>(n));
  };
  // Caffe writes do_mirror = param_.mirror() && Rand(2) in both phases;
  // Nereus mirrors in TRAIN only (a test pass must be deterministic).
  const bool do_mirror = train && param_.mirror() && rand(2) != 0;
  int h_off = 0;
  int w_off = 0;
  if (crop > 0) {
    if (train) {
      h_off = rand(datum_height - crop + 1);
      w_off = rand(datum_width - crop + 1);
    } else {
      h_off = (datum_height - crop) / 2;
      w_off = (datum_width - crop) / 2;
    }
  }

  std::vector<float> mean_values(param_.mean_value().begin(), param_.mean_value().end());
  if (mean_values.size() == 1 && channels > 1) mean_values.assign(channels, mean_values[0]);
  const bool has_uint8 = !datum.data().empty();
  const auto* bytes = reinterpret_cast<const unsigned char*>(datum.data().data());

  for (int c = 0; c < channels; ++c) {
    for (int h = 0; h < height; ++h) {
      for (int w = 0; w < width; ++w) {
        const int data_index = (c * datum_height + h_off + h) * datum_width + w_off + w;
        const int top_index = do_mirror ? (c * height + h) * width + (width - 1 - w) : (c * height + h) * width + w;
        const float element = has_uint8 ? static_cast<float>(bytes[data_index]) : datum.float_data(data_index);
        if (!mean_.empty()) {
          out[top_index] = (element - mean_[data_index]) * scale;
        } else if (!mean_values.empty()) {
          out[top_index] = (element - mean_values[c]) * scale;
        } else {
          out[top_index] = element * scale;
        }
      }
    }
  }
  return Status::OK();
}

std::string DatumShapeString(const caffe::Datum& datum) {
  return std::to_string(datum.channels()) + "x" + std::to_string(datum.height()) + "x" + std::to_string(datum.width());
}

}  // namespace data
}  // namespace nereus

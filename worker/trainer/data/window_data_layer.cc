#include "worker/trainer/data/window_data_layer.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <utility>

namespace nereus {
namespace data {
namespace {

// The window file's whitespace-separated tokens, with their lines.
class WindowFileTokens {
 public:
  explicit WindowFileTokens(const std::string& path) : path_(path), in_(path) {}
  bool ok() const { return static_cast<bool>(in_); }
  int line() const { return line_; }

  // The next token, false at the end of the file.
  bool Next(std::string* token) {
    while (!(words_ >> *token)) {
      std::string text;
      if (!std::getline(in_, text)) return false;
      ++line_;
      words_.clear();
      words_.str(text);
    }
    return true;
  }

  // The next token as an integer (or a float); errors name `what`, the
  // file and the line.
  Status NextInt(const std::string& what, int* value) {
    std::string token;
    if (!Next(&token)) return Error("ends where " + what + " was expected");
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(token.c_str(), &end, 10);
    if (*end != '\0' || end == token.c_str() || errno != 0 || v < INT32_MIN || v > INT32_MAX) {
      return Error(what + " '" + token + "' is not an integer");
    }
    *value = static_cast<int>(v);
    return Status::OK();
  }
  Status NextFloat(const std::string& what, float* value) {
    std::string token;
    if (!Next(&token)) return Error("ends where " + what + " was expected");
    char* end = nullptr;
    *value = std::strtof(token.c_str(), &end);
    if (*end != '\0' || end == token.c_str()) return Error(what + " '" + token + "' is not a number");
    return Status::OK();
  }
  Status Error(const std::string& message) const {
    return InvalidArgumentError("window file '" + path_ + "' line " + std::to_string(line_) + ": " + message);
  }

 private:
  const std::string path_;
  std::ifstream in_;
  std::istringstream words_;
  int line_ = 0;
};

}  // namespace

std::string WindowDataLayer::Where(std::uint64_t line, const std::string& path) const {
  return "window file '" + layer_param_.window_data_param().source() + "' line " + std::to_string(line) + " (image '" +
         path + "')";
}

Status WindowDataLayer::ReadWindowFile() {
  const caffe::WindowDataParameter& p = layer_param_.window_data_param();
  WindowFileTokens tokens(p.source());
  if (!tokens.ok()) return NotFoundError("cannot read window file '" + p.source() + "': " + std::strerror(errno));
  const auto shards = static_cast<std::uint64_t>(options_.num_shards);
  const auto shard = static_cast<std::uint64_t>(options_.shard_index);
  std::uint64_t window_index = 0;
  std::map<int, int> classes;
  std::string hash;
  while (tokens.Next(&hash)) {
    if (hash != "#") return tokens.Error("'" + hash + "' where '# IMAGE_INDEX' was expected");
    int index = 0;
    RETURN_IF_ERROR(tokens.NextInt("the image index", &index));
    if (index != static_cast<int>(images_.size())) {
      return tokens.Error("image index " + std::to_string(index) + ", expected " + std::to_string(images_.size()) +
                          " (images are numbered from 0, in order)");
    }
    std::string path;
    if (!tokens.Next(&path)) return tokens.Error("ends where the image path was expected");
    ImageEntry image;
    image.path = p.root_folder() + path;
    const int image_line = tokens.line();
    int channels = 0, height = 0, width = 0, windows = 0;
    RETURN_IF_ERROR(tokens.NextInt("the channels", &channels));
    if (channels != 3) {
      return tokens.Error("image '" + image.path + "' has " + std::to_string(channels) +
                          " channels; WindowData decodes images in color (3)");
    }
    RETURN_IF_ERROR(tokens.NextInt("the height", &height));
    RETURN_IF_ERROR(tokens.NextInt("the width", &width));
    RETURN_IF_ERROR(tokens.NextInt("the number of windows", &windows));
    if (windows < 0) return tokens.Error("a negative number of windows");
    for (int w = 0; w < windows; ++w, ++window_index) {
      Window window;
      float overlap = 0;
      RETURN_IF_ERROR(tokens.NextInt("a window's class", &window.label));
      window.line = tokens.line();
      RETURN_IF_ERROR(tokens.NextFloat("a window's overlap", &overlap));
      RETURN_IF_ERROR(tokens.NextInt("a window's x1", &window.x1));
      RETURN_IF_ERROR(tokens.NextInt("a window's y1", &window.y1));
      RETURN_IF_ERROR(tokens.NextInt("a window's x2", &window.x2));
      RETURN_IF_ERROR(tokens.NextInt("a window's y2", &window.y2));
      if (window.x1 < 0 || window.y1 < 0 || window.x2 < window.x1 || window.y2 < window.y1) {
        return tokens.Error("window " + std::to_string(window.x1) + " " + std::to_string(window.y1) + " " +
                            std::to_string(window.x2) + " " + std::to_string(window.y2) +
                            " is not a box (0 <= x1 <= x2, 0 <= y1 <= y2)");
      }
      window.image = static_cast<int>(images_.size());
      if (overlap >= p.fg_threshold()) {
        if (window.label <= 0) {
          return tokens.Error("a foreground window (overlap " + std::to_string(overlap) + ") of class " +
                              std::to_string(window.label) + "; foreground classes are positive");
        }
        if (window_index % shards == shard) fg_.push_back(window), ++classes[window.label];
      } else if (overlap < p.bg_threshold()) {
        window.label = 0;
        if (window_index % shards == shard) bg_.push_back(window), ++classes[0];
      }
    }
    if (p.cache_images()) {
      std::ifstream in(image.path, std::ios::binary);
      if (!in) {
        return NotFoundError(Where(static_cast<std::uint64_t>(image_line), image.path) +
                             ": cannot read it: " + std::strerror(errno));
      }
      image.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    images_.push_back(std::move(image));
  }
  if (images_.empty()) return InvalidArgumentError("window file '" + p.source() + "' lists no image");
  std::string histogram;
  for (const auto& [label, count] : classes) {
    histogram += " " + std::to_string(label) + ":" + std::to_string(count);
  }
  LOG(INFO) << "layer " << layer_param_.name() << ": " << images_.size() << " images, " << window_index
            << " windows in '" << p.source() << "', " << options_.ShardName() << ": " << fg_.size() << " foreground, "
            << bg_.size() << " background (class:windows" << histogram << ")";
  return Status::OK();
}

Status WindowDataLayer::DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) {
  const caffe::WindowDataParameter& p = layer_param_.window_data_param();
  const caffe::TransformationParameter& t = layer_param_.transform_param();
  RETURN_IF_ERROR(CheckSourceAndBatch(layer_param_.has_window_data_param(), p, "window_data_param", "a window file"));
  if (t.crop_size() == 0) return LayerError("transform_param.crop_size is required (the warped windows' size)");
  if (p.crop_mode() != "warp" && p.crop_mode() != "square") {
    return LayerError("window_data_param.crop_mode is '" + p.crop_mode() + "'; use warp or square");
  }
  if (2 * p.context_pad() >= t.crop_size()) {
    return LayerError("window_data_param.context_pad " + std::to_string(p.context_pad()) +
                      " leaves nothing of a crop of " + std::to_string(t.crop_size()));
  }
  if (p.fg_fraction() < 0 || p.fg_fraction() > 1) return LayerError("window_data_param.fg_fraction must be in [0, 1]");
  if (!options_.valid()) return LayerError("bad sharding: " + options_.ShardName());
  if (!ImageCodecsAvailable()) return LayerError(NoImageCodecsError("WindowData").message());
  batch_size_ = static_cast<int>(p.batch_size());
  crop_size_ = static_cast<int>(t.crop_size());

  auto transformer = DataTransformer::Create(t, phase());
  if (!transformer.ok()) return LayerError(transformer.status().message());
  transformer_ = std::move(transformer).value();
  if (!transformer_->mean_file_values().empty()) {
    const int off_h = (transformer_->mean_height() - crop_size_) / 2;
    const int off_w = (transformer_->mean_width() - crop_size_) / 2;
    if (transformer_->mean_channels() != 3 || off_h < 0 || off_w < 0) {
      return LayerError("mean_file '" + t.mean_file() + "' is " + std::to_string(transformer_->mean_channels()) + "x" +
                        std::to_string(transformer_->mean_height()) + "x" + std::to_string(transformer_->mean_width()) +
                        "; WindowData needs 3 channels at least " + std::to_string(crop_size_) + "x" +
                        std::to_string(crop_size_));
    }
  }
  mean_values_.assign(t.mean_value().begin(), t.mean_value().end());
  if (mean_values_.size() == 1) mean_values_.assign(3, mean_values_[0]);
  if (!mean_values_.empty() && mean_values_.size() != 3) {
    return LayerError("transform_param has " + std::to_string(t.mean_value_size()) +
                      " mean_value entries; give one, or one per channel (3)");
  }

  Status read = ReadWindowFile();
  if (!read.ok()) return LayerError(read.message());
  const int num_fg = static_cast<int>(static_cast<float>(batch_size_) * p.fg_fraction());
  if (num_fg > 0 && fg_.empty()) {
    return LayerError("window file '" + p.source() + "' has no foreground window for " + options_.ShardName() +
                      " (overlap >= " + std::to_string(p.fg_threshold()) + ")");
  }
  if (batch_size_ - num_fg > 0 && bg_.empty()) {
    return LayerError("window file '" + p.source() + "' has no background window for " + options_.ShardName() +
                      " (overlap < " + std::to_string(p.bg_threshold()) + ")");
  }
  top_shapes->push_back({batch_size_, 3, crop_size_, crop_size_});
  top_shapes->push_back({batch_size_});
  return Status::OK();
}

Status WindowDataLayer::Sample(const Window& window, bool mirror, float* out) {
  const caffe::WindowDataParameter& p = layer_param_.window_data_param();
  const ImageEntry& entry = images_[window.image];
  auto decoded =
      p.cache_images() ? DecodeImage(entry.bytes, ImageColor::kColor) : ReadImageFile(entry.path, ImageColor::kColor);
  if (!decoded.ok()) {
    return Status(decoded.status().code(), Where(window.line, entry.path) + ": " + decoded.status().message());
  }
  const Image& image = *decoded;
  const int crop = crop_size_;
  const int context_pad = static_cast<int>(p.context_pad());
  const bool square = p.crop_mode() == "square";
  int x1 = window.x1, y1 = window.y1, x2 = window.x2, y2 = window.y2;
  int warped_width = crop, warped_height = crop;
  int pad_w = 0, pad_h = 0;
  if (context_pad > 0 || square) {
    // Caffe's arithmetic, in float: the region grown so that, warped to
    // crop x crop, it has context_pad pixels of context on each side.
    const float context_scale = static_cast<float>(crop) / static_cast<float>(crop - 2 * context_pad);
    float half_height = static_cast<float>(y2 - y1 + 1) / 2.0f;
    float half_width = static_cast<float>(x2 - x1 + 1) / 2.0f;
    const float center_x = static_cast<float>(x1) + half_width;
    const float center_y = static_cast<float>(y1) + half_height;
    if (square) half_width = half_height = std::max(half_height, half_width);
    x1 = static_cast<int>(std::round(center_x - half_width * context_scale));
    x2 = static_cast<int>(std::round(center_x + half_width * context_scale));
    y1 = static_cast<int>(std::round(center_y - half_height * context_scale));
    y2 = static_cast<int>(std::round(center_y + half_height * context_scale));
    // Clipped to the image; what lies outside becomes padding.
    const int unclipped_height = y2 - y1 + 1;
    const int unclipped_width = x2 - x1 + 1;
    int pad_x1 = std::max(0, -x1);
    int pad_y1 = std::max(0, -y1);
    int pad_x2 = std::max(0, x2 - image.width + 1);
    int pad_y2 = std::max(0, y2 - image.height + 1);
    x1 += pad_x1;
    x2 -= pad_x2;
    y1 += pad_y1;
    y2 -= pad_y2;
    const float scale_x = static_cast<float>(crop) / static_cast<float>(unclipped_width);
    const float scale_y = static_cast<float>(crop) / static_cast<float>(unclipped_height);
    warped_width = static_cast<int>(std::round(static_cast<float>(x2 - x1 + 1) * scale_x));
    warped_height = static_cast<int>(std::round(static_cast<float>(y2 - y1 + 1) * scale_y));
    pad_x1 = static_cast<int>(std::round(static_cast<float>(pad_x1) * scale_x));
    pad_x2 = static_cast<int>(std::round(static_cast<float>(pad_x2) * scale_x));
    pad_y1 = static_cast<int>(std::round(static_cast<float>(pad_y1) * scale_y));
    pad_h = pad_y1;
    pad_w = mirror ? pad_x2 : pad_x1;  // A mirrored window has its padding mirrored too.
    if (pad_h + warped_height > crop) warped_height = crop - pad_h;
    if (pad_w + warped_width > crop) warped_width = crop - pad_w;
  }
  if (x1 < 0 || y1 < 0 || x2 >= image.width || y2 >= image.height || x2 < x1 || y2 < y1) {
    return InvalidArgumentError(Where(window.line, entry.path) + ": window " + std::to_string(window.x1) + " " +
                                std::to_string(window.y1) + " " + std::to_string(window.x2) + " " +
                                std::to_string(window.y2) + " lies outside the " + std::to_string(image.width) + "x" +
                                std::to_string(image.height) + " image");
  }
  auto warped = ResizeImage(CropImage(image, x1, y1, x2 - x1 + 1, y2 - y1 + 1), warped_height, warped_width);
  if (!warped.ok()) {
    return Status(warped.status().code(), Where(window.line, entry.path) + ": " + warped.status().message());
  }
  const float scale = layer_param_.transform_param().scale();
  const std::vector<float>& mean = transformer_->mean_file_values();
  const int mean_height = transformer_->mean_height();
  const int mean_width = transformer_->mean_width();
  const int mean_off = mean.empty() ? 0 : (mean_width - crop) / 2;
  for (int h = 0; h < warped->height; ++h) {
    for (int w = 0; w < warped->width; ++w) {
      const int from_w = mirror ? warped->width - 1 - w : w;
      for (int c = 0; c < 3; ++c) {
        const float pixel = static_cast<float>(warped->at(h, from_w, c));
        const int top_index = (c * crop + h + pad_h) * crop + w + pad_w;
        if (!mean.empty()) {
          const int mean_index = (c * mean_height + h + mean_off + pad_h) * mean_width + w + mean_off + pad_w;
          out[top_index] = (pixel - mean[mean_index]) * scale;
        } else if (!mean_values_.empty()) {
          out[top_index] = (pixel - mean_values_[c]) * scale;
        } else {
          out[top_index] = pixel * scale;
        }
      }
    }
  }
  return Status::OK();
}

Status WindowDataLayer::FillBatch(Batch* batch) {
  const caffe::WindowDataParameter& p = layer_param_.window_data_param();
  gpu::HostBuffer& data = batch->tops[0];
  std::fill(data.data(), data.data() + data.size(), 0.0f);
  const std::size_t per_item = data.size() / static_cast<std::size_t>(batch_size_);
  const int num_fg = static_cast<int>(static_cast<float>(batch_size_) * p.fg_fraction());
  const bool may_mirror = layer_param_.transform_param().mirror() && phase() == caffe::TRAIN;
  std::mt19937& rng = *prefetch_rng();
  int item = 0;
  // Background windows first, then foreground (Caffe's order).
  for (int is_fg = 0; is_fg < 2; ++is_fg) {
    const std::vector<Window>& windows = is_fg ? fg_ : bg_;
    const int count = is_fg ? num_fg : batch_size_ - num_fg;
    for (int n = 0; n < count; ++n, ++item) {
      if (stopping()) return Status::OK();
      const Window& window = windows[rng() % windows.size()];
      const bool mirror = may_mirror && rng() % 2 != 0;
      batch->records[item] = static_cast<std::uint64_t>(window.line);
      batch->keys[item] = images_[window.image].path;
      RETURN_IF_ERROR(Sample(window, mirror, data.data() + per_item * item));
      batch->tops[1].data()[item] = static_cast<float>(window.label);
    }
  }
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

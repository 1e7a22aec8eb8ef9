// WindowDataLayer: Caffe's "WindowData" layer (R-CNN's fine-tuning input).
// window_data_param.source is a window file, repeating per image:
//
//   # IMAGE_INDEX          (0, 1, 2, ... in order)
//   IMAGE_PATH             (read from root_folder + IMAGE_PATH)
//   CHANNELS               (3: images are decoded in color)
//   HEIGHT
//   WIDTH
//   NUM_WINDOWS
//   CLASS OVERLAP X1 Y1 X2 Y2     (NUM_WINDOWS lines; pixel coordinates, inclusive)
//
// A window whose overlap is at least fg_threshold is foreground (its class
// must be positive); one below bg_threshold is background (class 0); the
// rest are not used. Each batch samples, with replacement and from the
// layer's own engine, batch_size - int(batch_size * fg_fraction) background
// windows then the foreground ones; each window is cut out of its image
// (with context_pad pixels of context and crop_mode "warp" or "square", as
// Caffe computes them), warped to crop_size x crop_size (bilinear), mirrored
// at random with transform_param.mirror, the mean (mean_file, centred, or
// mean_value) subtracted and the result scaled; what falls outside the
// image is 0. Top 0 is batch_size x 3 x crop_size x crop_size, top 1 the
// classes. cache_images keeps every image's file in memory. Prefetching
// and the GPU path are PrefetchingDataLayer's.
//
// Data parallelism: worker k of P samples only the windows whose index i in
// the file (0-based, over all images) has i mod P == k.
//
// Differences from Caffe: crop_size, mirror, mean_file and scale are read
// from transform_param (where Caffe's net upgrade moves window_data_param's;
// the deprecated fields there are refused); mirroring happens in TRAIN only,
// as the Data layer's. A malformed window file, an image index out of
// order, a foreground window of class 0, or no window to sample is a SetUp
// error naming the file and the line (Caffe dies or reads past its
// arrays); an image that does not decode is reported by the Forward that
// needs it, naming the image and its window's line.
//
// Not thread-safe (like every Layer); the prefetch thread is internal.
#ifndef NEREUS_WORKER_TRAINER_DATA_WINDOW_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_WINDOW_DATA_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_layer_options.h"
#include "worker/trainer/data/data_transformer.h"
#include "worker/trainer/data/image_io.h"
#include "worker/trainer/data/prefetching_data_layer.h"

namespace nereus {
namespace data {

class WindowDataLayer : public PrefetchingDataLayer {
 public:
  explicit WindowDataLayer(const caffe::LayerParameter& param, DataLayerOptions options = {})
      : PrefetchingDataLayer(param), options_(options) {}
  ~WindowDataLayer() override { StopPrefetch(); }

  const char* type() const override { return "WindowData"; }
  int ExactNumTopBlobs() const override { return 2; }

  // This worker's foreground and background windows, once set up.
  std::size_t foreground_windows() const { return fg_.size(); }
  std::size_t background_windows() const { return bg_.size(); }

 protected:
  Status DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) override;
  Status FillBatch(Batch* batch) override;
  // "window file '<source>' line <line> (image '<path>')".
  std::string Where(std::uint64_t line, const std::string& path) const override;

 private:
  struct Window {
    int image = 0;  // Index in images_.
    int label = 0;
    int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    int line = 0;  // Of the window file.
  };
  struct ImageEntry {
    std::string path;   // root_folder + the file's path.
    std::string bytes;  // The file's bytes, with cache_images.
  };

  Status ReadWindowFile();
  // Cuts, warps, mirrors and normalizes `window` into item `item` of `out`.
  Status Sample(const Window& window, bool mirror, float* out);

  DataLayerOptions options_;
  int batch_size_ = 0;
  int crop_size_ = 0;
  std::unique_ptr<DataTransformer> transformer_;  // Its mean.
  std::vector<float> mean_values_;                // One per channel, or empty.
  std::vector<ImageEntry> images_;
  std::vector<Window> fg_;
  std::vector<Window> bg_;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_WINDOW_DATA_LAYER_H_

// ImageDataLayer: Caffe's "ImageData" layer. Reads images named by a list
// file (image_data_param.source: "PATH LABEL" lines, data/image_list.h) from
// image_data_param.root_folder + PATH, decodes them in color (3 channels,
// BGR) or gray (is_color: false), resizes them to new_height x new_width
// when both are given (bilinear, OpenCV's cv::resize, as Caffe), applies
// transform_param (DataTransformer: crop, mirror, mean, scale, with Caffe's
// arithmetic) and fills top[0] with batch_size x C x H x W floats and top[1]
// with the labels. With shuffle, the list is shuffled at set-up and again at
// every pass (from the layer's own engine); rand_skip skips rng() %
// rand_skip images at set-up. Prefetching and the GPU path are
// PrefetchingDataLayer's.
//
// Data parallelism: as the Data layer, worker k of P reads the list's
// lines i (0-based, in file order) with i mod P == k; shuffling permutes
// only this worker's lines.
//
// Differences from Caffe: every image must have the shape of the first one
// read (after the resize); Caffe reshapes each batch to its first image, so
// that batch_size 1 can feed images of any size. An image that does not
// decode, or has another shape, is an error naming the list file, the line
// and the image, reported by the Forward that needs it (Caffe dies).
// image_data_param's deprecated scale/mean_file/crop_size/mirror are
// refused (put them in transform_param). In a build without OpenCV, SetUp
// fails saying so.
//
// Not thread-safe (like every Layer); the prefetch thread is internal.
#ifndef NEREUS_WORKER_TRAINER_DATA_IMAGE_DATA_LAYER_H_
#define NEREUS_WORKER_TRAINER_DATA_IMAGE_DATA_LAYER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/data_layer_options.h"
#include "worker/trainer/data/data_transformer.h"
#include "worker/trainer/data/image_list.h"
#include "worker/trainer/data/prefetching_data_layer.h"

namespace nereus {
namespace data {

class ImageDataLayer : public PrefetchingDataLayer {
 public:
  explicit ImageDataLayer(const caffe::LayerParameter& param, DataLayerOptions options = {})
      : PrefetchingDataLayer(param), options_(options) {}
  ~ImageDataLayer() override { StopPrefetch(); }

  const char* type() const override { return "ImageData"; }
  int ExactNumTopBlobs() const override { return 2; }

  // This worker's images, once set up.
  std::size_t shard_size() const { return lines_.size(); }

 protected:
  Status DataLayerSetUp(const std::vector<Blob*>& top, std::vector<std::vector<int>>* top_shapes) override;
  Status FillBatch(Batch* batch) override;
  // "image list '<source>' line <line> (image '<path>')".
  std::string Where(std::uint64_t line, const std::string& path) const override;

 private:
  // Reads and decodes lines_[index] into *datum; errors name it.
  Status ReadLine(std::size_t index, caffe::Datum* datum) const;

  DataLayerOptions options_;
  int batch_size_ = 0;
  std::vector<int> datum_shape_;  // {1, C, H, W} after the transform.
  std::string first_shape_;       // "CxHxW" of the first image, before the transform.
  std::unique_ptr<DataTransformer> transformer_;
  // This worker's lines, in reading order; only the prefetch thread touches
  // them after SetUp.
  std::vector<ImageListEntry> lines_;
  std::size_t position_ = 0;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_IMAGE_DATA_LAYER_H_

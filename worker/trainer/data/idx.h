// Reading and writing MNIST IDX files (LeCun's format): a big-endian uint32
// magic, then big-endian uint32 dimensions, then raw unsigned bytes.
//   images: magic 2051 (0x00000803), count, rows, cols, count*rows*cols bytes
//   labels: magic 2049 (0x00000801), count, count bytes
// Every error names the file and what is wrong with it.
#ifndef NEREUS_WORKER_TRAINER_DATA_IDX_H_
#define NEREUS_WORKER_TRAINER_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {
namespace data {

constexpr std::uint32_t kIdxImagesMagic = 2051;
constexpr std::uint32_t kIdxLabelsMagic = 2049;

struct IdxImages {
  std::uint32_t count = 0;
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
  // count * rows * cols bytes, image after image, row-major.
  std::vector<std::uint8_t> pixels;

  const std::uint8_t* image(std::uint32_t i) const { return pixels.data() + static_cast<std::size_t>(i) * rows * cols; }
};

// DATA_LOSS for a bad magic, a header or body shorter than it says, or bytes
// after the last image; NOT_FOUND when the file cannot be opened.
StatusOr<IdxImages> ReadIdxImages(const std::string& path);
StatusOr<std::vector<std::uint8_t>> ReadIdxLabels(const std::string& path);

// Both files, checked to hold the same number of items (INVALID_ARGUMENT naming
// both files and both counts otherwise).
struct IdxDataset {
  IdxImages images;
  std::vector<std::uint8_t> labels;
};
StatusOr<IdxDataset> ReadIdxDataset(const std::string& images_path, const std::string& labels_path);

// Write the files (overwriting). images.pixels must hold count*rows*cols bytes.
Status WriteIdxImages(const std::string& path, const IdxImages& images);
Status WriteIdxLabels(const std::string& path, const std::vector<std::uint8_t>& labels);

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_IDX_H_

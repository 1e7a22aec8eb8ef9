#include "worker/trainer/data/idx.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/base/file_util.h"

namespace nereus {
namespace data {
namespace {

std::uint32_t BigEndianAt(const std::string& bytes, std::size_t offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data()) + offset;
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}

void AppendBigEndian(std::string* out, std::uint32_t v) {
  out->push_back(static_cast<char>((v >> 24) & 0xff));
  out->push_back(static_cast<char>((v >> 16) & 0xff));
  out->push_back(static_cast<char>((v >> 8) & 0xff));
  out->push_back(static_cast<char>(v & 0xff));
}

// Checks the header (magic and `dims` uint32 sizes) and that the body holds
// exactly the product of the sizes. Returns the sizes.
StatusOr<std::vector<std::uint32_t>> ParseHeader(const std::string& path, const std::string& bytes, std::uint32_t magic,
                                                 const char* kind, int dims) {
  const std::size_t header = 4 * (1 + static_cast<std::size_t>(dims));
  if (bytes.size() < 4) {
    return DataLossError("IDX " + std::string(kind) + " file '" + path +
                         "' is truncated: " + std::to_string(bytes.size()) + " bytes, too short for the magic number");
  }
  const std::uint32_t got = BigEndianAt(bytes, 0);
  if (got != magic) {
    return DataLossError("IDX " + std::string(kind) + " file '" + path + "' has bad magic " + std::to_string(got) +
                         " (expected " + std::to_string(magic) + ")");
  }
  if (bytes.size() < header) {
    return DataLossError("IDX " + std::string(kind) + " file '" + path + "' is truncated: " +
                         std::to_string(bytes.size()) + " bytes, the header needs " + std::to_string(header));
  }
  std::vector<std::uint32_t> sizes;
  unsigned long long body = 1;
  bool overflow = false;
  for (int d = 0; d < dims; ++d) {
    sizes.push_back(BigEndianAt(bytes, 4 + 4 * static_cast<std::size_t>(d)));
    overflow |= __builtin_mul_overflow(body, static_cast<unsigned long long>(sizes.back()), &body);
  }
  if (overflow) {
    return DataLossError("IDX " + std::string(kind) + " file '" + path + "' has a header whose sizes multiply past " +
                         "2^64 bytes: the file is corrupt");
  }
  const unsigned long long have = bytes.size() - header;
  if (have < body) {
    return DataLossError("IDX " + std::string(kind) + " file '" + path + "' is truncated: " + "the header promises " +
                         std::to_string(body) + " data bytes, the file has " + std::to_string(have));
  }
  if (have > body) {
    return DataLossError("IDX " + std::string(kind) + " file '" + path + "' has " + std::to_string(have - body) +
                         " bytes after the " + std::to_string(body) + " data bytes its header promises");
  }
  return sizes;
}

Status WriteWholeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return InvalidArgumentError("cannot create IDX file '" + path + "': " + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return DataLossError("error writing IDX file '" + path + "'");
  return Status::OK();
}

}  // namespace

StatusOr<IdxImages> ReadIdxImages(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path, "IDX file"));
  ASSIGN_OR_RETURN(std::vector<std::uint32_t> sizes, ParseHeader(path, bytes, kIdxImagesMagic, "images", 3));
  IdxImages images;
  images.count = sizes[0];
  images.rows = sizes[1];
  images.cols = sizes[2];
  images.pixels.assign(bytes.begin() + 16, bytes.end());
  return images;
}

StatusOr<std::vector<std::uint8_t>> ReadIdxLabels(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(path, "IDX file"));
  ASSIGN_OR_RETURN(std::vector<std::uint32_t> sizes, ParseHeader(path, bytes, kIdxLabelsMagic, "labels", 1));
  (void)sizes;
  return std::vector<std::uint8_t>(bytes.begin() + 8, bytes.end());
}

StatusOr<IdxDataset> ReadIdxDataset(const std::string& images_path, const std::string& labels_path) {
  IdxDataset dataset;
  ASSIGN_OR_RETURN(dataset.images, ReadIdxImages(images_path));
  ASSIGN_OR_RETURN(dataset.labels, ReadIdxLabels(labels_path));
  if (dataset.images.count != dataset.labels.size()) {
    return InvalidArgumentError("count mismatch: images file '" + images_path + "' holds " +
                                std::to_string(dataset.images.count) + " images but labels file '" + labels_path +
                                "' holds " + std::to_string(dataset.labels.size()) + " labels");
  }
  return dataset;
}

Status WriteIdxImages(const std::string& path, const IdxImages& images) {
  const std::size_t body = static_cast<std::size_t>(images.count) * images.rows * images.cols;
  if (images.pixels.size() != body) {
    return InvalidArgumentError("cannot write IDX images file '" + path + "': " + std::to_string(images.pixels.size()) +
                                " pixel bytes for " + std::to_string(images.count) + " images of " +
                                std::to_string(images.rows) + "x" + std::to_string(images.cols));
  }
  std::string bytes;
  bytes.reserve(16 + body);
  AppendBigEndian(&bytes, kIdxImagesMagic);
  AppendBigEndian(&bytes, images.count);
  AppendBigEndian(&bytes, images.rows);
  AppendBigEndian(&bytes, images.cols);
  bytes.append(images.pixels.begin(), images.pixels.end());
  return WriteWholeFile(path, bytes);
}

Status WriteIdxLabels(const std::string& path, const std::vector<std::uint8_t>& labels) {
  std::string bytes;
  bytes.reserve(8 + labels.size());
  AppendBigEndian(&bytes, kIdxLabelsMagic);
  AppendBigEndian(&bytes, static_cast<std::uint32_t>(labels.size()));
  bytes.append(labels.begin(), labels.end());
  return WriteWholeFile(path, bytes);
}

}  // namespace data
}  // namespace nereus

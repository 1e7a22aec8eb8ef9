// nereus_compute_image_mean: Caffe's compute_image_mean. The mean of every
// Datum in an LMDB or LevelDB, written as a binary BlobProto (1 x C x H x W,
// Caffe's mean.binaryproto, what transform_param.mean_file reads):
//
//   nereus_compute_image_mean [FLAGS] INPUT_DB [OUTPUT_FILE]
//
// Encoded records are decoded as stored (Caffe's DecodeDatumNative). It
// prints each channel's mean value (what transform_param.mean_value takes),
// as Caffe logs them. Differences from Caffe: --backend defaults to the
// backend the directory holds (Caffe's default is lmdb); the sums are kept
// in double (Caffe's float sums lose precision past a few thousand images);
// a record of another size, one that is not a Datum or does not decode is
// an error naming the database and the record; OUTPUT_FILE is written under
// a temporary name and renamed, so a failed run leaves nothing there.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/base/init_binary.h"
#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/image_io.h"

DEFINE_string(backend, "", "The backend {leveldb, lmdb} containing the images; empty: the one INPUT_DB holds");

namespace {

using nereus::DataLossError;
using nereus::Status;

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      const std::string why = std::strerror(errno);
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      return nereus::InternalError("cannot write '" + temporary + "': " + why);
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    return nereus::InternalError("cannot rename '" + temporary + "' to '" + path + "': " + error.message());
  }
  return Status::OK();
}

Status ComputeMean(const std::string& input, const std::string& output) {
  nereus::data::DbBackend backend;
  if (FLAGS_backend.empty()) {
    ASSIGN_OR_RETURN(backend, nereus::data::DetectDbBackend(input));
  } else {
    auto parsed = nereus::data::ParseDbBackend(FLAGS_backend);
    if (!parsed.ok()) return nereus::InvalidArgumentError("--backend: " + parsed.status().message());
    backend = *parsed;
  }
  ASSIGN_OR_RETURN(auto db, nereus::data::Database::Open(backend, input, nereus::data::DbMode::kRead));
  ASSIGN_OR_RETURN(auto cursor, db->NewCursor());
  if (!cursor->valid()) {
    RETURN_IF_ERROR(cursor->status());
    return nereus::InvalidArgumentError(db->Name() + " holds no records");
  }
  std::vector<double> sum;
  int channels = 0, height = 0, width = 0;
  std::uint64_t count = 0;
  caffe::Datum datum;
  for (; cursor->valid() && cursor->epoch() == 0; cursor->Next(), ++count) {
    const std::string where =
        db->Name() + ", record " + std::to_string(count) + " (key '" + std::string(cursor->key()) + "')";
    if (!datum.ParseFromArray(cursor->value().data(), static_cast<int>(cursor->value().size()))) {
      return DataLossError(where + ": not a Datum (" + std::to_string(cursor->value().size()) +
                           " bytes that do not parse)");
    }
    if (datum.encoded()) {
      Status decoded = nereus::data::DecodeDatum(&datum, nereus::data::ImageColor::kNative);
      if (!decoded.ok()) return Status(decoded.code(), where + ": " + decoded.message());
    }
    const std::size_t size = static_cast<std::size_t>(std::max(0, datum.channels())) * std::max(0, datum.height()) *
                             std::max(0, datum.width());
    const bool bytes = !datum.data().empty();
    const std::size_t have = bytes ? datum.data().size() : static_cast<std::size_t>(datum.float_data_size());
    if (size == 0 || have != size) {
      return DataLossError(where + ": Datum of shape " + std::to_string(datum.channels()) + "x" +
                           std::to_string(datum.height()) + "x" + std::to_string(datum.width()) + " holds " +
                           std::to_string(have) + (bytes ? " data bytes" : " float_data values"));
    }
    if (count == 0) {
      channels = datum.channels(), height = datum.height(), width = datum.width();
      sum.assign(size, 0.0);
    } else if (datum.channels() != channels || datum.height() != height || datum.width() != width) {
      return DataLossError(where + ": Datum of shape " + std::to_string(datum.channels()) + "x" +
                           std::to_string(datum.height()) + "x" + std::to_string(datum.width()) +
                           "; the first record is " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
                           std::to_string(width));
    }
    if (bytes) {
      const auto* data = reinterpret_cast<const unsigned char*>(datum.data().data());
      for (std::size_t i = 0; i < size; ++i) sum[i] += data[i];
    } else {
      for (std::size_t i = 0; i < size; ++i) sum[i] += datum.float_data(static_cast<int>(i));
    }
    if ((count + 1) % 10000 == 0) LOG(INFO) << "Processed " << count + 1 << " files.";
  }
  RETURN_IF_ERROR(cursor->status());
  LOG(INFO) << "Processed " << count << " files.";

  caffe::BlobProto mean;
  mean.set_num(1);
  mean.set_channels(channels);
  mean.set_height(height);
  mean.set_width(width);
  for (double s : sum) mean.add_data(static_cast<float>(s / static_cast<double>(count)));
  if (!output.empty()) {
    std::string bytes;
    if (!mean.SerializeToString(&bytes)) return nereus::InternalError("cannot serialize the mean");
    RETURN_IF_ERROR(WriteFileAtomically(output, bytes));
    LOG(INFO) << "Write to " << output;
  }
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  std::printf("Number of channels: %d\n", channels);
  for (int c = 0; c < channels; ++c) {
    double channel = 0;
    for (std::size_t i = 0; i < plane; ++i) channel += sum[c * plane + i];
    std::printf("mean_value channel [%d]: %.9g\n", c, channel / static_cast<double>(count) / plane);
  }
  return Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Computes the mean image of the Datum records of an LMDB or LevelDB.\n"
      "Usage: nereus_compute_image_mean [FLAGS] INPUT_DB [OUTPUT_FILE]",
      &argc, &argv);
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr,
                 "nereus_compute_image_mean: expected INPUT_DB [OUTPUT_FILE], got %d argument(s) (see --help)\n",
                 argc - 1);
    return 2;
  }
  const Status status = ComputeMean(argv[1], argc == 3 ? argv[2] : "");
  if (!status.ok()) {
    std::fprintf(stderr, "nereus_compute_image_mean: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

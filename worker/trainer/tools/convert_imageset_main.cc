// nereus_convert_imageset: Caffe's convert_imageset. Turns a list of images
// and labels into an LMDB or LevelDB of Datum records:
//
//   nereus_convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME
//
// LISTFILE has one "PATH LABEL" line per image (data/image_list.h); the
// image is read from ROOTFOLDER + PATH (a plain concatenation, as in Caffe:
// end ROOTFOLDER with '/'). Record i (in list order, or shuffled with
// --shuffle) has key "%08d_PATH" of i and holds the image decoded in color
// (3 channels, BGR) or gray (--gray), resized with --resize_height and
// --resize_width (both, or neither), as raw bytes, or kept encoded with
// --encoded (--encode_type, else each file's own extension). The flags are
// Caffe's, with Caffe's meanings.
//
// Unlike Caffe, which logs an unreadable image and leaves it out, any bad
// input stops the run with an error naming the list file and its line (an
// image that does not decode, a line without a label, --check_size finding
// an image of another size), and nothing is left at DB_NAME: the database is
// written under a temporary name and renamed once complete. --shuffle draws
// from --shuffle_seed, so a list shuffles the same way every run.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/base/init_binary.h"
#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/image_io.h"
#include "worker/trainer/data/image_list.h"

DEFINE_bool(gray, false, "When this option is on, treat images as grayscale ones");
DEFINE_bool(shuffle, false, "Randomly shuffle the order of images and their labels");
DEFINE_uint32(shuffle_seed, 0, "Seed of --shuffle's permutation (std::mt19937)");
DEFINE_string(backend, "lmdb", "The backend {lmdb, leveldb} for storing the result");
DEFINE_int32(resize_width, 0, "Width images are resized to");
DEFINE_int32(resize_height, 0, "Height images are resized to");
DEFINE_bool(check_size, false, "When this option is on, check that all the datum have the same size");
DEFINE_bool(encoded, false, "When this option is on, the encoded image will be save in datum");
DEFINE_string(encode_type, "", "Optional: What type should we encode the image as ('png','jpg',...).");
DEFINE_int32(commit_every, 1000, "Records per write transaction (LMDB) or write batch (LevelDB)");

namespace {

using nereus::InvalidArgumentError;
using nereus::Status;

// The encoding of a file when --encode_type is not given: its extension.
nereus::StatusOr<std::string> GuessEncoding(const std::string& path) {
  const std::size_t dot = path.rfind('.');
  const std::size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot + 1 == path.size()) {
    return InvalidArgumentError("cannot guess the encoding of '" + path + "' (no file extension); give --encode_type");
  }
  std::string ext = path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

Status Convert(const std::string& root, const std::string& list_file, const std::string& db_name) {
  if (!nereus::data::ImageCodecsAvailable()) return nereus::data::NoImageCodecsError("nereus_convert_imageset");
  const auto backend = nereus::data::ParseDbBackend(FLAGS_backend);
  if (!backend.ok()) return InvalidArgumentError("--backend: " + backend.status().message());
  if (FLAGS_resize_height < 0 || FLAGS_resize_width < 0) {
    return InvalidArgumentError("--resize_height and --resize_width cannot be negative");
  }
  if ((FLAGS_resize_height == 0) != (FLAGS_resize_width == 0)) {
    return InvalidArgumentError("give both --resize_height and --resize_width, or neither (got " +
                                std::to_string(FLAGS_resize_height) + " and " + std::to_string(FLAGS_resize_width) +
                                ")");
  }
  if (FLAGS_commit_every <= 0) {
    return InvalidArgumentError("--commit_every must be positive, got " + std::to_string(FLAGS_commit_every));
  }
  const bool is_color = !FLAGS_gray;
  // Caffe: an encode_type implies encoded.
  const bool encoded = FLAGS_encoded || !FLAGS_encode_type.empty();

  ASSIGN_OR_RETURN(std::vector<nereus::data::ImageListEntry> lines, nereus::data::ReadImageList(list_file));
  if (FLAGS_shuffle) {
    std::mt19937 rng(FLAGS_shuffle_seed);
    std::shuffle(lines.begin(), lines.end(), rng);
  }
  LOG(INFO) << "A total of " << lines.size() << " images.";

  ASSIGN_OR_RETURN(auto output, nereus::data::NewDatabaseFile::Create(*backend, db_name));
  nereus::data::DbWriter writer(output->db(), static_cast<std::size_t>(FLAGS_commit_every));
  int first_channels = 0, first_height = 0, first_width = 0;
  std::string first_where;
  char index[32];
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const nereus::data::ImageListEntry& line = lines[i];
    const std::string where = "image list '" + list_file + "' line " + std::to_string(line.line);
    const std::string path = root + line.path;
    auto annotate = [&where](const Status& s) { return Status(s.code(), where + ": " + s.message()); };
    nereus::StatusOr<caffe::Datum> datum = InvalidArgumentError("unset");
    int channels = 0, height = 0, width = 0;
    if (encoded) {
      std::string encoding = FLAGS_encode_type;
      if (encoding.empty()) {
        auto guessed = GuessEncoding(line.path);
        if (!guessed.ok()) return annotate(guessed.status());
        encoding = *guessed;
      }
      nereus::data::Image decoded;
      datum = nereus::data::ReadImageToEncodedDatum(path, line.label, FLAGS_resize_height, FLAGS_resize_width, is_color,
                                                    encoding, &decoded);
      channels = decoded.channels, height = decoded.height, width = decoded.width;
    } else {
      datum = nereus::data::ReadImageToDatum(path, line.label, FLAGS_resize_height, FLAGS_resize_width, is_color);
      if (datum.ok()) channels = datum->channels(), height = datum->height(), width = datum->width();
    }
    if (!datum.ok()) return annotate(datum.status());
    if (FLAGS_check_size) {
      if (i == 0) {
        first_channels = channels, first_height = height, first_width = width;
        first_where = where;
      } else if (channels != first_channels || height != first_height || width != first_width) {
        return InvalidArgumentError(
            where + ": image '" + path + "' is " + std::to_string(channels) + "x" + std::to_string(height) + "x" +
            std::to_string(width) + " but the first (" + first_where + ") is " + std::to_string(first_channels) + "x" +
            std::to_string(first_height) + "x" + std::to_string(first_width) + " (--check_size)");
      }
    }
    std::snprintf(index, sizeof(index), "%08zu", i);
    std::string value;
    if (!datum->SerializeToString(&value)) return nereus::InternalError(where + ": cannot serialize its Datum");
    RETURN_IF_ERROR(writer.Put(std::string(index) + "_" + line.path, std::move(value)).Annotate(where));
    if ((i + 1) % 1000 == 0) LOG(INFO) << "Processed " << i + 1 << " files.";
  }
  RETURN_IF_ERROR(writer.Flush());
  RETURN_IF_ERROR(output->Commit());
  LOG(INFO) << "Wrote " << writer.committed() << " records to " << db_name;
  return Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Converts a set of images to an LMDB or LevelDB of Caffe Datum records.\n"
      "Usage: nereus_convert_imageset [FLAGS] ROOTFOLDER/ LISTFILE DB_NAME\n"
      "LISTFILE holds one 'PATH LABEL' line per image, read from ROOTFOLDER/PATH.",
      &argc, &argv);
  if (argc != 4) {
    std::fprintf(stderr,
                 "nereus_convert_imageset: expected ROOTFOLDER/ LISTFILE DB_NAME, got %d argument(s) (see --help)\n",
                 argc - 1);
    return 2;
  }
  const Status status = Convert(argv[1], argv[2], argv[3]);
  if (!status.ok()) {
    std::fprintf(stderr, "nereus_convert_imageset: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

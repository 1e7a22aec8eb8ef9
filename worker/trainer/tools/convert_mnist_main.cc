// nereus_convert_mnist: turns a pair of MNIST IDX files into an LMDB (or a
// LevelDB) of Datum records, as Caffe's examples/mnist/convert_mnist_data.cpp
// does: record i has key "%08d" of i, channels 1, height rows, width cols, the
// image's raw bytes as data and its label. The records keep the order of the
// IDX files. The database is written under a temporary name and renamed to
// --output once complete, so a failed run leaves nothing there.
//
//   nereus_convert_mnist --images=train-images-idx3-ubyte
//       --labels=train-labels-idx1-ubyte --output=mnist_train_lmdb
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>

#include "common/base/init_binary.h"
#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/idx.h"

DEFINE_string(images, "", "MNIST images file in IDX format (magic 2051), e.g. train-images-idx3-ubyte");
DEFINE_string(labels, "", "MNIST labels file in IDX format (magic 2049), e.g. train-labels-idx1-ubyte");
DEFINE_string(output, "", "Database directory to create; it must not exist");
DEFINE_string(backend, "lmdb", "Database backend: lmdb or leveldb");
DEFINE_int32(commit_every, 1000, "Records per write transaction (LMDB) or write batch (LevelDB)");

namespace {

nereus::Status Convert() {
  using nereus::InvalidArgumentError;
  if (FLAGS_images.empty()) return InvalidArgumentError("--images is required (an IDX images file)");
  if (FLAGS_labels.empty()) return InvalidArgumentError("--labels is required (an IDX labels file)");
  if (FLAGS_output.empty()) return InvalidArgumentError("--output is required (a database directory)");
  const auto backend = nereus::data::ParseDbBackend(FLAGS_backend);
  if (!backend.ok()) return InvalidArgumentError("--backend: " + backend.status().message());
  if (FLAGS_commit_every <= 0) {
    return InvalidArgumentError("--commit_every must be positive, got " + std::to_string(FLAGS_commit_every));
  }
  ASSIGN_OR_RETURN(nereus::data::IdxDataset dataset, nereus::data::ReadIdxDataset(FLAGS_images, FLAGS_labels));
  ASSIGN_OR_RETURN(auto output, nereus::data::NewDatabaseFile::Create(*backend, FLAGS_output));
  nereus::data::DbWriter writer(output->db(), static_cast<std::size_t>(FLAGS_commit_every));

  const auto& images = dataset.images;
  const std::size_t image_bytes = static_cast<std::size_t>(images.rows) * images.cols;
  caffe::Datum datum;
  datum.set_channels(1);
  datum.set_height(static_cast<int>(images.rows));
  datum.set_width(static_cast<int>(images.cols));
  char key[16];
  for (std::uint32_t i = 0; i < images.count; ++i) {
    datum.set_data(images.image(i), image_bytes);
    datum.set_label(dataset.labels[i]);
    std::snprintf(key, sizeof(key), "%08u", i);
    std::string value;
    if (!datum.SerializeToString(&value)) {
      return nereus::InternalError("cannot serialize the Datum of record " + std::to_string(i));
    }
    RETURN_IF_ERROR(writer.Put(key, std::move(value)).Annotate("writing record " + std::string(key)));
  }
  RETURN_IF_ERROR(writer.Flush());
  RETURN_IF_ERROR(output->Commit());
  LOG(INFO) << "Wrote " << writer.committed() << " records of " << images.rows << "x" << images.cols << " from "
            << FLAGS_images << " and " << FLAGS_labels << " to " << FLAGS_output;
  return nereus::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Converts MNIST IDX images and labels into an LMDB or LevelDB of Caffe Datum records.\n"
      "Usage: nereus_convert_mnist --images=FILE --labels=FILE --output=DB_DIR [--backend=lmdb|leveldb]",
      &argc, &argv);
  if (argc > 1) {
    std::fprintf(stderr, "nereus_convert_mnist: unexpected argument '%s' (all inputs are flags; see --help)\n",
                 argv[1]);
    return 2;
  }
  const nereus::Status status = Convert();
  if (!status.ok()) {
    std::fprintf(stderr, "nereus_convert_mnist: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

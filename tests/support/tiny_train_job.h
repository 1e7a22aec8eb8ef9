// A tiny training job for the trainer-mode tests (nereus_worker --solver):
// a 1x8x8 LMDB of kRecords images whose label is the brightest quadrant, a
// small conv net over it and an SGD solver.
#ifndef NEREUS_TESTS_SUPPORT_TINY_TRAIN_JOB_H_
#define NEREUS_TESTS_SUPPORT_TINY_TRAIN_JOB_H_

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace test {

constexpr int kRecords = 256;  // 4 standalone batches of 64 per pass.
constexpr int kSide = 8;
constexpr int kClasses = 4;

// kRecords 1x8x8 uint8 images; the label is the brightest quadrant, so the
// net has something to learn.
inline void WriteTinyLmdb(const std::string& path) {
  WriteImageLmdb(path, kRecords, 1, kSide, 42, [](int, const std::string& pixels) {
    return BrightestRegion(pixels, kSide, kClasses,
                           [](int x, int y) { return (y >= kSide / 2) * 2 + (x >= kSide / 2); });
  });
}

// A small conv net without dropout (nothing random after initialization);
// the bias multipliers exercise lr_mult/decay_mult on the servers.
inline std::string TinyNet(const std::string& source, int batch) {
  return "name: \"tiny\"\n" + ScaledLmdbDataLayer("data", source, batch) +
         R"(layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" }
    bias_filler { type: "constant" value: 0.1 } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
)";
}

// The SGD settings of the equivalence test; `update` replaces them (e.g. with
// another solver type's).
inline constexpr char kTinySgd[] =
    "base_lr: 0.1\nmomentum: 0.9\nweight_decay: 0.001\nlr_policy: \"inv\"\ngamma: 0.01\npower: 0.75\n";

inline std::string TinySolver(const std::string& net, int max_iter, const std::string& update = kTinySgd) {
  return "net: \"" + net + "\"\n" + update + "display: 5\nmax_iter: " + std::to_string(max_iter) +
         "\nrandom_seed: 7\nsnapshot_after_train: false\nsolver_mode: CPU\n";
}

// The tiny data, a tiny net of batch `batch` over it and a solver of
// `max_iter` iterations with the settings `update`, in DIR (tiny_lmdb,
// net.prototxt, solver.prototxt); returns the solver's path.
inline std::string WriteTinyJob(const TempDir& dir, int batch, int max_iter, const std::string& update = kTinySgd) {
  WriteTinyLmdb(dir.File("tiny_lmdb"));
  WriteText(dir.File("net.prototxt"), TinyNet(dir.File("tiny_lmdb"), batch));
  WriteText(dir.File("solver.prototxt"), TinySolver(dir.File("net.prototxt"), max_iter, update));
  return dir.File("solver.prototxt");
}

// nereus_worker --standalone --solver=SOLVER (and `flags`), writing its final
// weights to DIR/NAME.caffemodel and its log to DIR/NAME.log; fails the test,
// with the log, unless it exits 0 within 60 s. Call inside
// ASSERT_NO_FATAL_FAILURE.
inline void TrainStandalone(const TempDir& dir, const std::string& name, const std::string& solver,
                            const std::vector<std::string>& flags = {}) {
  std::vector<std::string> argv = {BinaryPath("nereus_worker"), "--standalone", "--solver=" + solver,
                                   "--weights_out=" + dir.File(name + ".caffemodel")};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ASSERT_EQ(RunToExit(argv, dir.File(name + ".log"), std::chrono::seconds(60)), 0) << ReadFile(dir.File(name + ".log"));
}

// The equivalence job of the trainer tests, on the tiny net and data:
// `iterations` of the solver settings `update` standalone with batch 64
// (DIR/standalone.caffemodel) and as 2 workers of batch 32 through 2 servers
// whose 128-byte partitions spread every tensor over both
// (DIR/w<rank>.caffemodel, summaries DIR/w<rank>.json); and the initial
// weights, 0 iterations (DIR/init.caffemodel). Fails the test unless every run
// exits 0; call inside ASSERT_NO_FATAL_FAILURE.
inline void RunTinyEquivalence(const TempDir& dir, int iterations, const std::string& update = kTinySgd) {
  const std::string db = dir.File("tiny_lmdb");
  WriteTinyLmdb(db);
  WriteText(dir.File("net64.prototxt"), TinyNet(db, 64));
  WriteText(dir.File("net32.prototxt"), TinyNet(db, 32));
  WriteText(dir.File("init.prototxt"), TinySolver(dir.File("net64.prototxt"), 0, update));
  WriteText(dir.File("standalone.prototxt"), TinySolver(dir.File("net64.prototxt"), iterations, update));
  WriteText(dir.File("distributed.prototxt"), TinySolver(dir.File("net32.prototxt"), iterations, update));
  LocalCluster cluster(TwoWorkerTrainJob(dir, dir.File("distributed.prototxt"), {"--partition_bytes=128"}), dir);
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "standalone", dir.File("standalone.prototxt")));
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "init", dir.File("init.prototxt")));
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_TINY_TRAIN_JOB_H_

// A tiny training job for the trainer-mode tests (nereus_worker --solver):
// a 1x8x8 LMDB of kRecords images whose label is the brightest quadrant, a
// small conv net over it and an SGD solver.
#ifndef NEREUS_TESTS_SUPPORT_TINY_TRAIN_JOB_H_
#define NEREUS_TESTS_SUPPORT_TINY_TRAIN_JOB_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/process_util.h"
#include "worker/trainer/data/db.h"

namespace nereus {
namespace test {

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// Runs `argv` to completion (bounded); returns the exit code.
inline int RunToExit(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds timeout) {
  auto p = Subprocess::Start(argv, log);
  auto code = p->WaitFor(timeout);
  EXPECT_TRUE(code.has_value()) << argv[0] << " did not exit within " << timeout.count() << " s:\n" << p->Log();
  return code.value_or(-1);
}

constexpr int kRecords = 256;  // 4 standalone batches of 64 per pass.
constexpr int kSide = 8;
constexpr int kClasses = 4;

// kRecords 1x8x8 uint8 images; the label is the brightest quadrant, so the
// net has something to learn.
inline void WriteTinyLmdb(const std::string& path) {
  auto db = data::LmdbDatabase::Open(path, data::DbMode::kNew);
  ASSERT_TRUE(db.ok()) << db.status();
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> pixel(0, 255);
  std::vector<std::pair<std::string, std::string>> records;
  for (int r = 0; r < kRecords; ++r) {
    std::string bytes(kSide * kSide, '\0');
    int sums[kClasses] = {0, 0, 0, 0};
    for (int y = 0; y < kSide; ++y) {
      for (int x = 0; x < kSide; ++x) {
        const int v = pixel(rng);
        bytes[y * kSide + x] = static_cast<char>(v);
        sums[(y >= kSide / 2) * 2 + (x >= kSide / 2)] += v;
      }
    }
    caffe::Datum datum;
    datum.set_channels(1);
    datum.set_height(kSide);
    datum.set_width(kSide);
    datum.set_data(bytes);
    datum.set_label(static_cast<int>(std::max_element(sums, sums + kClasses) - sums));
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", r);
    records.emplace_back(key, datum.SerializeAsString());
  }
  Status st = (*db)->PutBatch(records);
  ASSERT_TRUE(st.ok()) << st;
}

// A small conv net without dropout (nothing random after initialization);
// the bias multipliers exercise lr_mult/decay_mult on the servers.
inline std::string TinyNet(const std::string& source, int batch) {
  return R"(name: "tiny"
layer { name: "data" type: "Data" top: "data" top: "label"
  transform_param { scale: 0.00390625 }
  data_param { source: ")" +
         source + R"(" batch_size: )" + std::to_string(batch) + R"( backend: LMDB } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
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

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_TINY_TRAIN_JOB_H_

// BatchNorm in a data-parallel job (2 workers x 2 servers, real processes):
// the mean/variance/count blobs stay local to each worker -- never pushed as
// gradients, never overwritten by a pull -- while every learned blob is the
// servers' and so bitwise equal on both workers.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "tests/support/bytes_equal.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace test {
namespace {

constexpr int kIterations = 5;

std::string BatchNormNet(const std::string& source) {
  return "name: \"bn\"\n" + ScaledLmdbDataLayer("data", source, 8) +
         R"(layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 bias_term: false weight_filler { type: "xavier" } } }
layer { name: "bn1" type: "BatchNorm" bottom: "conv1" top: "conv1" }
layer { name: "scale1" type: "Scale" bottom: "conv1" top: "conv1" scale_param { bias_term: true } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "ip1" type: "InnerProduct" bottom: "conv1" top: "ip1"
  inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip1" bottom: "label" top: "loss" }
)";
}

TEST(BatchNormJobTest, StatisticsStayLocalToEachWorker) {
  TempDir dir;
  const std::string db = dir.File("lmdb");
  test::WriteRandomImageLmdb(db, 64, 1, 8, 4, 11);
  test::WriteText(dir.File("net.prototxt"), BatchNormNet(db));
  test::WriteText(dir.File("solver.prototxt"), "net: \"" + dir.File("net.prototxt") +
                                                   "\"\nbase_lr: 0.1\nmomentum: 0.9\n"
                                                   "lr_policy: \"fixed\"\ndisplay: 0\nmax_iter: " +
                                                   std::to_string(kIterations) +
                                                   "\nrandom_seed: 3\nsnapshot_after_train: false\n");
  LocalCluster cluster(TwoWorkerTrainJob(dir, dir.File("solver.prototxt"), {"--partition_bytes=64"}), dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(90), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;

  const auto w0 = ReadWeights(dir.File("w0.caffemodel"));
  const auto w1 = ReadWeights(dir.File("w1.caffemodel"));
  // conv1, bn1 (3), scale1 (2), ip1 (2).
  ASSERT_EQ(8u, w0.size());
  // The learned blobs come from the servers: bit for bit equal.
  for (const char* name : {"conv1/0", "scale1/0", "scale1/1", "ip1/0", "ip1/1"}) {
    EXPECT_TRUE(test::BytesEqual(w0.at(name), w1.at(name), name));
  }
  // Each worker's statistics count its own forward passes: s = 0.999 s + 1,
  // kIterations times (a pull of the servers' copy would reset it).
  float count = 0.0f;
  for (int i = 0; i < kIterations; ++i) count = count * 0.999f + 1.0f;
  EXPECT_TRUE(test::BytesEqual(std::vector<float>{count}, w0.at("bn1/2"), "worker 0 bn1/2"));
  EXPECT_TRUE(test::BytesEqual(std::vector<float>{count}, w1.at("bn1/2"), "worker 1 bn1/2"));
  // ... and their means are of the worker's own shard of the data: non-zero
  // and different on the two workers (one shared copy would make them equal).
  ASSERT_EQ(4u, w0.at("bn1/0").size());
  EXPECT_NE(w0.at("bn1/0"), w1.at("bn1/0"));
  EXPECT_NE(w0.at("bn1/1"), w1.at("bn1/1"));
  for (float v : w0.at("bn1/1")) EXPECT_GT(v, 0.0f);
}

}  // namespace
}  // namespace test
}  // namespace nereus

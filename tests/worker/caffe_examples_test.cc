// Caffe's published examples run unchanged: examples/mnist/mnist_autoencoder
// as Caffe writes it (sparse Gaussian fillers on every InnerProduct, three
// layers named "data" selected by phase and stage, two layers named "loss" in
// one net, a SigmoidCrossEntropyLoss and a loss_weight 0 EuclideanLoss, two
// test nets chosen by test_state stages), on random 28x28 images, trained
// standalone and as 2 workers x 2 servers on 127.0.0.1. Only the LMDB paths
// differ from Caffe's file; the solver is Caffe's mnist_autoencoder_solver
// with a few iterations instead of 65,000.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <string>

#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace test {
namespace {

// Caffe's examples/mnist/mnist_autoencoder.prototxt, its sources replaced.
std::string Autoencoder(const std::string& train_lmdb, const std::string& test_lmdb) {
  auto data = [](const std::string& include, const std::string& source) {
    return R"(layer {
  name: "data"
  type: "Data"
  top: "data"
  include {
)" + include +
           R"(  }
  transform_param {
    scale: 0.0039215684
  }
  data_param {
    source: ")" +
           source + R"("
    batch_size: 100
    backend: LMDB
  }
}
)";
  };
  auto ip = [](const std::string& name, const std::string& bottom, int num_output) {
    return R"(layer {
  name: ")" +
           name + R"("
  type: "InnerProduct"
  bottom: ")" +
           bottom + R"("
  top: ")" +
           name + R"("
  param {
    lr_mult: 1
    decay_mult: 1
  }
  param {
    lr_mult: 1
    decay_mult: 0
  }
  inner_product_param {
    num_output: )" +
           std::to_string(num_output) + R"(
    weight_filler {
      type: "gaussian"
      std: 1
      sparse: 15
    }
    bias_filler {
      type: "constant"
      value: 0
    }
  }
}
)";
  };
  auto sigmoid = [](const std::string& name) {
    return "layer {\n  name: \"" + name + "neuron\"\n  type: \"Sigmoid\"\n  bottom: \"" + name + "\"\n  top: \"" +
           name + "neuron\"\n}\n";
  };
  return "name: \"MNISTAutoencoder\"\n" + data("    phase: TRAIN\n", train_lmdb) +
         data("    phase: TEST\n    stage: \"test-on-train\"\n", train_lmdb) +
         data("    phase: TEST\n    stage: \"test-on-test\"\n", test_lmdb) +
         "layer {\n  name: \"flatdata\"\n  type: \"Flatten\"\n  bottom: \"data\"\n  top: \"flatdata\"\n}\n" +
         ip("encode1", "data", 1000) + sigmoid("encode1") + ip("encode2", "encode1neuron", 500) + sigmoid("encode2") +
         ip("encode3", "encode2neuron", 250) + sigmoid("encode3") + ip("encode4", "encode3neuron", 30) +
         ip("decode4", "encode4", 250) + sigmoid("decode4") + ip("decode3", "decode4neuron", 500) + sigmoid("decode3") +
         ip("decode2", "decode3neuron", 1000) + sigmoid("decode2") + ip("decode1", "decode2neuron", 784) + R"(layer {
  name: "loss"
  type: "SigmoidCrossEntropyLoss"
  bottom: "decode1"
  bottom: "flatdata"
  top: "cross_entropy_loss"
  loss_weight: 1
}
)" + sigmoid("decode1") +
         R"(layer {
  name: "loss"
  type: "EuclideanLoss"
  bottom: "decode1neuron"
  bottom: "flatdata"
  top: "l2_error"
  loss_weight: 0
}
)";
}

// Caffe's examples/mnist/mnist_autoencoder_solver.prototxt with `max_iter`,
// test_interval and test_iter scaled down, its paths in `dir`.
std::string AutoencoderSolver(const TempDir& dir, int max_iter) {
  const std::string net = dir.File("mnist_autoencoder.prototxt");
  return "net: \"" + net + "\"\n" + R"(test_state: { stage: 'test-on-train' }
test_iter: 2
test_state: { stage: 'test-on-test' }
test_iter: 1
test_interval: 3
test_compute_loss: true
base_lr: 0.01
lr_policy: "step"
gamma: 0.1
stepsize: 10000
display: 1
max_iter: )" +
         std::to_string(max_iter) +
         R"(
weight_decay: 0.0005
snapshot: 10000
snapshot_prefix: ")" +
         dir.File("mnist_autoencoder") + R"("
momentum: 0.9
random_seed: 11
# solver mode: CPU or GPU
solver_mode: GPU
)";
}

// The fraction of non-zero values.
double NonZero(const std::vector<float>& v) {
  size_t n = 0;
  for (float x : v) n += x != 0.0f;
  return static_cast<double>(n) / static_cast<double>(v.size());
}

// "%.4f" as the summary line prints it.
const char kFixed[] = "[0-9]+\\.[0-9]{4}";

TEST(CaffeExamplesTest, MnistAutoencoderTrainsStandaloneAndAsTwoWorkersTwoServers) {
  TempDir dir;
  const std::string train = dir.File("mnist_train_lmdb");
  const std::string test = dir.File("mnist_test_lmdb");
  test::WriteRandomImageLmdb(train, 400, 1, 28, 10, 21);
  test::WriteRandomImageLmdb(test, 100, 1, 28, 10, 22);
  WriteText(dir.File("mnist_autoencoder.prototxt"), Autoencoder(train, test));
  WriteText(dir.File("init_solver.prototxt"), AutoencoderSolver(dir, 0));
  WriteText(dir.File("solver.prototxt"), AutoencoderSolver(dir, 6));

  // The initial weights: Caffe's sparse Gaussian keeps each value with
  // probability 15 / num_output.
  ASSERT_EQ(RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + dir.File("init_solver.prototxt"),
                       "--weights_out=" + dir.File("init.caffemodel")},
                      dir.File("init.log"), std::chrono::seconds(120)),
            0)
      << ReadFile(dir.File("init.log"));
  const auto init = ReadWeights(dir.File("init.caffemodel"));
  ASSERT_EQ(init.size(), 16u);                                     // 8 InnerProducts: weights and biases.
  EXPECT_NEAR(NonZero(init.at("encode1/0")), 15.0 / 1000, 0.002);  // 784,000 values.
  EXPECT_NEAR(NonZero(init.at("decode1/0")), 15.0 / 784, 0.002);
  EXPECT_NEAR(NonZero(init.at("encode4/0")), 15.0 / 30, 0.05);  // 7,500 values.
  EXPECT_EQ(NonZero(init.at("encode1/1")), 0.0);                // Constant 0 biases.

  // Standalone: tests at iterations 0, 3 and 6 on both test nets.
  ASSERT_EQ(
      RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + dir.File("solver.prototxt"),
                 "--weights_out=" + dir.File("standalone.caffemodel"), "--summary_json=" + dir.File("standalone.json")},
                dir.File("standalone.log"), std::chrono::seconds(240)),
      0)
      << ReadFile(dir.File("standalone.log"));
  const std::string log = ReadFile(dir.File("standalone.log"));
  for (const char* tested : {"Iteration 6, test net #0: cross_entropy_loss = ", "Iteration 6, test net #1: "}) {
    EXPECT_NE(log.find(tested), std::string::npos) << tested << "\n" << log;
  }
  // The final line names the test and gives the net's losses (it has no
  // accuracy), not "nan".
  std::smatch line;
  ASSERT_TRUE(std::regex_search(log, line, std::regex("standalone: 6 iterations in [^\n]*")));
  EXPECT_TRUE(std::regex_match(line.str(), std::regex(std::string("standalone: 6 iterations in [0-9]+\\.[0-9] s, "
                                                                  "train loss ") +
                                                      kFixed + ", test at iteration 6: cross_entropy_loss " + kFixed +
                                                      ", l2_error " + kFixed + ", [0-9]+ images/s")))
      << line.str();
  const std::string json = ReadFile(dir.File("standalone.json"));
  EXPECT_EQ(test::JsonNumber(json, "test_iteration"), 6) << json;
  EXPECT_TRUE(test::JsonIsNull(json, "test_accuracy")) << json;
  const double cross_entropy = test::JsonNumber(json, "cross_entropy_loss");
  EXPECT_TRUE(std::isfinite(cross_entropy) && cross_entropy > 0) << json;
  // loss_weight 1 on cross_entropy_loss, 0 on l2_error.
  EXPECT_EQ(test::JsonNumber(json, "test_loss"), cross_entropy) << json;
  EXPECT_GT(test::JsonNumber(json, "l2_error"), 0) << json;
  const auto standalone = ReadWeights(dir.File("standalone.caffemodel"));
  EXPECT_GT(test::MaxAbsDiff(standalone, init), 1e-3) << "training barely moved the weights";

  // 2 workers x 2 servers, batch 100 each.
  ClusterSpec spec = test::JobOf(2, 2);
  spec.worker_flags = {"--solver=" + dir.File("solver.prototxt")};
  for (int w = 0; w < 2; ++w) {
    const std::string r = std::to_string(w);
    spec.worker_rank_flags.push_back(
        {w, {"--weights_out=" + dir.File("w" + r + ".caffemodel"), "--summary_json=" + dir.File("w" + r + ".json")}});
  }
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(240), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  const std::string w0_json = ReadFile(dir.File("w0.json"));
  EXPECT_EQ(test::JsonNumber(w0_json, "test_iteration"), 6) << w0_json;
  EXPECT_EQ(test::JsonNumber(w0_json, "workers"), 2) << w0_json;
  const std::string w1_json = ReadFile(dir.File("w1.json"));
  EXPECT_NE(w1_json.find("\"test_note\": \"worker 0 runs the tests\""), std::string::npos) << w1_json;
  const std::string w1_log = cluster.worker(1).Log();
  EXPECT_TRUE(std::regex_search(w1_log, std::regex("worker 1: 6 iterations in [0-9.]+ s, train loss [0-9.]+, worker 0 "
                                                   "runs the tests, [0-9]+ images/s \\(all workers\\)")))
      << w1_log;
  const auto w0 = ReadWeights(dir.File("w0.caffemodel"));
  const auto w1 = ReadWeights(dir.File("w1.caffemodel"));
  EXPECT_TRUE(test::BytesEqual(w0, w1));
  EXPECT_GT(test::MaxAbsDiff(w0, init), 1e-3) << "training barely moved the weights";
}

}  // namespace
}  // namespace test
}  // namespace nereus

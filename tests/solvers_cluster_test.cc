// Every Caffe solver type on the parameter servers, as real processes on
// 127.0.0.1: 2 servers x 2 synthetic workers (nereus_worker --solver_type),
// 3 BSP iterations. The weights the workers pull equal, bit for bit, a
// single-process run of common/sgd.h's SolverStep on the rank-ordered
// average of the same gradients, and, within float rounding, the update
// rules written from the formulas in double (tests/solver_reference.h) on
// the 4-element tensor.
#include <cmath>
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

#include "common/sgd.h"
#include "tests/process_util.h"
#include "tests/solver_reference.h"
#include "worker/synthetic_model.h"

namespace nereus {
namespace {

using testing::ClusterSpec;
using testing::LocalCluster;
using testing::ReadFile;
using testing::TempDir;

std::vector<float> ReadFloats(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class SolverClusterTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SolverClusterTest, TwoServersTwoWorkersMatchReferenceBitForBit) {
  TempDir dir;
  const std::string type = GetParam();
  testing::Reference hand = testing::Settings(type);
  const pb::SgdConfig sgd = testing::Config(hand);
  // A 4-element tensor cut into two 2-element chunks (one per server) and a
  // larger one spread over both.
  const std::string tensors = "4,6x5";
  const int iterations = 3, workers = 2;
  const uint64_t seed = 11;
  const float coupling = 0.01f;
  ClusterSpec spec;
  spec.servers = 2;
  spec.workers = workers;
  spec.coordinator_flags = {"--partition_bytes=8", "--consistency=bsp"};
  auto flag = [](const char* name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "--%s=%.9g", name, v);  // Enough digits to give the same float back.
    return std::string(buf);
  };
  spec.worker_flags = {"--tensors=" + tensors, "--iterations=3", "--seed=11", "--coupling=0.01",
                       "--lr_policy=fixed", "--solver_type=" + type, "--display=0",
                       flag("base_lr", hand.lr), flag("momentum", hand.momentum),
                       flag("weight_decay", hand.weight_decay), flag("delta", hand.delta),
                       flag("momentum2", hand.momentum2), flag("rms_decay", hand.rms_decay)};
  for (int w = 0; w < workers; ++w) spec.worker_rank_flags.push_back({w, {"--weights_out=" + dir.File("w" + std::to_string(w))}});
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;

  // The single-process reference with the code the servers run.
  SyntheticModel model(SyntheticKind::kNoise, seed, coupling);
  auto shapes = ParseTensorShapes(tensors).value();
  std::vector<float> expected;
  for (size_t t = 0; t < shapes.size(); ++t) {
    const size_t n = ElementCount(shapes[t]);
    std::vector<float> w(n), h(n, 0.0f), h2(n, 0.0f), avg(n);
    std::vector<std::vector<float>> g(workers, std::vector<float>(n));
    model.InitialWeights(static_cast<int>(t), w.data(), n);
    if (t == 0) hand.w.assign(w.begin(), w.end());
    for (int c = 0; c < iterations; ++c) {
      std::vector<const float*> srcs;
      for (int r = 0; r < workers; ++r) {
        model.Gradient(r, c, static_cast<int>(t), w.data(), g[r].data(), n);
        srcs.push_back(g[r].data());
      }
      AverageInOrder(srcs.data(), workers, avg.data(), n);
      if (t == 0) hand.Step(c, std::vector<double>(avg.begin(), avg.end()), 1.0, 1.0);
      SolverStep(sgd, c, LearningRate(sgd, c), 1.0f, 1.0f, avg.data(), w.data(), h.data(), h2.data(), n);
    }
    expected.insert(expected.end(), w.begin(), w.end());
  }
  // The formulas on the 4-element tensor (the gradients fed to both are the
  // float averages, so only the update's own rounding differs).
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(expected[i], hand.w[i], 2e-6) << type << " element " << i;
  }
  float initial[4];
  model.InitialWeights(0, initial, 4);
  EXPECT_GT(std::fabs(expected[0] - initial[0]), 1e-4) << "the weights barely moved: the comparison proves nothing";
  for (int r = 0; r < workers; ++r) {
    std::vector<float> got = ReadFloats(dir.File("w" + std::to_string(r)));
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
        << type << ": worker " << r << " differs from the reference, e.g. element 0: " << got[0] << " vs "
        << expected[0];
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SolverClusterTest,
                         ::testing::Values("SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace nereus

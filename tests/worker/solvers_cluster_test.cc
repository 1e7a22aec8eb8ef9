// Every Caffe solver type on the parameter servers, as real processes on
// 127.0.0.1: 2 servers x 2 synthetic workers (nereus_worker --solver_type),
// 3 BSP iterations. The weights the workers pull equal, bit for bit, a
// single-process run of common/update/sgd.h's SolverStep on the rank-ordered
// average of the same gradients, and, within float rounding, the update
// rules written from the formulas in double (tests/support/solver_reference.h) on
// the 4-element tensor. The servers' checkpoints carry AdaDelta's and
// Adam's second history: checkpoint, resume, bitwise equal.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/update/sgd.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/solver_reference.h"
#include "worker/synthetic/synthetic_model.h"

namespace nereus {
namespace test {
namespace {

constexpr char kTensors[] = "4,6x5";
constexpr uint64_t kSeed = 11;
constexpr float kCoupling = 0.01f;
constexpr int kWorkers = 2;

// 2 servers x 2 synthetic workers with `type`'s settings (tests/support/solver_reference.h);
// the 4-element tensor is cut into two 2-element partitions, one per server,
// and the larger one is spread over both.
ClusterSpec Spec(const std::string& type, int iterations, const std::string& weights_prefix, const TempDir& dir) {
  const test::Reference r = test::Settings(type);
  auto flag = [](const char* name, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "--%s=%.9g", name, v);  // Enough digits to give the same float back.
    return std::string(buf);
  };
  ClusterSpec spec = test::JobOf(2, kWorkers, {"--partition_bytes=8", "--consistency=bsp"});
  spec.worker_flags = {std::string("--tensors=") + kTensors,
                       "--iterations=" + std::to_string(iterations),
                       "--seed=" + std::to_string(kSeed),
                       "--coupling=0.01",
                       "--lr_policy=fixed",
                       "--solver_type=" + type,
                       "--display=0",
                       flag("base_lr", r.lr),
                       flag("momentum", r.momentum),
                       flag("weight_decay", r.weight_decay),
                       flag("delta", r.delta),
                       flag("momentum2", r.momentum2),
                       flag("rms_decay", r.rms_decay)};
  for (int w = 0; w < kWorkers; ++w)
    spec.worker_rank_flags.push_back({w, {"--weights_out=" + dir.File(weights_prefix + std::to_string(w))}});
  return spec;
}

// The single-process reference with the code the servers run: the same
// gradients averaged in rank order, then SolverStep. When `hand` is given,
// it also steps the double-precision formulas on the 4-element tensor.
std::vector<float> ReferenceWeights(const std::string& type, int iterations, test::Reference* hand = nullptr) {
  const pb::SgdConfig sgd = test::Config(test::Settings(type));
  SyntheticModel model(SyntheticKind::kNoise, kSeed, kCoupling);
  auto shapes = ParseTensorShapes(kTensors).value();
  std::vector<float> expected;
  for (size_t t = 0; t < shapes.size(); ++t) {
    const size_t n = ElementCount(shapes[t]);
    std::vector<float> w(n), h(n, 0.0f), h2(n, 0.0f), avg(n);
    std::vector<std::vector<float>> g(kWorkers, std::vector<float>(n));
    model.InitialWeights(static_cast<int>(t), w.data(), n);
    if (t == 0 && hand != nullptr) hand->w.assign(w.begin(), w.end());
    for (int c = 0; c < iterations; ++c) {
      std::vector<const float*> srcs;
      for (int r = 0; r < kWorkers; ++r) {
        model.Gradient(r, c, static_cast<int>(t), w.data(), g[r].data(), n);
        srcs.push_back(g[r].data());
      }
      AverageInOrder(srcs.data(), kWorkers, avg.data(), n);
      if (t == 0 && hand != nullptr) hand->Step(c, std::vector<double>(avg.begin(), avg.end()), 1.0, 1.0);
      SolverStep(sgd, c, LearningRate(sgd, c), 1.0f, 1.0f, avg.data(), w.data(), h.data(), h2.data(), n);
    }
    expected.insert(expected.end(), w.begin(), w.end());
  }
  return expected;
}

void ExpectWorkersEqual(const std::vector<float>& expected, const TempDir& dir, const std::string& prefix,
                        const std::string& what) {
  for (int r = 0; r < kWorkers; ++r) {
    std::vector<float> got = ReadFloats(dir.File(prefix + std::to_string(r)));
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
        << what << ": worker " << r << " differs from the reference, e.g. element 0: " << got[0] << " vs "
        << expected[0];
  }
}

bool RunJob(const ClusterSpec& spec, const TempDir& logs) {
  LocalCluster cluster(spec, logs);
  std::string report;
  const bool done = cluster.WaitAll(std::chrono::seconds(60), &report);
  EXPECT_TRUE(done) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  return done && !::testing::Test::HasFailure();
}

class SolverClusterTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SolverClusterTest, TwoServersTwoWorkersMatchReferenceBitForBit) {
  TempDir dir;
  const std::string type = GetParam();
  ASSERT_TRUE(RunJob(Spec(type, 3, "w", dir), dir));
  test::Reference hand = test::Settings(type);
  const std::vector<float> expected = ReferenceWeights(type, 3, &hand);
  // The formulas on the 4-element tensor (the gradients fed to both are the
  // float averages, so only the update's own rounding differs).
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(expected[i], hand.w[i], 2e-6) << type << " element " << i;
  SyntheticModel model(SyntheticKind::kNoise, kSeed, kCoupling);
  float initial[4];
  model.InitialWeights(0, initial, 4);
  EXPECT_GT(std::fabs(expected[0] - initial[0]), 1e-4) << "the weights barely moved: the comparison proves nothing";
  ExpectWorkersEqual(expected, dir, "w", type);
}

// The servers' checkpoints carry both histories: a job of 4 clocks with
// checkpoints every 2, then the whole job again with --resume to 6 clocks,
// ends with the weights of 6 uninterrupted clocks, bit for bit.
class SolverCheckpointTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SolverCheckpointTest, CheckpointThenResumeEqualsUninterrupted) {
  TempDir dir, ckpt, first_logs, resume_logs;
  const std::string type = GetParam();
  ClusterSpec first = Spec(type, 4, "first", dir);
  first.server_flags = {"--checkpoint_dir=" + ckpt.path(), "--checkpoint_every=2"};
  ASSERT_TRUE(RunJob(first, first_logs));
  ClusterSpec resume = Spec(type, 6, "resumed", dir);
  resume.server_flags = {"--checkpoint_dir=" + ckpt.path(), "--checkpoint_every=2", "--resume"};
  resume.coordinator_flags.push_back("--resume");
  resume.worker_flags.push_back("--resume");
  ASSERT_TRUE(RunJob(resume, resume_logs));
  EXPECT_NE(ReadFile(resume_logs.File("coordinator.log")).find("resumes from the checkpoint of clock 4"),
            std::string::npos)
      << ReadFile(resume_logs.File("coordinator.log"));
  ExpectWorkersEqual(ReferenceWeights(type, 6), dir, "resumed", type + " resumed at clock 4");
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SolverClusterTest,
                         ::testing::Values("SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });
// The two-history solvers (SGD's one history is resume_test.cc's).
INSTANTIATE_TEST_SUITE_P(TwoHistories, SolverCheckpointTest, ::testing::Values("AdaDelta", "Adam"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace test
}  // namespace nereus

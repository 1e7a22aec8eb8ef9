#include "worker/trainer/solver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/update/sgd.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/trainer_test_layers.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace {

using test::LearnableWeights;
using test::MakeTestSolver;
using testing_layers::TestRegistry;

// A one-layer linear model y = w . x + b on TestFixedData rows with loss
// y^2 / (2N): gradients can be written down by hand.
std::string TinySolver(int batch, int rows, const std::string& extra) {
  return R"(
net_param {
  name: "tiny"
  layer {
    name: "data" type: "TestFixedData" top: "x"
    input_param { shape { dim: )" +
         std::to_string(batch) + R"( dim: 2 } }
    data_param { batch_size: )" +
         std::to_string(rows) + R"( }
  }
  layer {
    name: "fc" type: "TestLinear" bottom: "x" top: "y"
    param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
    inner_product_param {
      num_output: 1
      weight_filler { type: "constant" value: 0.5 }
      bias_filler { type: "constant" value: 0.1 }
    }
  }
  layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "loss" }
}
base_lr: 0.1
momentum: 0.9
weight_decay: 0.01
random_seed: 5
solver_mode: CPU
)" + (extra.find("lr_policy") == std::string::npos ? "lr_policy: \"fixed\"\n" : "") +
         (extra.find("max_iter") == std::string::npos ? "max_iter: 100\n" : "") + extra;
}

float Lr(const std::string& fields, int64_t iter) {
  caffe::SolverParameter p;
  EXPECT_TRUE(ParseSolverParameter(fields, "lr.prototxt", &p).ok());
  pb::SgdConfig c = SgdConfigFromSolverParameter(p);
  EXPECT_TRUE(ValidateSgdConfig(c).ok()) << fields;
  return LearningRate(c, iter);
}

TEST(SolverTest, LearningRatePolicies) {
  // LeNet's solver: 0.01 * (1 + 0.0001 * 100)^-0.75, worked by hand.
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"inv\" gamma: 0.0001 power: 0.75", 100), 0.00992565f, 1e-8);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"inv\" gamma: 0.0001 power: 0.75", 0), 0.01f, 1e-9);
  EXPECT_FLOAT_EQ(Lr("base_lr: 0.05 lr_policy: \"fixed\"", 12345), 0.05f);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"step\" gamma: 0.1 stepsize: 100", 99), 0.01f, 1e-9);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"step\" gamma: 0.1 stepsize: 100", 250), 0.0001f, 1e-10);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"exp\" gamma: 0.99", 10), 0.01 * std::pow(0.99, 10), 1e-9);
  const std::string multistep = "base_lr: 0.01 lr_policy: \"multistep\" gamma: 0.5 stepvalue: 100 stepvalue: 200";
  EXPECT_NEAR(Lr(multistep, 99), 0.01f, 1e-9);
  EXPECT_NEAR(Lr(multistep, 150), 0.005f, 1e-9);
  EXPECT_NEAR(Lr(multistep, 250), 0.0025f, 1e-9);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"poly\" power: 2 max_iter: 1000", 500), 0.0025f, 1e-9);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"sigmoid\" gamma: -0.01 stepsize: 500", 500), 0.005f, 1e-9);
  EXPECT_NEAR(Lr("base_lr: 0.01 lr_policy: \"sigmoid\" gamma: -0.01 stepsize: 500", 700),
              0.01 / (1 + std::exp(0.01 * 200)), 1e-9);
}

TEST(SolverTest, SgdConfigMapping) {
  caffe::SolverParameter p;
  ASSERT_TRUE(ParseSolverParameter(TinySolver(1, 1, "regularization_type: \"L1\""), "s", &p).ok());
  pb::SgdConfig c = SgdConfigFromSolverParameter(p);
  EXPECT_FLOAT_EQ(c.base_lr(), 0.1f);
  EXPECT_FLOAT_EQ(c.momentum(), 0.9f);
  EXPECT_FLOAT_EQ(c.weight_decay(), 0.01f);
  EXPECT_EQ(c.regularization_type(), "L1");
  EXPECT_EQ(c.max_iter(), 100);
}

// Two SGD steps on the tiny net, computed by hand in double.
TEST(SolverTest, SgdStepsMatchHandComputation) {
  auto solver = MakeTestSolver(TinySolver(1, 1, ""));
  ASSERT_NE(solver, nullptr);
  const double x0 = 0.1, x1 = 0.11, lr = 0.1, mom = 0.9, wd = 0.01;
  double w0 = 0.5, w1 = 0.5, b = 0.1, h0 = 0, h1 = 0, hb = 0;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(solver->Step(1).ok());
    const double y = w0 * x0 + w1 * x1 + b;
    // Weights: lr_mult 1, decay_mult 1. Bias: lr_mult 2, decay_mult 0.
    h0 = mom * h0 + lr * (y * x0 + wd * w0);
    h1 = mom * h1 + lr * (y * x1 + wd * w1);
    hb = mom * hb + 2 * lr * y;
    w0 -= h0;
    w1 -= h1;
    b -= hb;
    const std::vector<float> w = LearnableWeights(*solver);
    ASSERT_EQ(w.size(), 3u);
    EXPECT_NEAR(w[0], w0, 1e-6) << "step " << step;
    EXPECT_NEAR(w[1], w1, 1e-6) << "step " << step;
    EXPECT_NEAR(w[2], b, 1e-6) << "step " << step;
    EXPECT_NEAR(solver->history()[0]->cpu_data()[0], h0, 1e-7);
    EXPECT_NEAR(solver->history()[1]->cpu_data()[0], hb, 1e-7);
  }
  EXPECT_EQ(solver->iter(), 2);
}

TEST(SolverTest, FirstStepExactValue) {
  auto solver = MakeTestSolver(TinySolver(1, 1, ""));
  ASSERT_NE(solver, nullptr);
  ASSERT_TRUE(solver->Step(1).ok());
  const std::vector<float> w = LearnableWeights(*solver);
  EXPECT_NEAR(w[0], 0.5 - 0.1 * (0.205 * 0.1 + 0.005), 1e-7);   // 0.49745
  EXPECT_NEAR(w[1], 0.5 - 0.1 * (0.205 * 0.11 + 0.005), 1e-7);  // 0.497245
  EXPECT_NEAR(w[2], 0.1 - 0.2 * 0.205, 1e-7);                   // 0.059
}

TEST(SolverTest, ClipGradientsScalesAsCaffe) {
  auto solver = MakeTestSolver(TinySolver(1, 1, "clip_gradients: 0.1"));
  ASSERT_NE(solver, nullptr);
  ASSERT_TRUE(solver->Step(1).ok());
  const double y = 0.205, g0 = y * 0.1, g1 = y * 0.11, gb = y;
  const double norm = std::sqrt(g0 * g0 + g1 * g1 + gb * gb);
  ASSERT_GT(norm, 0.1);
  const double s = 0.1 / norm;  // Clipping happens before weight decay.
  const std::vector<float> w = LearnableWeights(*solver);
  EXPECT_NEAR(w[0], 0.5 - 0.1 * (g0 * s + 0.005), 1e-7);
  EXPECT_NEAR(w[1], 0.5 - 0.1 * (g1 * s + 0.005), 1e-7);
  EXPECT_NEAR(w[2], 0.1 - 0.2 * gb * s, 1e-7);

  // Below the threshold nothing is scaled.
  auto loose = MakeTestSolver(TinySolver(1, 1, "clip_gradients: 10"));
  ASSERT_NE(loose, nullptr);
  ASSERT_TRUE(loose->Step(1).ok());
  EXPECT_NEAR(LearnableWeights(*loose)[2], 0.1 - 0.2 * gb, 1e-7);
}

TEST(SolverTest, IterSizeTwoWithHalfBatchEqualsFullBatch) {
  auto full = MakeTestSolver(TinySolver(4, 4, "lr_policy: \"inv\" gamma: 0.1 power: 0.75"));
  auto half = MakeTestSolver(TinySolver(2, 4, "lr_policy: \"inv\" gamma: 0.1 power: 0.75 iter_size: 2"));
  ASSERT_NE(full, nullptr);
  ASSERT_NE(half, nullptr);
  EXPECT_EQ(half->images_per_iter(), 4);
  ASSERT_TRUE(full->Step(5).ok());
  ASSERT_TRUE(half->Step(5).ok());
  const std::vector<float> a = LearnableWeights(*full), b = LearnableWeights(*half);
  ASSERT_EQ(a.size(), b.size());
  // Same math, different float summation order (two half sums, then 1/2).
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  EXPECT_NE(a[0], 0.5f);
}

TEST(SolverTest, SnapshotThenResumeIsBitwiseIdentical) {
  const std::string prefix = ::testing::TempDir() + "/solver_test_resume";
  const std::string text =
      TinySolver(3, 3, "lr_policy: \"inv\" gamma: 0.01 power: 0.75 snapshot_prefix: \"" + prefix + "\"");
  test::SnapshotResumeRun run;
  ASSERT_NO_FATAL_FAILURE(test::RunSnapshotResume(text, 3, &run));
  EXPECT_EQ(run.model_path, prefix + "_iter_3.caffemodel");
  EXPECT_EQ(run.state_path, prefix + "_iter_3.solverstate");
  EXPECT_EQ(run.resumed->iter(), 6);
  std::remove(run.model_path.c_str());
  std::remove(run.state_path.c_str());

  // A state file for another net is rejected.
  Status st = run.resumed->Restore(prefix + "_missing.solverstate");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
}

TEST(SolverTest, PeriodicSnapshotAndSolveFinalSnapshot) {
  const std::string prefix = ::testing::TempDir() + "/solver_test_periodic";
  auto solver = MakeTestSolver(TinySolver(1, 1, "snapshot: 2 snapshot_prefix: \"" + prefix + "\" max_iter: 5"));
  ASSERT_NE(solver, nullptr);
  ASSERT_TRUE(solver->Solve().ok());
  EXPECT_EQ(solver->iter(), 5);
  for (int it : {2, 4, 5}) {
    caffe::SolverState state;
    const std::string path = prefix + "_iter_" + std::to_string(it) + ".solverstate";
    ASSERT_TRUE(ReadProtoFromBinaryFile(path, &state).ok()) << path;
    EXPECT_EQ(state.iter(), it);
    EXPECT_EQ(state.learned_net(), prefix + "_iter_" + std::to_string(it) + ".caffemodel");
    std::remove(path.c_str());
    std::remove(state.learned_net().c_str());
  }
}

TEST(SolverTest, TestNetsUseTrainedWeights) {
  const std::string text = TinySolver(2, 2, "test_iter: 3 test_interval: 2 test_initialization: false");
  caffe::SolverParameter param;
  ASSERT_TRUE(ParseSolverParameter(text, "s", &param).ok());
  std::vector<TestResult> results;
  SolverOptions options;
  options.on_test = [&](const TestResult& r) { results.push_back(r); };
  LayerRegistry registry = TestRegistry();
  auto solver = Solver::Create(param, registry, nullptr, options);
  ASSERT_TRUE(solver.ok()) << solver.status();
  ASSERT_EQ((*solver)->test_nets().size(), 1u);
  ASSERT_TRUE((*solver)->Step(4).ok());
  ASSERT_EQ(results.size(), 1u);  // At iteration 2 (not 0: test_initialization false; 4 is not reached).
  EXPECT_EQ(results[0].iter, 2);
  ASSERT_EQ(results[0].names.size(), 1u);
  EXPECT_EQ(results[0].names[0], "loss");
  EXPECT_EQ(results[0].loss_weights[0], 1.0f);
  // Recompute the test loss with the weights after 2 updates... which the
  // train net has moved on from; compare with a fresh forward instead.
  auto direct = (*solver)->Test(0);
  ASSERT_TRUE(direct.ok());
  const std::vector<float> w = LearnableWeights(**solver);
  double expected = 0;
  for (int r = 0; r < 2; ++r) {
    const double x0 = (r + 1) * 0.1, x1 = (r + 1) * 0.1 + 0.01;
    const double y = w[0] * x0 + w[1] * x1 + w[2];
    expected += y * y;
  }
  expected /= 4.0;  // sum(y^2) / (2N), N = 2.
  EXPECT_NEAR(direct->Score("loss"), expected, 1e-6);
}

TEST(SolverTest, RejectsUnsupportedSolvers) {
  caffe::SolverParameter param;
  // Caffe's six types are supported (tests/worker/trainer/solvers_test.cc); others are not.
  ASSERT_TRUE(ParseSolverParameter(TinySolver(1, 1, "type: \"Adamax\""), "s", &param).ok());
  LayerRegistry registry = TestRegistry();
  auto s = Solver::Create(param, registry);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown solver type \"Adamax\""), std::string::npos) << s.status();

  ASSERT_TRUE(ParseSolverParameter(TinySolver(1, 1, "lr_policy: \"cosine\""), "s", &param).ok());
  s = Solver::Create(param, registry);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("cosine"), std::string::npos) << s.status();
}

// Records the calls the Solver makes.
class RecordingSync : public ParameterSync {
 public:
  Status Init(const std::vector<Blob*>& params, const std::vector<float>& lr_mult, const std::vector<float>& decay_mult,
              const pb::SgdConfig& sgd) override {
    events.push_back("init");
    num_params = params.size();
    lr = lr_mult;
    decay = decay_mult;
    base_lr = sgd.base_lr();
    return Status::OK();
  }
  Status WaitWeights(int layer, int64_t iter) override {
    events.push_back("w" + std::to_string(layer) + "@" + std::to_string(iter));
    return Status::OK();
  }
  Status GradientsReady(int layer, int64_t iter) override {
    events.push_back("g" + std::to_string(layer) + "@" + std::to_string(iter));
    if (layer == 1) bias_diff_at_ready = net->learnable_params()[1]->cpu_diff()[0];
    return Status::OK();
  }
  Status FinishIteration(int64_t iter) override {
    events.push_back("f@" + std::to_string(iter));
    return Status::OK();
  }
  std::vector<std::string> events;
  size_t num_params = 0;
  std::vector<float> lr, decay;
  float base_lr = 0;
  float bias_diff_at_ready = 0;
  const Net* net = nullptr;  // the solver's, read at GradientsReady
};

// A solver of `text` with `sync` attached, stepped `steps` iterations
// (nullptr if it could not be made; a failed step fails the test).
std::unique_ptr<Solver> StepWithSync(const std::string& text, int steps, RecordingSync* sync) {
  auto solver = MakeTestSolver(text, sync);
  if (solver == nullptr) return nullptr;
  sync->net = solver->net();
  const Status stepped = solver->Step(steps);
  EXPECT_TRUE(stepped.ok()) << stepped;
  return solver;
}

TEST(SolverTest, ParameterSyncGetsLayerwiseCallsAndNoLocalUpdate) {
  RecordingSync sync;
  auto solver = StepWithSync(TinySolver(1, 1, ""), 2, &sync);
  ASSERT_NE(solver, nullptr);
  const std::vector<std::string> expected = {"init", "w0@0", "w1@0", "w2@0", "g2@0", "g1@0", "g0@0", "f@0",
                                             "w0@1", "w1@1", "w2@1", "g2@1", "g1@1", "g0@1", "f@1"};
  EXPECT_EQ(sync.events, expected);
  EXPECT_EQ(sync.num_params, 2u);
  EXPECT_EQ(sync.lr, (std::vector<float>{1, 2}));
  EXPECT_EQ(sync.decay, (std::vector<float>{1, 0}));
  EXPECT_FLOAT_EQ(sync.base_lr, 0.1f);
  EXPECT_NEAR(sync.bias_diff_at_ready, 0.205f, 1e-7);  // Raw gradient, not regularized.
  // The weights are the servers' business: unchanged locally.
  EXPECT_EQ(LearnableWeights(*solver), (std::vector<float>{0.5f, 0.5f, 0.1f}));
}

TEST(SolverTest, ParameterSyncWithIterSizeGetsNormalizedGradientsAfterBackward) {
  RecordingSync sync;
  // Rows 0 and 1 alternate; iter_size 2 with batch 1 averages them.
  auto solver = StepWithSync(TinySolver(1, 2, "iter_size: 2"), 1, &sync);
  ASSERT_NE(solver, nullptr);
  const std::vector<std::string> expected = {"init", "w0@0", "w1@0", "w2@0", "g2@0", "g1@0", "g0@0", "f@0"};
  EXPECT_EQ(sync.events, expected);
  const double y0 = 0.5 * (0.1 + 0.11) + 0.1, y1 = 0.5 * (0.2 + 0.21) + 0.1;
  EXPECT_NEAR(sync.bias_diff_at_ready, (y0 + y1) / 2, 1e-7);
}

TEST(SolverTest, ParameterSyncWaitsForWeightsBeforeATest) {
  RecordingSync sync;
  auto solver = StepWithSync(TinySolver(1, 1, "test_iter: 1 test_interval: 1"), 1, &sync);
  ASSERT_NE(solver, nullptr);
  // Test at iteration 0 (test_initialization): weights of all layers first.
  const std::vector<std::string> expected = {"init", "w0@0", "w1@0", "w2@0",  // test
                                             "w0@0", "w1@0", "w2@0", "g2@0", "g1@0", "g0@0", "f@0"};
  EXPECT_EQ(sync.events, expected);
}

}  // namespace
}  // namespace nereus

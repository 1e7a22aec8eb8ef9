// Caffe's solver types: SGD, Nesterov, AdaGrad, RMSProp, AdaDelta
// and Adam. Each one's update on a 4-element tensor is checked against a
// reference written here from the formulas in double (not the code under
// test), through common/update/sgd.h's SolverStep (what the servers run) and
// through the standalone Solver; Caffe's history layout in .solverstate and
// bitwise snapshot/resume; the configuration errors Caffe's solvers raise.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <hdf5_hl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/update/sgd.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/net_test_util.h"
#include "tests/support/solver_reference.h"
#include "tests/support/trainer_test_layers.h"
#include "worker/trainer/hdf5_snapshot.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace {

using test::Config;
using test::LearnableWeights;
using test::MakeTestSolver;
using test::Reference;
using test::Settings;

const char* const kTypes[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};

class SolverTypeTest : public ::testing::TestWithParam<const char*> {};

// Three steps of SolverStep on 4 elements, lr_mult 2 and L2 decay, with
// gradients that change sign and one that is zero.
TEST_P(SolverTypeTest, SolverStepFollowsTheFormulasForThreeSteps) {
  Reference ref = Settings(GetParam());
  const pb::SgdConfig c = Config(ref);
  ASSERT_TRUE(ValidateSgdConfig(c).ok()) << ValidateSgdConfig(c);
  std::vector<float> data = {1.0f, -2.0f, 0.5f, 3.0f};
  std::vector<float> h(4, 0.0f), h2(4, 0.0f);
  ref.w.assign(data.begin(), data.end());
  const float diffs[3][4] = {{0.5f, -0.25f, 1.0f, 0.0f}, {0.25f, 0.5f, -1.0f, 0.0f}, {-0.125f, 0.5f, 2.0f, 0.0f}};
  for (int step = 0; step < 3; ++step) {
    const float rate = LearningRate(c, step);
    SolverStep(c, step, rate, /*lr_mult=*/2.0f, /*decay_mult=*/1.0f, diffs[step], data.data(), h.data(), h2.data(), 4);
    ref.Step(step, std::vector<double>(diffs[step], diffs[step] + 4), 2.0, 1.0);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR(data[i], ref.w[i], 2e-6 * std::max(1.0, std::fabs(ref.w[i]))) << "step " << step << " element " << i;
      EXPECT_NEAR(h[i], ref.h[i], 2e-6 * std::max(1e-3, std::fabs(ref.h[i]))) << "step " << step << " element " << i;
      if (NumHistoryBlobs(c.type()) == 2) {
        EXPECT_NEAR(h2[i], ref.h2[i], 2e-6 * std::max(1e-3, std::fabs(ref.h2[i])));
      }
    }
  }
  // The zero-gradient element moved by weight decay alone, and the others moved.
  EXPECT_LT(data[3], 3.0f);
  EXPECT_NE(data[0], 1.0f);
  if (NumHistoryBlobs(c.type()) == 1) {
    for (float v : h2) EXPECT_EQ(v, 0.0f) << "a one-history solver wrote the second history";
  }
}

// The same update twice gives the same bits (servers and the standalone
// solver must agree exactly).
TEST_P(SolverTypeTest, SolverStepIsDeterministic) {
  const pb::SgdConfig c = Config(Settings(GetParam()));
  std::vector<float> a = {1.0f, -2.0f, 0.5f, 3.0f}, b = a;
  std::vector<float> ha(4, 0.0f), hb(4, 0.0f), h2a(4, 0.0f), h2b(4, 0.0f);
  const float diff[4] = {0.3f, -0.7f, 1e-3f, 5.0f};
  for (int step = 0; step < 3; ++step) {
    SolverStep(c, step, 0.1f, 1.0f, 1.0f, diff, a.data(), ha.data(), h2a.data(), 4);
    SolverStep(c, step, 0.1f, 1.0f, 1.0f, diff, b.data(), hb.data(), h2b.data(), 4);
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(ha, hb);
  EXPECT_EQ(h2a, h2b);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SolverTypeTest, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// First steps worked out on paper (no decay, lr_mult 1): data {1, -2, 0.5, 3},
// gradient {0.5, -0.25, 1, 0}.
TEST(SolverStepTest, FirstStepByHand) {
  const float diff[4] = {0.5f, -0.25f, 1.0f, 0.0f};
  auto first = [&](Reference r) {
    r.weight_decay = 0;
    pb::SgdConfig c = Config(r);
    std::vector<float> data = {1.0f, -2.0f, 0.5f, 3.0f}, h(4, 0.0f), h2(4, 0.0f);
    SolverStep(c, 0, static_cast<float>(r.lr), 1.0f, 1.0f, diff, data.data(), h.data(), h2.data(), 4);
    return data;
  };
  const double tol = 1e-6;
  // SGD: u = 0.1 g.
  auto d = first(Settings("SGD"));
  EXPECT_NEAR(d[0], 0.95, tol);
  EXPECT_NEAR(d[1], -1.975, tol);
  EXPECT_NEAR(d[2], 0.4, tol);
  EXPECT_EQ(d[3], 3.0f);
  // Nesterov: h = 0.1 g; u = 1.9 h - 0.9 * 0 = 0.19 g.
  d = first(Settings("Nesterov"));
  EXPECT_NEAR(d[0], 0.905, tol);
  EXPECT_NEAR(d[1], -1.9525, tol);
  EXPECT_NEAR(d[2], 0.31, tol);
  // AdaGrad: h = g^2; u = 0.1 g / (|g| + 1e-8) = 0.1 sign(g).
  d = first(Settings("AdaGrad"));
  EXPECT_NEAR(d[0], 0.9, tol);
  EXPECT_NEAR(d[1], -1.9, tol);
  EXPECT_NEAR(d[2], 0.4, tol);
  EXPECT_EQ(d[3], 3.0f);  // 0 / (0 + delta).
  // RMSProp: h = 0.01 g^2; u = 0.1 g / (0.1 |g|) = sign(g).
  d = first(Settings("RMSProp"));
  EXPECT_NEAR(d[0], 0.0, tol);
  EXPECT_NEAR(d[1], -1.0, tol);
  EXPECT_NEAR(d[2], -0.5, tol);
  // AdaDelta (lr 1, momentum 0.95, delta 1e-6): h = 0.05 g^2,
  // u = g sqrt(1e-6 / (1e-6 + 0.05 g^2)).
  d = first(Settings("AdaDelta"));
  EXPECT_NEAR(d[0], 1 - 0.5 * std::sqrt(1e-6 / (1e-6 + 0.05 * 0.25)), tol);
  EXPECT_NEAR(d[1], -2 + 0.25 * std::sqrt(1e-6 / (1e-6 + 0.05 * 0.0625)), tol);
  EXPECT_NEAR(d[2], 0.5 - 1.0 * std::sqrt(1e-6 / (1e-6 + 0.05)), tol);
  // Adam: m = 0.1 g, v = 0.001 g^2, correction sqrt(0.001) / 0.1, so
  // u = 0.1 sign(g) up to delta.
  d = first(Settings("Adam"));
  EXPECT_NEAR(d[0], 0.9, tol);
  EXPECT_NEAR(d[1], -1.9, tol);
  EXPECT_NEAR(d[2], 0.4, tol);
  EXPECT_EQ(d[3], 3.0f);
}

TEST(SolverStepTest, AdamBiasCorrectionUsesIterationPlusOne) {
  // At iteration 9 (t = 10) with a history built from a constant gradient,
  // m = (1 - 0.9^10) g and v = (1 - 0.999^10) g^2: the corrected step is lr.
  Reference r = Settings("Adam");
  r.weight_decay = 0;
  pb::SgdConfig c = Config(r);
  float data[1] = {0.0f}, m[1] = {0.0f}, v[1] = {0.0f};
  const float diff[1] = {0.25f};
  for (int it = 0; it < 10; ++it) SolverStep(c, it, 0.1f, 1.0f, 1.0f, diff, data, m, v, 1);
  EXPECT_NEAR(m[0], (1 - std::pow(0.9, 10)) * 0.25, 1e-6);
  EXPECT_NEAR(v[0], (1 - std::pow(0.999, 10)) * 0.0625, 1e-7);
  EXPECT_NEAR(data[0], -1.0, 1e-5);  // Ten steps of 0.1.
}

TEST(SolverConfigTest, CaffesChecksAndNames) {
  pb::SgdConfig c = Config(Settings("AdaGrad"));
  c.set_momentum(0.9f);
  Status st = ValidateSgdConfig(c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("momentum cannot be used with AdaGrad"), std::string::npos) << st;
  c = Config(Settings("RMSProp"));
  c.set_momentum(0.5f);
  EXPECT_NE(ValidateSgdConfig(c).message().find("momentum cannot be used with RMSProp"), std::string::npos);
  c.set_momentum(0);
  c.set_rms_decay(1.0f);
  EXPECT_NE(ValidateSgdConfig(c).message().find("rms_decay should lie between 0 and 1"), std::string::npos);
  for (const char* name : kTypes) {
    auto t = SolverTypeFromName(name);
    ASSERT_TRUE(t.ok()) << name;
    EXPECT_STREQ(SolverTypeName(*t), name);
  }
  auto bad = SolverTypeFromName("Adagrad");  // Caffe's names are case-sensitive.
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown solver type \"Adagrad\" (expected SGD, Nesterov, AdaGrad"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ(NumHistoryBlobs(pb::SOLVER_ADAM), 2);
  EXPECT_EQ(NumHistoryBlobs(pb::SOLVER_ADADELTA), 2);
  EXPECT_EQ(NumHistoryBlobs(pb::SOLVER_RMSPROP), 1);
  EXPECT_EQ(NumHistoryBlobs(pb::SOLVER_SGD), 1);
}

// --- Through the standalone Solver -----------------------------------------

// y = w . x + b with 4 features, x = (0.1, 0.11, 0.12, 0.13) every
// iteration, loss y^2 / 2: dL/dw = y x, dL/db = y.
std::string LinearSolver(const std::string& type_fields, const std::string& extra = "") {
  return R"(
net_param {
  name: "linear4"
  layer { name: "data" type: "TestFixedData" top: "x"
    input_param { shape { dim: 1 dim: 4 } } data_param { batch_size: 1 } }
  layer { name: "fc" type: "TestLinear" bottom: "x" top: "y"
    param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }
    inner_product_param { num_output: 1
      weight_filler { type: "constant" value: 0.5 } bias_filler { type: "constant" value: 0.1 } } }
  layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "loss" }
}
lr_policy: "fixed"
weight_decay: 0.01
max_iter: 100
random_seed: 5
solver_mode: CPU
)" + type_fields +
         "\n" + extra;
}

std::string TypeFields(const Reference& r) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "type: \"%s\" base_lr: %g momentum: %g delta: %g", r.type.c_str(), r.lr, r.momentum,
                r.delta);
  return buf;
}

TEST_P(SolverTypeTest, StandaloneSolverThreeStepsMatchTheFormulas) {
  Reference weights = Settings(GetParam()), bias = Settings(GetParam());
  auto solver = MakeTestSolver(LinearSolver(TypeFields(weights)));
  ASSERT_NE(solver, nullptr);
  EXPECT_EQ(solver->sgd_config().type(), SolverTypeFromName(GetParam()).value());
  ASSERT_EQ(solver->history().size(), 2u * NumHistoryBlobs(solver->sgd_config().type()));
  weights.w = {0.5, 0.5, 0.5, 0.5};
  bias.w = {0.1};
  const double x[4] = {0.1, 0.11, 0.12, 0.13};
  for (int step = 0; step < 3; ++step) {
    double y = bias.w[0];
    for (int i = 0; i < 4; ++i) y += weights.w[i] * x[i];
    ASSERT_TRUE(solver->Step(1).ok());
    weights.Step(step, {y * x[0], y * x[1], y * x[2], y * x[3]}, 1.0, 1.0);
    bias.Step(step, {y}, 2.0, 0.0);
    const std::vector<float> w = LearnableWeights(*solver);
    ASSERT_EQ(w.size(), 5u);
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(w[i], weights.w[i], 2e-6) << "step " << step << " weight " << i;
    EXPECT_NEAR(w[4], bias.w[0], 2e-6) << "step " << step << " bias";
    // Caffe's layout: history[p] is the first history of parameter p,
    // history[2 + p] its second.
    EXPECT_NEAR(solver->history()[0]->cpu_data()[3], weights.h[3], 2e-6 * std::max(1e-3, std::fabs(weights.h[3])));
    EXPECT_NEAR(solver->history()[1]->cpu_data()[0], bias.h[0], 2e-6 * std::max(1e-3, std::fabs(bias.h[0])));
    if (solver->history().size() == 4) {
      EXPECT_NEAR(solver->history()[2]->cpu_data()[3], weights.h2[3], 2e-6 * std::max(1e-3, std::fabs(weights.h2[3])));
      EXPECT_NEAR(solver->history()[3]->cpu_data()[0], bias.h2[0], 2e-6 * std::max(1e-3, std::fabs(bias.h2[0])));
    }
  }
  EXPECT_GT(std::fabs(LearnableWeights(*solver)[4] - 0.1f), 1e-3) << "the bias barely moved";
}

TEST_P(SolverTypeTest, SnapshotThenResumeIsBitwiseIdentical) {
  const std::string prefix = ::testing::TempDir() + "/solvers_test_" + GetParam();
  const std::string text = LinearSolver(TypeFields(Settings(GetParam())), "snapshot_prefix: \"" + prefix + "\"");
  test::SnapshotResumeRun run;
  ASSERT_NO_FATAL_FAILURE(test::RunSnapshotResume(text, 3, &run));
  caffe::SolverState state;
  ASSERT_TRUE(ReadProtoFromBinaryFile(run.state_path, &state).ok());
  ASSERT_EQ(state.history_size(), static_cast<int>(run.first->history().size()));
  EXPECT_EQ(state.history_size(), 2 * NumHistoryBlobs(run.first->sgd_config().type()));
  for (int i = 0; i < state.history_size(); ++i) {
    EXPECT_TRUE(test::BytesEqual(state.history(i).data().data(), state.history(i).data_size(),
                                 run.first->history()[i]->cpu_data(), run.first->history()[i]->count(),
                                 "history " + std::to_string(i)));
  }
  std::remove(run.model_path.c_str());
  std::remove(run.state_path.c_str());
}

TEST(SolverConfigTest, OldSolverTypeEnumSelectsTheSolver) {
  auto solver = MakeTestSolver(LinearSolver("solver_type: ADAM base_lr: 0.1 momentum: 0.9"));
  ASSERT_NE(solver, nullptr);
  EXPECT_EQ(solver->sgd_config().type(), pb::SOLVER_ADAM);
  EXPECT_FLOAT_EQ(solver->sgd_config().momentum2(), 0.999f);  // Caffe's defaults.
  EXPECT_FLOAT_EQ(solver->sgd_config().delta(), 1e-8f);
  auto rms = MakeTestSolver(LinearSolver("solver_type: RMSPROP base_lr: 0.1 rms_decay: 0.98"));
  ASSERT_NE(rms, nullptr);
  EXPECT_EQ(rms->sgd_config().type(), pb::SOLVER_RMSPROP);
  EXPECT_FLOAT_EQ(rms->sgd_config().rms_decay(), 0.98f);
}

// Each value of the old enum names its type, as Caffe's UpgradeSolverType.
TEST(SolverConfigTest, EveryOldSolverTypeNamesItsType) {
  const std::vector<std::pair<caffe::SolverParameter::SolverType, pb::SolverType>> types = {
      {caffe::SolverParameter::SGD, pb::SOLVER_SGD},           {caffe::SolverParameter::NESTEROV, pb::SOLVER_NESTEROV},
      {caffe::SolverParameter::ADAGRAD, pb::SOLVER_ADAGRAD},   {caffe::SolverParameter::RMSPROP, pb::SOLVER_RMSPROP},
      {caffe::SolverParameter::ADADELTA, pb::SOLVER_ADADELTA}, {caffe::SolverParameter::ADAM, pb::SOLVER_ADAM}};
  for (const auto& [old_type, type] : types) {
    caffe::SolverParameter param;
    param.set_solver_type(old_type);
    const StatusOr<pb::SolverType> got = SolverTypeOf(param);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, type) << caffe::SolverParameter::SolverType_Name(old_type);
  }
}

TEST(SolverConfigTest, BadSolverSettingsFailNamingTheProblem) {
  Status st;
  EXPECT_EQ(MakeTestSolver(LinearSolver("type: \"Adam\" solver_type: ADAM base_lr: 0.1"), nullptr, &st), nullptr);
  EXPECT_NE(st.message().find("both the old solver_type (ADAM) and type (\"Adam\")"), std::string::npos) << st;
  EXPECT_EQ(MakeTestSolver(LinearSolver("type: \"Adagrad\" base_lr: 0.1"), nullptr, &st), nullptr);
  EXPECT_NE(st.message().find("unknown solver type \"Adagrad\""), std::string::npos) << st;
  EXPECT_EQ(MakeTestSolver(LinearSolver("type: \"AdaGrad\" base_lr: 0.1 momentum: 0.9"), nullptr, &st), nullptr);
  EXPECT_NE(st.message().find("momentum cannot be used with AdaGrad"), std::string::npos) << st;
  EXPECT_EQ(MakeTestSolver(LinearSolver("type: \"RMSProp\" base_lr: 0.1 rms_decay: 1.5"), nullptr, &st), nullptr);
  EXPECT_NE(st.message().find("rms_decay should lie between 0 and 1"), std::string::npos) << st;
}

TEST(SolverConfigTest, StateOfAnotherSolverTypeIsRefused) {
  const std::string prefix = ::testing::TempDir() + "/solvers_test_mismatch";
  auto sgd = MakeTestSolver(LinearSolver("type: \"SGD\" base_lr: 0.1", "snapshot_prefix: \"" + prefix + "\""));
  ASSERT_NE(sgd, nullptr);
  ASSERT_TRUE(sgd->Step(1).ok());
  std::string model_path, state_path;
  ASSERT_TRUE(sgd->Snapshot(&model_path, &state_path).ok());
  auto adam = MakeTestSolver(LinearSolver("type: \"Adam\" base_lr: 0.1 momentum: 0.9"));
  ASSERT_NE(adam, nullptr);
  Status st = adam->Restore(state_path);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("holds 2 history blobs, the Adam solver of this net keeps 4 (2 per learnable "
                              "parameter, 2 parameters)"),
            std::string::npos)
      << st;
  std::remove(model_path.c_str());
  std::remove(state_path.c_str());
}

// caffe.proto's caffe_fields_not_supported lists only fields the message
// does not declare: adding a field of Caffe's means taking it off the list.
TEST(UnknownFieldTest, NoListedCaffeFieldIsDeclared) {
  const google::protobuf::FileDescriptor* file = caffe::SolverParameter::descriptor()->file();
  int listed = 0;
  for (int m = 0; m < file->message_type_count(); ++m) {
    const google::protobuf::Descriptor* d = file->message_type(m);
    std::istringstream names(d->options().GetExtension(caffe::caffe_fields_not_supported));
    for (std::string name; names >> name; ++listed) {
      EXPECT_EQ(d->FindFieldByName(name), nullptr)
          << d->full_name() << " declares " << name << " but lists it in caffe_fields_not_supported";
    }
  }
  EXPECT_GT(listed, 0);
}

TEST(UnknownFieldTest, MessageSaysWhetherCaffeHasTheField) {
  caffe::SolverParameter param;
  Status st = ParseSolverParameter("type: \"Adam\"\nweights: \"w.caffemodel\"\n", "s.prototxt", &param);
  EXPECT_EQ(st.message(),
            "s.prototxt:2:1: unknown field \"weights\" in caffe.SolverParameter: a Caffe field that Nereus does not "
            "support");
  st = ParseSolverParameter("type: \"Adam\"\n  momentun: 0.9\n", "s.prototxt", &param);
  EXPECT_EQ(st.message(),
            "s.prototxt:2:3: unknown field \"momentun\" in caffe.SolverParameter: not a Caffe field (Nereus reads "
            "Caffe's own field names)");
  // The fields of Caffe's example solvers for these types parse.
  st = ParseSolverParameter("type: \"AdaDelta\"\ndelta: 1e-6\nmomentum2: 0.999\nrms_decay: 0.98\n", "s", &param);
  EXPECT_TRUE(st.ok()) << st;
}

// --- HDF5 snapshots: Caffe's cifar10_full_solver.prototxt --------------------

// Caffe's examples/cifar10/cifar10_full_solver.prototxt, unchanged.
constexpr char kCifar10FullSolver[] = R"(# reduce learning rate after 120 epochs (60000 iters) by factor 0f 10
# then another factor of 10 after 10 more epochs (5000 iters)

# The train/test net protocol buffer definition
net: "examples/cifar10/cifar10_full_train_test.prototxt"
# test_iter specifies how many forward passes the test should carry out.
# In the case of CIFAR10, we have test batch size 100 and 100 test iterations,
# covering the full 10,000 testing images.
test_iter: 100
# Carry out testing every 1000 training iterations.
test_interval: 1000
# The base learning rate, momentum and the weight decay of the network.
base_lr: 0.001
momentum: 0.9
weight_decay: 0.004
# The learning rate policy
lr_policy: "fixed"
# Display every 200 iterations
display: 200
# The maximum number of iterations
max_iter: 60000
# snapshot intermediate results
snapshot: 10000
snapshot_format: HDF5
snapshot_prefix: "examples/cifar10/cifar10_full"
# solver mode: CPU or GPU
solver_mode: GPU
)";

// The float dataset `name` of an HDF5 file: its dims and values.
std::pair<std::vector<hsize_t>, std::vector<float>> ReadDataset(const std::string& path, const std::string& name) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0) << path;
  int rank = -1;
  EXPECT_GE(H5LTget_dataset_ndims(file, name.c_str(), &rank), 0) << path << ":" << name;
  std::vector<hsize_t> dims(std::max(rank, 0));
  H5T_class_t cls;
  size_t size;
  H5LTget_dataset_info(file, name.c_str(), dims.data(), &cls, &size);
  size_t count = 1;
  for (hsize_t d : dims) count *= d;
  std::vector<float> values(count);
  EXPECT_GE(H5LTread_dataset_float(file, name.c_str(), values.data()), 0);
  H5Fclose(file);
  return {dims, values};
}

TEST(Hdf5SnapshotTest, CaffesCifar10FullSolverRunsWithHdf5SnapshotsAndResumesBitwise) {
  caffe::SolverParameter caffe_file;
  Status st = ParseSolverParameter(kCifar10FullSolver, "cifar10_full_solver.prototxt", &caffe_file);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(caffe_file.snapshot_format(), caffe::SolverParameter::HDF5);
  EXPECT_EQ(caffe_file.solver_mode(), caffe::SolverParameter::GPU);  // Accepted: a warning, then the CPU.

  // Caffe's settings on the linear test net (no CIFAR-10 data here): 4
  // iterations, a snapshot every 2, with Adam to have two histories.
  const std::string prefix = ::testing::TempDir() + "/solvers_test_cifar10_full";
  caffe::SolverParameter param = caffe_file;
  caffe::SolverParameter linear;
  ASSERT_TRUE(ParseSolverParameter(LinearSolver(""), "linear", &linear).ok());
  param.clear_net();
  param.clear_test_iter();
  param.clear_test_interval();
  *param.mutable_net_param() = linear.net_param();
  param.set_max_iter(4);
  param.set_snapshot(2);
  param.set_snapshot_prefix(prefix);
  param.set_type("Adam");
  param.set_display(0);
  LayerRegistry registry = testing_layers::TestRegistry();
  auto straight = Solver::Create(param, registry);
  ASSERT_TRUE(straight.ok()) << straight.status();
  ASSERT_TRUE((*straight)->Solve().ok());
  const std::string model2 = prefix + "_iter_2.caffemodel.h5", state2 = prefix + "_iter_2.solverstate.h5";
  const std::string model4 = prefix + "_iter_4.caffemodel.h5", state4 = prefix + "_iter_4.solverstate.h5";

  // Caffe's layout: data/<layer>/<i> shaped as the blob; iter, learned_net,
  // current_step, history/<i> for the 2 x 2 Adam histories.
  auto [w_dims, w] = ReadDataset(model4, "data/fc/0");
  EXPECT_EQ(w_dims, (std::vector<hsize_t>{1, 4}));
  const Blob& fc_w = *(*straight)->net()->learnable_params()[0];
  EXPECT_EQ(w, std::vector<float>(fc_w.cpu_data(), fc_w.cpu_data() + 4));
  EXPECT_EQ(ReadDataset(model4, "data/fc/1").first, (std::vector<hsize_t>{1}));
  hid_t file = H5Fopen(state4.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  int iter = -1;
  EXPECT_GE(H5LTread_dataset_int(file, "iter", &iter), 0);
  EXPECT_EQ(iter, 4);
  char learned_net[512] = {0};
  EXPECT_GE(H5LTread_dataset_string(file, "learned_net", learned_net), 0);
  EXPECT_EQ(std::string(learned_net), model4);
  EXPECT_EQ(H5Lexists(file, "data", H5P_DEFAULT), 0);  // The data group are the model's.
  H5Fclose(file);
  for (int i = 0; i < 4; ++i) {
    const Blob& h = *(*straight)->history()[i];
    EXPECT_EQ(ReadDataset(state4, "history/" + std::to_string(i)).second,
              std::vector<float>(h.cpu_data(), h.cpu_data() + h.count()))
        << "history " << i;
  }

  // Resume from the HDF5 state of iteration 2: bitwise the same weights.
  auto resumed = Solver::Create(param, registry);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  st = (*resumed)->Restore(state2);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ((*resumed)->iter(), 2);
  ASSERT_TRUE((*resumed)->Step(2).ok());
  EXPECT_EQ(LearnableWeights(**straight), LearnableWeights(**resumed));
  for (size_t p = 0; p < (*straight)->history().size(); ++p) {
    const Blob& a = *(*straight)->history()[p];
    const Blob& b = *(*resumed)->history()[p];
    EXPECT_EQ(std::vector<float>(a.cpu_data(), a.cpu_data() + a.count()),
              std::vector<float>(b.cpu_data(), b.cpu_data() + b.count()));
  }

  // --weights reads the .caffemodel.h5 (by its name), as Caffe's
  // CopyTrainedLayersFrom.
  auto fresh = Solver::Create(param, registry);
  ASSERT_TRUE(fresh.ok());
  st = CopyTrainedLayersFromFile(model4, (*fresh)->net());
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(LearnableWeights(**fresh), LearnableWeights(**straight));
  for (const std::string& f : {model2, state2, model4, state4}) std::remove(f.c_str());
}

TEST(Hdf5SnapshotTest, BadFilesFailNamingFileAndDataset) {
  const std::string dir = ::testing::TempDir();
  auto solver = MakeTestSolver(LinearSolver("type: \"SGD\" base_lr: 0.1"));
  ASSERT_NE(solver, nullptr);
  Status st = CopyTrainedLayersFromFile(dir + "/solvers_test_missing.caffemodel.h5", solver->net());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("solvers_test_missing.caffemodel.h5"), std::string::npos) << st;

  const std::string not_h5 = dir + "/solvers_test_text.caffemodel.h5";
  FILE* f = std::fopen(not_h5.c_str(), "w");
  std::fputs("not hdf5", f);
  std::fclose(f);
  st = CopyTrainedLayersFromFile(not_h5, solver->net());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(not_h5 + ": not an HDF5 file"), std::string::npos) << st;
  std::remove(not_h5.c_str());

  // A layer whose blob has another shape.
  const std::string other = dir + "/solvers_test_other.caffemodel.h5";
  hid_t file = H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t data = H5Gcreate2(file, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t fc = H5Gcreate2(data, "fc", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {2, 2};
  const float values[4] = {1, 2, 3, 4};
  H5LTmake_dataset_float(fc, "0", 2, dims, values);
  H5Gclose(fc);
  H5Gclose(data);
  H5Fclose(file);
  st = CopyTrainedLayersFromFile(other, solver->net());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("layer \"fc\" blob 0: " + other + " holds shape 2 2 (4), the net has 1 4 (4)"),
            std::string::npos)
      << st;
  std::remove(other.c_str());
}

// Caffe's HDF5 layout has one group per layer name. A repeated name whose
// later layers have no parameters (two "loss" layers) is stored once and
// reads back; one whose later layer has parameters cannot be stored.
TEST(Hdf5SnapshotTest, RepeatedLayerNamesAreStoredOnceOrRefused) {
  const std::string path = ::testing::TempDir() + "/solvers_test_repeated.caffemodel.h5";
  auto build = [](const std::string& text) {
    auto net = test::TrainNetFromText(text, "net.prototxt", testing_layers::TestRegistry());
    EXPECT_TRUE(net.ok()) << net.status();
    return std::move(net).value();
  };
  const std::string two_losses = R"(
input: "x" input_shape { dim: 2 dim: 3 }
layer { name: "fc" type: "TestLinear" bottom: "x" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "l1" }
layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "l2" loss_weight: 0 }
)";
  auto a = build(two_losses);
  ASSERT_TRUE(WriteNetToHdf5(*a, path).ok());
  auto b = build(two_losses);
  ASSERT_TRUE(CopyTrainedLayersFromFile(path, b.get()).ok());
  EXPECT_TRUE(
      test::BytesEqual(a->learnable_params()[0]->cpu_data(), 6, b->learnable_params()[0]->cpu_data(), 6, "fc/0"));

  auto c = build(R"(
input: "x" input_shape { dim: 2 dim: 3 }
layer { name: "fc" type: "TestLinear" bottom: "x" top: "y" inner_product_param { num_output: 2 } }
layer { name: "fc" type: "TestLinear" bottom: "y" top: "z" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "TestSquareLoss" bottom: "z" top: "l" }
)");
  EXPECT_EQ(WriteNetToHdf5(*c, path).message(),
            path +
                ": layers 0 and 1 are both named \"fc\" and the second has parameters; an HDF5 snapshot holds one "
                "group per layer name (use snapshot_format: BINARYPROTO)");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace nereus

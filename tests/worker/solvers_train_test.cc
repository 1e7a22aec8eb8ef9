// nereus_worker --solver with every Caffe solver type, as real processes on
// 127.0.0.1: 2 workers x batch 32 through 2 servers give the weights of
// standalone training with batch 64 (the equivalence of
// train_worker_test.cc, per type); and Caffe's HDF5 snapshots work through
// the binary's --snapshot and --weights.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tests/support/bytes_equal.h"
#include "tests/support/process_util.h"
#include "tests/support/tiny_train_job.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace {

using test::ReadFile;
using test::ReadWeights;
using test::TempDir;
using test::TinyNet;
using test::TinySolver;
using test::TrainStandalone;
using test::WriteText;
using test::WriteTinyLmdb;

struct TypeCase {
  const char* type;
  const char* update;  // Solver fields: settings that move the weights well in 10 iterations.
};

const TypeCase kCases[] = {
    {"Nesterov", "type: \"Nesterov\"\nbase_lr: 0.05\nmomentum: 0.9\nweight_decay: 0.001\nlr_policy: \"fixed\"\n"},
    {"AdaGrad", "type: \"AdaGrad\"\nbase_lr: 0.05\ndelta: 1e-6\nweight_decay: 0.001\nlr_policy: \"fixed\"\n"},
    {"RMSProp",
     "type: \"RMSProp\"\nbase_lr: 0.005\nrms_decay: 0.98\ndelta: 1e-6\nweight_decay: 0.001\nlr_policy: \"fixed\"\n"},
    {"AdaDelta",
     "type: \"AdaDelta\"\nbase_lr: 1.0\nmomentum: 0.95\ndelta: 1e-4\nweight_decay: 0.001\nlr_policy: \"fixed\"\n"},
    {"Adam", "type: \"Adam\"\nbase_lr: 0.01\nmomentum: 0.9\nmomentum2: 0.999\ndelta: 1e-6\nlr_policy: \"fixed\"\n"},
};

class SolverTypeTrainTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(SolverTypeTrainTest, TwoWorkersOfBatch32MatchStandaloneBatch64) {
  const TypeCase& c = GetParam();
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(test::RunTinyEquivalence(dir, 10, c.update));
  const auto init = ReadWeights(dir.File("init.caffemodel"));
  const auto standalone = ReadWeights(dir.File("standalone.caffemodel"));
  const auto w0 = ReadWeights(dir.File("w0.caffemodel"));
  const auto w1 = ReadWeights(dir.File("w1.caffemodel"));
  EXPECT_TRUE(test::BytesEqual(w0, w1));
  // train_worker_test.cc's tolerance for SGD (its comment explains it): the
  // same gradients summed in another order.
  const double tolerance = 2e-5;
  const double diff = test::MaxAbsDiff(standalone, w0);
  EXPECT_LE(diff, tolerance) << c.type << ": 2 x 32 through the servers differs from standalone 64";
  const double moved = test::MaxAbsDiff(standalone, init);
  EXPECT_GE(moved, 1000 * tolerance) << c.type << ": training barely moved the weights";
  std::printf("%s: max |standalone - distributed| = %g, max |final - initial| = %g, tolerance %g\n", c.type, diff,
              moved, tolerance);
}

INSTANTIATE_TEST_SUITE_P(AdaptiveTypes, SolverTypeTrainTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<TypeCase>& info) { return std::string(info.param.type); });

// A standalone Adam run with snapshot_format HDF5 writes Caffe's .h5 files;
// --snapshot resumes from the .solverstate.h5 to the same weights, bit for
// bit, and --weights starts from the .caffemodel.h5.
TEST(Hdf5TrainTest, SnapshotAndWeightsFlagsReadHdf5) {
  TempDir dir;
  const std::string db = dir.File("tiny_lmdb");
  WriteTinyLmdb(db);
  // Batch = every record: each iteration sees the same data wherever the
  // Data layer's cursor starts (a standalone resume, as Caffe's, starts it
  // at the first record).
  WriteText(dir.File("net.prototxt"), TinyNet(db, test::kRecords));
  const std::string adam = "type: \"Adam\"\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: \"fixed\"\n";
  const std::string h5 = "snapshot: 3\nsnapshot_format: HDF5\nsnapshot_prefix: \"" + dir.File("snap") + "\"\n";
  WriteText(dir.File("six.prototxt"), TinySolver(dir.File("net.prototxt"), 6, adam) + h5);
  WriteText(dir.File("three.prototxt"), TinySolver(dir.File("net.prototxt"), 3, adam));
  WriteText(dir.File("zero.prototxt"), TinySolver(dir.File("net.prototxt"), 0, adam));
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "six", dir.File("six.prototxt")));
  const std::string state3 = dir.File("snap_iter_3.solverstate.h5");
  const std::string model3 = dir.File("snap_iter_3.caffemodel.h5");
  ASSERT_FALSE(ReadFile(state3).empty()) << ReadFile(dir.File("six.log"));
  ASSERT_FALSE(ReadFile(model3).empty());

  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "resumed", dir.File("six.prototxt"), {"--snapshot=" + state3}));
  EXPECT_NE(ReadFile(dir.File("resumed.log")).find("at iteration 3"), std::string::npos)
      << ReadFile(dir.File("resumed.log"));
  const auto six = ReadWeights(dir.File("six.caffemodel"));
  EXPECT_TRUE(test::BytesEqual(six, ReadWeights(dir.File("resumed.caffemodel"))));

  // The weights after 3 iterations, from a plain run and from the .h5.
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "three", dir.File("three.prototxt")));
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "from_h5", dir.File("zero.prototxt"), {"--weights=" + model3}));
  const auto three = ReadWeights(dir.File("three.caffemodel"));
  EXPECT_TRUE(test::BytesEqual(three, ReadWeights(dir.File("from_h5.caffemodel"))));
  EXPECT_GT(test::MaxAbsDiff(three, six), 1e-3);  // The comparisons could tell them apart.
}

}  // namespace
}  // namespace nereus

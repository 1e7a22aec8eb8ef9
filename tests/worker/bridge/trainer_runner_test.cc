// RunTraining standalone and the summary it reports: the final line of
// nereus_worker --solver and --summary_json name the iteration of the test
// they report, say so when no test ran after training instead of reporting
// the iteration-0 test, and give every output of a net by name (its losses
// when it has no accuracy), never "nan".
#include "worker/bridge/trainer_runner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/tiny_train_job.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace {

using test::TempDir;
using test::WriteText;

// The tiny job's data with a test phase, as Caffe's LeNet writes it: two
// layers named "data" (one per phase) and an accuracy in TEST.
std::string NetWithTest(const std::string& db) {
  return R"(name: "tiny_with_test"
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TRAIN }
  transform_param { scale: 0.00390625 } data_param { source: ")" +
         db + R"(" batch_size: 16 backend: LMDB } }
layer { name: "data" type: "Data" top: "data" top: "label" include { phase: TEST }
  transform_param { scale: 0.00390625 } data_param { source: ")" +
         db + R"(" batch_size: 32 backend: LMDB } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy" include { phase: TEST } }
)";
}

TrainSummary Train(const TempDir& dir, const std::string& solver_extra) {
  const std::string db = dir.File("tiny_lmdb");
  if (!std::ifstream(db + "/data.mdb")) test::WriteTinyLmdb(db);
  WriteText(dir.File("net.prototxt"), NetWithTest(db));
  WriteText(dir.File("solver.prototxt"), "net: \"" + dir.File("net.prototxt") +
                                             "\"\nbase_lr: 0.1\nlr_policy: \"fixed\"\nmax_iter: 5\ndisplay: 0\n"
                                             "test_iter: 2\nrandom_seed: 3\nsnapshot_after_train: false\n" +
                                             solver_extra);
  TrainRunOptions options;
  options.solver_file = dir.File("solver.prototxt");
  auto summary = RunTraining(options);
  EXPECT_TRUE(summary.ok()) << summary.status();
  return summary.ok() ? *summary : TrainSummary();
}

// A number as the summary line prints it ("%.4f").
const char kFixed[] = "[0-9]+\\.[0-9]{4}";

TEST(TrainSummaryTest, NamesTheIterationOfTheTestItReports) {
  TempDir dir;
  const TrainSummary s = Train(dir, "test_interval: 5\n");
  ASSERT_TRUE(s.test_iter.has_value());
  EXPECT_EQ(*s.test_iter, 5);
  ASSERT_EQ(s.test_outputs.size(), 2u);  // Caffe's order: output blobs by name.
  EXPECT_EQ(s.test_outputs[0].first, "accuracy");
  EXPECT_EQ(s.test_outputs[1].first, "loss");
  EXPECT_EQ(s.test_accuracy, s.test_outputs[0].second);
  EXPECT_EQ(s.test_loss, s.test_outputs[1].second);
  EXPECT_EQ(s.test_note, "");

  const std::string line = TrainSummaryLine(s, "standalone");
  EXPECT_TRUE(std::regex_match(
      line, std::regex(std::string("standalone: 5 iterations in [0-9]+\\.[0-9] s, train loss ") + kFixed +
                       ", test at iteration 5: accuracy " + kFixed + ", loss " + kFixed + ", [0-9]+ images/s")))
      << line;
  char accuracy[32];
  std::snprintf(accuracy, sizeof(accuracy), "accuracy %.4f, ", *s.test_accuracy);
  EXPECT_NE(line.find(accuracy), std::string::npos) << line;

  const std::string json = TrainSummaryJson(s);
  EXPECT_EQ(test::JsonNumber(json, "test_iteration"), 5) << json;
  // 9 significant digits: the float itself when read back as a float.
  EXPECT_EQ(static_cast<float>(test::JsonNumber(json, "test_accuracy")), *s.test_accuracy) << json;
  EXPECT_EQ(static_cast<float>(test::JsonNumber(json, "test_loss")), *s.test_loss) << json;
  EXPECT_TRUE(test::JsonIsNull(json, "test_note")) << json;
  EXPECT_NE(json.find("\"test_outputs\": {\"accuracy\": "), std::string::npos) << json;
}

// Caffe tests at iteration 0 (test_initialization); with test_interval past
// max_iter no test follows. That test is not the result of the training.
TEST(TrainSummaryTest, SaysSoWhenNoTestRanAfterTraining) {
  TempDir dir;
  const TrainSummary s = Train(dir, "test_interval: 100\n");
  EXPECT_FALSE(s.test_iter.has_value());
  EXPECT_FALSE(s.test_accuracy.has_value());
  EXPECT_FALSE(s.test_loss.has_value());
  EXPECT_TRUE(s.test_outputs.empty());
  EXPECT_EQ(s.test_note, "no test after training (the last test ran at iteration 0, before it)");
  const std::string line = TrainSummaryLine(s, "standalone");
  EXPECT_TRUE(std::regex_match(
      line, std::regex(std::string("standalone: 5 iterations in [0-9]+\\.[0-9] s, train loss ") + kFixed +
                       ", no test after training \\(the last test ran at iteration 0, "
                       "before it\\), [0-9]+ images/s")))
      << line;
  const std::string json = TrainSummaryJson(s);
  for (const char* key : {"test_iteration", "test_accuracy", "test_loss", "test_outputs"}) {
    EXPECT_TRUE(test::JsonIsNull(json, key)) << key << ": " << json;
  }
  EXPECT_NE(json.find("\"test_note\": \"no test after training (the last test ran at iteration 0, before it)\""),
            std::string::npos)
      << json;

  // Without test_initialization there is no test at all.
  TempDir none;
  const TrainSummary t = Train(none, "test_interval: 100\ntest_initialization: false\n");
  EXPECT_EQ(t.test_note, "no test ran");
}

// A net without an accuracy output: its outputs (losses) by name, and no
// "nan" anywhere.
TEST(TrainSummaryTest, ANetWithoutAccuracyReportsItsLosses) {
  TrainSummary s;
  s.iterations = 10;
  s.wall_s = 2.25;
  s.train_loss = 0.5f;
  s.test_iter = 10;
  s.test_outputs = {{"cross_entropy_loss", 61.25f}, {"l2_error", 3.5f}};
  s.test_loss = 61.25f;
  s.images_per_s = 1000;
  s.batch_size = 100;
  EXPECT_EQ(TrainSummaryLine(s, "standalone"),
            "standalone: 10 iterations in 2.2 s, train loss 0.5000, test at iteration 10: cross_entropy_loss 61.2500, "
            "l2_error 3.5000, 1000 images/s");
  EXPECT_EQ(TrainSummaryJson(s),
            "{\"iterations\": 10, \"train_loss\": 0.5, \"test_iteration\": 10, \"test_accuracy\": null, "
            "\"test_loss\": 61.25, \"test_outputs\": {\"cross_entropy_loss\": 61.25, \"l2_error\": 3.5}, "
            "\"test_note\": null, \"images_per_s\": 1000, \"wall_s\": 2.25, \"wait_s\": 0, \"rank\": 0, "
            "\"workers\": 1, \"batch_size\": 100}\n");
  s.rank = 1;
  s.num_workers = 2;
  s.test_iter.reset();
  s.test_outputs.clear();
  s.test_loss.reset();
  s.test_note = "worker 0 runs the tests";
  EXPECT_EQ(TrainSummaryLine(s, "worker 1"),
            "worker 1: 10 iterations in 2.2 s, train loss 0.5000, worker 0 runs the tests, 1000 images/s (all "
            "workers)");
}

}  // namespace
}  // namespace nereus

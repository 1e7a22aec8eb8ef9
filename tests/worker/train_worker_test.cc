// nereus_worker --solver as real processes on 127.0.0.1: data-parallel
// training through the servers equals standalone training on the same
// records, and bad solver input fails with a message naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>

#include "nereus/client.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/tiny_train_job.h"
#include "tests/support/train_test_util.h"
#include "worker/bridge/client_parameter_sync.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/hdf5_snapshot.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace test {
namespace {

// --- Equivalence ----------------------------------------------------------

TEST(TrainEquivalenceTest, TwoWorkersOfBatch32MatchStandaloneBatch64) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(test::RunTinyEquivalence(dir, 20));
  const auto init = ReadWeights(dir.File("init.caffemodel"));
  const auto standalone = ReadWeights(dir.File("standalone.caffemodel"));
  const auto w0 = ReadWeights(dir.File("w0.caffemodel"));
  const auto w1 = ReadWeights(dir.File("w1.caffemodel"));
  ASSERT_EQ(init.size(), 6u);  // conv1, ip1, ip2: weights and biases.
  for (const auto& json : {ReadFile(dir.File("w0.json")), ReadFile(dir.File("w1.json"))}) {
    EXPECT_EQ(test::JsonNumber(json, "iterations"), 20) << json;
    EXPECT_EQ(test::JsonNumber(json, "workers"), 2) << json;
    EXPECT_EQ(test::JsonNumber(json, "batch_size"), 32) << json;
  }

  // Both workers pulled the same weights from the servers: bit for bit.
  EXPECT_TRUE(test::BytesEqual(w0, w1));

  // Tolerance. The gradients are the same sum over the same 64 records in a
  // different order: standalone sums 64 per-record gradients in one GEMM and
  // scales by 1/64; each worker sums 32 and scales by 1/32, the server adds
  // the two in rank order and scales by 1/2. In float32 each sum carries a
  // relative rounding error of order sqrt(64) * 2^-24 ~ 5e-7, and 20 momentum
  // steps (momentum 0.9, lr up to 0.1 x lr_mult 2) carry and slightly amplify
  // it, so with weights of order 1 we expect differences up to ~1e-6
  // (measured: 6e-8). 2e-5 leaves room for other BLAS kernels; it is far
  // below what a real mistake gives: the weights move by ~0.2 from their
  // initial values (checked below), and both workers reading all records
  // (overlapping shards) gave a difference of 6e-2.
  const double tolerance = 2e-5;
  const double diff = test::MaxAbsDiff(standalone, w0);
  EXPECT_LE(diff, tolerance) << "2 x 32 through the servers differs from standalone 64";
  const double moved = test::MaxAbsDiff(standalone, init);
  EXPECT_GE(moved, 1000 * tolerance) << "training barely moved the weights: the comparison would prove nothing";
  std::printf("max |standalone - distributed| = %g, max |final - initial| = %g, tolerance %g\n", diff, moved,
              tolerance);
}

// --- Faults -----------------------------------------------------------------

// A job of one worker with --timeline: its trace has the trainer's spans and the client's.
TEST(TrainTimelineTest, TraceHasEachLayersForwardAndBackwardAndItsCommunication) {
  TempDir dir;
  WriteTinyJob(dir, 16, 6);
  ClusterSpec spec = test::JobOf(1, 1);
  spec.worker_flags = {"--solver=" + dir.File("solver.prototxt"), "--timeline=" + dir.File("trace.{rank}.json"),
                       "--timeline_every=2"};
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;
  const std::string trace = ReadFile(dir.File("trace.0.json"));
  ASSERT_FALSE(trace.empty()) << report;
  for (const char* span : {"\"forward conv1\"", "\"backward conv1\"", "\"forward ip2\"", "\"backward ip1\"",
                           "server apply", "pull transfer"})
    EXPECT_NE(trace.find(span), std::string::npos) << span;
  // --timeline_every=2 keeps clocks 0, 2, 4 only.
  EXPECT_NE(trace.find("\"args\": {\"clock\": 4}"), std::string::npos);
  EXPECT_EQ(trace.find("\"args\": {\"clock\": 3}"), std::string::npos);
}

// This test is worker 1, training in-process through a ClientParameterSync;
// worker 0 is a nereus_worker process. After a few iterations together,
// server 1 is killed: the in-process Solver's Step returns a Status naming
// it (no hang, no crash) and the worker process exits non-zero.
TEST(TrainFaultTest, KilledServerFailsTheTrainersWithAStatusNamingIt) {
  TempDir dir;
  WriteTinyJob(dir, 32, 1000000);
  ClusterSpec spec = test::JobOf(2, 2, Concat({"--partition_bytes=128"}, kCrashHeartbeat));
  spec.worker_flags = {"--solver=" + dir.File("solver.prototxt")};
  spec.external_workers = {1};
  LocalCluster cluster(spec, dir);

  std::unique_ptr<Solver> solver;  // Outlives the client, whose pulls write into it.
  auto client = Client::Connect(test::TestWorkerOptions(cluster.coordinator_address(), 1));
  ASSERT_TRUE(client.ok()) << client.status();
  ClientParameterSync sync(client->get());
  caffe::SolverParameter param;
  ASSERT_TRUE(ReadSolverParameterFromTextFile(dir.File("solver.prototxt"), &param).ok());
  param.set_display(0);
  auto created = Solver::Create(param, DefaultLayerRegistry(), &sync);
  ASSERT_TRUE(created.ok()) << created.status();
  solver = std::move(created).value();
  sync.set_net(solver->net());
  Status st = solver->Step(5);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(sync.tensor_names(), (std::vector<std::string>{"conv1/0", "conv1/1", "ip1/0", "ip1/1", "ip2/0", "ip2/1"}));

  cluster.server(1).Signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  st = solver->Step(1000000);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("server 1"), std::string::npos) << st;
  EXPECT_LT(took, 15.0);
  client->reset();  // Leaves the job.

  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(15), &report)) << report;
  ASSERT_TRUE(cluster.codes()[3].has_value());  // Coordinator, servers 0 and 1, then worker 0.
  EXPECT_NE(*cluster.codes()[3], 0) << cluster.worker(0).Log();
  EXPECT_NE(cluster.worker(0).Log().find("server 1"), std::string::npos) << cluster.worker(0).Log();
}

// --- Bad input --------------------------------------------------------------

// --- Caffe's `time` ---------------------------------------------------------

// nereus_worker --time on the tiny LeNet-like net (Data, conv1, ip1, ip2,
// loss) on the CPU: every layer named, with its forward and backward line,
// and the totals the sums of the layers' averages (the JSON has them unrounded
// to 4 places as the report prints them).
TEST(TimeModeTest, EveryLayerIsNamedAndTheTotalsAreTheirSums) {
  TempDir dir;
  test::WriteTinyJob(dir, 16, 1);
  const std::vector<std::string> argv = {BinaryPath("nereus_worker"), "--time=" + dir.File("net.prototxt"),
                                         "--iterations=3", "--summary_json=" + dir.File("time.json")};
  ASSERT_EQ(RunToExit(argv, dir.File("time.log"), std::chrono::seconds(60)), 0) << ReadFile(dir.File("time.log"));
  const std::string log = ReadFile(dir.File("time.log"));
  const std::string json = ReadFile(dir.File("time.json"));
  EXPECT_NE(log.find("Timing net "), std::string::npos) << log;
  EXPECT_NE(log.find(" on CPU: average over 3 pass(es)"), std::string::npos) << log;
  caffe::NetParameter net;
  ASSERT_TRUE(ReadNetParameterFromTextFile(dir.File("net.prototxt"), &net).ok());
  int train_layers = 0;
  for (const auto& layer : net.layer()) {
    bool test_only = false;
    for (const auto& rule : layer.include()) test_only |= rule.phase() == caffe::TEST;
    if (test_only) continue;
    ++train_layers;
    const std::regex lines("\n" + layer.name() + " +forward: [0-9]+\\.[0-9]{4} ms\\.\n" + layer.name() +
                           " +backward: [0-9]+\\.[0-9]{4} ms\\.\n");
    EXPECT_TRUE(std::regex_search(log, lines)) << layer.name() << "\n" << log;
    EXPECT_NE(json.find("{\"name\": \"" + layer.name() + "\""), std::string::npos) << json;
  }
  EXPECT_GE(train_layers, 5);
  // The totals: the sums of the layers' values as the JSON prints them, to
  // the rounding of 4 decimals per term.
  double forward = 0, backward = 0;
  for (size_t at = json.find("\"layers\""); (at = json.find("\"forward_ms\": ", at)) != std::string::npos;) {
    at += 14;
    forward += std::stod(json.substr(at));
    at = json.find("\"backward_ms\": ", at) + 15;
    backward += std::stod(json.substr(at));
  }
  EXPECT_NEAR(test::JsonNumber(json, "forward_ms"), forward, 1e-4 * train_layers) << json;
  EXPECT_NEAR(test::JsonNumber(json, "backward_ms"), backward, 1e-4 * train_layers) << json;
  EXPECT_NE(log.find("Average Forward pass: "), std::string::npos) << log;
  EXPECT_NE(log.find("Average Backward pass: "), std::string::npos) << log;
}

TEST(TimeModeTest, ANetThatDoesNotParseNamesTheFileAndLine) {
  TempDir dir;
  WriteText(dir.File("bad.prototxt"), "name: \"bad\"\nlayer {\n  name: \"x\"\n  typo: 3\n}\n");
  const std::vector<std::string> argv = {BinaryPath("nereus_worker"), "--time=" + dir.File("bad.prototxt")};
  EXPECT_EQ(RunToExit(argv, dir.File("bad.log"), std::chrono::seconds(60)), 2);
  const std::string log = ReadFile(dir.File("bad.log"));
  EXPECT_NE(log.find("--time=" + dir.File("bad.prototxt") + ": "), std::string::npos) << log;
  EXPECT_NE(log.find(dir.File("bad.prototxt") + ":4"), std::string::npos) << log;
  EXPECT_NE(log.find("typo"), std::string::npos) << log;
}

// --- Caffe's `test` and `device_query` ------------------------------------------

// The mean loss of `iterations` TEST-phase forwards of DIR/net.prototxt after
// copying `weights` in order, computed here as nereus_worker --test does.
double InProcessTestLoss(const TempDir& dir, const std::vector<std::string>& weights, int iterations) {
  caffe::NetParameter param;
  EXPECT_TRUE(ReadNetParameterFromTextFile(dir.File("net.prototxt"), &param).ok());
  param.mutable_state()->set_phase(caffe::TEST);
  auto net = Net::Create(param, DefaultLayerRegistry());
  EXPECT_TRUE(net.ok()) << net.status();
  for (const auto& w : weights) EXPECT_TRUE(CopyTrainedLayersFromFile(w, net->get()).ok());
  double sum = 0;
  for (int i = 0; i < iterations; ++i) {
    auto loss = (*net)->Forward();
    EXPECT_TRUE(loss.ok());
    sum += (*net)->output_blobs()[0]->cpu_data()[0];
  }
  return sum / iterations;
}

// nereus_worker --test scores a trained net as `caffe test` does: every
// batch's outputs and their means, from the weights given (a comma-separated
// list copied in order: the last file's layers win).
TEST(TestModeTest, ScoresATrainedNetWithTheWeightsInOrder) {
  TempDir dir;
  const std::string solver = test::WriteTinyJob(dir, 16, 20);
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "trained", solver));
  WriteText(dir.File("solver0.prototxt"), TinySolver(dir.File("net.prototxt"), 0));
  ASSERT_NO_FATAL_FAILURE(TrainStandalone(dir, "init", dir.File("solver0.prototxt")));
  auto score = [&](const std::string& weights, const std::string& name) {
    const std::vector<std::string> argv = {BinaryPath("nereus_worker"), "--test=" + dir.File("net.prototxt"),
                                           "--weights=" + weights, "--iterations=3",
                                           "--summary_json=" + dir.File(name + ".json")};
    EXPECT_EQ(RunToExit(argv, dir.File(name + ".log"), std::chrono::seconds(60)), 0)
        << ReadFile(dir.File(name + ".log"));
    const std::string log = ReadFile(dir.File(name + ".log"));
    for (int i = 0; i < 3; ++i)
      EXPECT_NE(log.find("Batch " + std::to_string(i) + ", loss = "), std::string::npos) << log;
    EXPECT_NE(log.find("\nloss = "), std::string::npos) << log;
    EXPECT_NE(log.find(" (* 1 = "), std::string::npos) << log;  // The loss weight.
    const std::string json = ReadFile(dir.File(name + ".json"));
    EXPECT_EQ(test::JsonNumber(json, "iterations"), 3) << json;
    return test::JsonNumber(json, "loss");
  };
  const std::string trained = dir.File("trained.caffemodel"), init = dir.File("init.caffemodel");
  const double trained_loss = score(trained, "trained");
  const double init_loss = score(init, "init");
  // The process's means are this computation's, printed to 9 digits.
  EXPECT_EQ(static_cast<float>(trained_loss), static_cast<float>(InProcessTestLoss(dir, {trained}, 3)));
  EXPECT_EQ(static_cast<float>(init_loss), static_cast<float>(InProcessTestLoss(dir, {init}, 3)));
  EXPECT_LT(trained_loss, init_loss);  // Training moved the weights.
  EXPECT_EQ(score(init + "," + trained, "both"), trained_loss);
  EXPECT_EQ(score(trained + "," + init, "reversed"), init_loss);
}

TEST(TestModeTest, AMissingWeightsFileIsNamed) {
  TempDir dir;
  test::WriteTinyJob(dir, 16, 1);
  const std::vector<std::string> argv = {BinaryPath("nereus_worker"), "--test=" + dir.File("net.prototxt"),
                                         "--weights=" + dir.File("nowhere.caffemodel"), "--iterations=1"};
  EXPECT_EQ(RunToExit(argv, dir.File("log"), std::chrono::seconds(60)), 1);
  EXPECT_NE(ReadFile(dir.File("log")).find("--weights=" + dir.File("nowhere.caffemodel") + ": "), std::string::npos)
      << ReadFile(dir.File("log"));
}

// Without a GPU (this machine, CI) device_query says why there is none.
TEST(DeviceQueryTest, SaysWhyThereIsNoGpu) {
  if (gpu::DeviceCount() > 0) GTEST_SKIP() << "this machine has a GPU: its properties are listed instead";
  TempDir dir;
  EXPECT_EQ(RunToExit({BinaryPath("nereus_worker"), "--device_query"}, dir.File("log"), std::chrono::seconds(60)), 1);
  const std::string log = ReadFile(dir.File("log"));
  EXPECT_NE(log.find(gpu::BuiltWithCuda() ? "--device_query: no CUDA device ("
                                          : "--device_query: Nereus was built "
                                            "without CUDA"),
            std::string::npos)
      << log;
}

TEST(TrainBadInputTest, MissingSolverFileFailsNamingIt) {
  TempDir dir;
  const std::string missing = dir.File("no_such_solver.prototxt");
  EXPECT_NE(RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + missing}, dir.File("log"),
                      std::chrono::seconds(30)),
            0);
  EXPECT_NE(ReadFile(dir.File("log")).find("cannot open " + missing), std::string::npos) << ReadFile(dir.File("log"));
}

TEST(TrainBadInputTest, UnknownSolverFieldFailsNamingFileAndLine) {
  TempDir dir;
  const std::string solver = dir.File("solver.prototxt");
  WriteText(solver, "base_lr: 0.01\nmax_iter: 10\n  bogus_field: 3\n");
  EXPECT_NE(RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + solver}, dir.File("log"),
                      std::chrono::seconds(30)),
            0);
  EXPECT_NE(ReadFile(dir.File("log")).find(solver + ":3:3: unknown field \"bogus_field\""), std::string::npos)
      << ReadFile(dir.File("log"));
}

TEST(TrainBadInputTest, UnknownNetFieldFailsNamingNetFileAndLine) {
  TempDir dir;
  const std::string net = dir.File("net.prototxt");
  WriteText(net, "name: \"n\"\nlayer {\n  name: \"ip\"\n  type: \"InnerProduct\"\n  num_outputz: 3\n}\n");
  WriteText(dir.File("solver.prototxt"), TinySolver(net, 1));
  EXPECT_NE(RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + dir.File("solver.prototxt")},
                      dir.File("log"), std::chrono::seconds(30)),
            0);
  EXPECT_NE(ReadFile(dir.File("log")).find(net + ":5:3: unknown field \"num_outputz\""), std::string::npos)
      << ReadFile(dir.File("log"));
}

TEST(TrainBadInputTest, DistributedSnapshotWithoutResumeIsRefused) {
  TempDir dir;
  WriteText(dir.File("solver.prototxt"), TinySolver(dir.File("net.prototxt"), 1));
  EXPECT_EQ(RunToExit({BinaryPath("nereus_worker"), "--solver=" + dir.File("solver.prototxt"),
                       "--snapshot=" + dir.File("x.solverstate"), "--coordinator=127.0.0.1:1"},
                      dir.File("log"), std::chrono::seconds(30)),
            2);
  EXPECT_NE(ReadFile(dir.File("log")).find("--snapshot in a job needs --resume"), std::string::npos)
      << ReadFile(dir.File("log"));
}

// --gpu: a GPU that cannot be had is an error naming it, before anything is
// built (here: no CUDA device, or a build without CUDA; on a GPU machine: an
// id past its last device).
TEST(TrainBadInputTest, AGpuThatCannotBeHadIsAnErrorNamingIt) {
  TempDir dir;
  WriteText(dir.File("solver.prototxt"), TinySolver(dir.File("net.prototxt"), 1));
  EXPECT_EQ(
      RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + dir.File("solver.prototxt"), "--gpu=99"},
                dir.File("log"), std::chrono::seconds(30)),
      2);
  const std::string log = ReadFile(dir.File("log"));
  const size_t at = log.find("--gpu=99: ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string why = log.substr(at, log.find('\n', at) - at);
  EXPECT_TRUE(why.find(": no CUDA device (") != std::string::npos ||
              why.find(": Nereus was built without CUDA") != std::string::npos ||
              why.find(": CUDA device 99 does not exist: this machine has ") != std::string::npos)
      << why;
  EXPECT_EQ(
      RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + dir.File("solver.prototxt"), "--gpu=-2"},
                dir.File("log2"), std::chrono::seconds(30)),
      2);
  EXPECT_NE(ReadFile(dir.File("log2")).find("--gpu=-2: expected a CUDA device id (0, 1, ...) or -1"), std::string::npos)
      << ReadFile(dir.File("log2"));
  // In a job (no --standalone) a GPU is allowed, and one that cannot be had
  // is the same error, before the worker tries to join.
  EXPECT_EQ(RunToExit({BinaryPath("nereus_worker"), "--solver=" + dir.File("solver.prototxt"), "--gpu=99"},
                      dir.File("log3"), std::chrono::seconds(30)),
            2);
  const std::string log3 = ReadFile(dir.File("log3"));
  const size_t at3 = log3.find("--gpu=99: ");
  ASSERT_NE(at3, std::string::npos) << log3;
  EXPECT_EQ(log3.substr(at3, log3.find('\n', at3) - at3), why) << log3;
  EXPECT_EQ(log3.find("joining the job"), std::string::npos) << log3;
}

}  // namespace
}  // namespace test
}  // namespace nereus

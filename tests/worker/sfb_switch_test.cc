// HybComm's measured choice with real processes on 127.0.0.1 (synthetic
// workers, --fc_batch): a layer switched at a clock boundary keeps BSP byte
// for byte against a job fixed to the new path from that clock
// (--sfb_schedule), both ways; workers whose own measurements disagree take
// one choice; a pause between iterations is no part of a clock; a worker
// that dies during a trial ends the job naming it; and,
// in a network namespace, a link reshaped mid-run makes the layer go as
// factors, with the reason in the log. The choices that must not depend on
// the machine's speed are made on injected costs (--sfb_inject_costs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "bench/harness/netns.h"
#include "nereus/client.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/sfb_job.h"
#include "tests/support/synthetic_weights.h"
#include "worker/client/client_internal.h"

namespace nereus {
namespace test {
namespace {

// Tensors: t0 1000 and t2 7 through the servers, t1 64 x 100 fully
// connected (8 factor rows per worker), cut into 25 partitions of 256 floats
// over 2 servers, so a switch lends and hands back many partitions.
constexpr char kTensors[] = "1000,64x100,7";
constexpr int kWorkers = 2, kClocks = 24, kBatch = 8;

// HybComm's start-up rates, given: with the rebuild's GEMM at 1 MFLOP/s the
// start-up model sends t1 through the servers (its rebuild would take 0.2 s).
// A prior that lopsided would leave t1 untried (--sfb_trial_trust_ratio,
// 10 by default; ATrustedPriorRunsNoTrial): these jobs try every layer.
const char* const kSlowRebuild[] = {"--sfb_link_gbit=1", "--sfb_rebuild_gflops=0.001", "--sfb_update_gbytes=2",
                                    "--sfb_apply_gbytes=2", "--sfb_trial_trust_ratio=0"};

SfbJobResult RunJob(const std::vector<std::string>& flags,
                    const std::vector<std::pair<int, std::vector<std::string>>>& rank_flags = {}) {
  TempDir dir;
  ClusterSpec spec = JobOf(2, kWorkers, {"--partition_bytes=1024"});
  spec.worker_flags = {"--tensors=" + std::string(kTensors), "--fc_batch=" + std::to_string(kBatch),
                       "--iterations=" + std::to_string(kClocks), "--seed=5", "--display=0"};
  for (const std::string& f : InvDecaySgdFlags()) spec.worker_flags.push_back(f);
  for (const char* f : kSlowRebuild) spec.worker_flags.push_back(f);
  for (const std::string& f : flags) spec.worker_flags.push_back(f);
  AddWeightsAndSummaryFlags(&spec, dir, kWorkers, rank_flags);
  return RunSfbJob(spec, dir, std::chrono::seconds(120));
}

// The trial of t1 (warm-up 5 clocks; 3 measured on each path): baseline
// 5-7, the other path from clock 8 (decided at 7), 8 settling, 9-11
// measured, decided at 12 for clock 13 on. Starting through the servers, at
// 100 ms a clock there against 50 as factors it stays as factors from clock
// 8 on; at 50 against 100 it goes back to the servers at clock 13. Starting
// as factors (the start-up model's choice with a fast rebuild), at 50
// against 100 it stays on the servers from clock 8 (the servers lent it at
// the start and get it handed back). Each measured job must equal, byte for
// byte, the job told those switches.
TEST(SfbSwitchTest, MeasuredSwitchesAreByteExactAgainstAFixedSchedule) {
  struct Case {
    std::vector<std::string> measured, fixed;
    std::string decision, first_switch, factors;
    int sfb_clocks, switches;
  };
  const Case cases[] = {
      {{"--sfb=auto", "--sfb_inject_costs=t1:100:50"},
       {"--sfb=off", "--sfb_schedule=t1:8:sfb"},
       "t1 takes SFB from clock 13 (PS before the trial): measured PS 100.0 ms, SFB 50.0 ms per clock",
       "t1 travels as sufficient factors from clock 8",
       "1",
       kClocks - 8,
       1},
      {{"--sfb=auto", "--sfb_inject_costs=t1:50:100"},
       {"--sfb=off", "--sfb_schedule=t1:8:sfb,t1:13:ps"},
       "t1 takes PS from clock 13 (PS before the trial): measured PS 50.0 ms, SFB 100.0 ms per clock",
       "t1 travels as sufficient factors from clock 8",
       "",
       5,
       2},
      {{"--sfb=auto", "--sfb_rebuild_gflops=20", "--sfb_inject_costs=t1:50:100"},
       {"--sfb=on", "--sfb_schedule=t1:8:ps"},
       "t1 takes PS from clock 13 (SFB before the trial): measured PS 50.0 ms, SFB 100.0 ms per clock",
       "t1 travels through the servers from clock 8",
       "",
       8,
       1},
  };
  std::vector<std::vector<float>> fixed_weights;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.decision);
    const SfbJobResult measured = RunJob(c.measured);
    const SfbJobResult fixed = RunJob(c.fixed);
    fixed_weights.push_back(fixed.weights[0]);
    ASSERT_EQ(measured.weights[0].size(), 1000u + 6400u + 7u);
    for (int w = 0; w < kWorkers; ++w) {
      EXPECT_TRUE(BytesEqual(measured.weights[0], measured.weights[w], "measured, worker " + std::to_string(w)));
      EXPECT_TRUE(
          BytesEqual(fixed.weights[w], measured.weights[w], "measured against fixed, worker " + std::to_string(w)));
      EXPECT_EQ(JsonList(measured.json[w], "sfb_tensors"), c.factors) << measured.json[w];
      EXPECT_EQ(JsonList(fixed.json[w], "sfb_tensors"), c.factors) << fixed.json[w];
      // The decision, its figures, and the switches, on every worker.
      EXPECT_NE(measured.logs[w].find(c.decision), std::string::npos) << measured.logs[w];
      EXPECT_NE(measured.logs[w].find("HybComm: " + c.first_switch + " (HybComm's trials)"), std::string::npos)
          << measured.logs[w];
      EXPECT_NE(fixed.logs[w].find("HybComm: " + c.first_switch + " (--sfb_schedule)"), std::string::npos)
          << fixed.logs[w];
      // The clocks sent as factors, to the one other worker.
      EXPECT_EQ(JsonNumber(measured.json[w], "factor_messages"), c.sfb_clocks) << measured.json[w];
      EXPECT_EQ(JsonNumber(fixed.json[w], "factor_messages"), c.sfb_clocks) << fixed.json[w];
      EXPECT_EQ(JsonNumber(measured.json[w], "sfb_switches"), c.switches) << measured.json[w];
    }
  }
  // The schedules end apart (factors sum in another order than the
  // servers): the comparisons above compared jobs that really switched.
  ASSERT_EQ(fixed_weights.size(), 3u);
  EXPECT_FALSE(BytesEqual(fixed_weights[0], fixed_weights[1], "the first two schedules"));
  EXPECT_FALSE(BytesEqual(fixed_weights[1], fixed_weights[2], "the last two schedules"));
}

TEST(SfbSwitchTest, WorkersThatMeasureDifferentlyTakeOneChoice) {
  // Alone, worker 0 would keep t1 as factors (60 against 100 ms a clock)
  // and worker 1 would send it back through the servers (90 against 70).
  // The job takes each path's slowest worker: PS 100, SFB 90 ms: factors.
  const SfbJobResult run =
      RunJob({"--sfb=auto"}, {{0, {"--sfb_inject_costs=t1:100:60"}}, {1, {"--sfb_inject_costs=t1:70:90"}}});
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_NE(run.logs[w].find("t1 takes SFB from clock 13 (PS before the trial): measured PS 100.0 ms, SFB 90.0 ms "
                               "per clock (the slowest worker's median of 3 clocks each"),
              std::string::npos)
        << run.logs[w];
    EXPECT_EQ(JsonList(run.json[w], "sfb_tensors"), "1") << run.json[w];
    EXPECT_TRUE(BytesEqual(run.weights[0], run.weights[w], "worker " + std::to_string(w)));
  }
}

// A clock's period is its busy span: a pause between iterations (a
// trainer's test phase, a snapshot) costs both paths alike, and before it
// was left out, pauses inside a trial's window decided the trial. Here
// every worker pauses 1 s after the backward of clocks 9-11, the clocks
// measured as factors: the figures the decision reads leave the pauses
// out (a clock of this job takes milliseconds; a figure of a second or
// more is the pause).
TEST(SfbSwitchTest, APauseBetweenIterationsIsNotPartOfTheClock) {
  constexpr int kPauseMs = 1000;
  const SfbJobResult run = RunJob({"--sfb=auto", "--pause_ms=" + std::to_string(kPauseMs), "--pause_clocks=9,10,11"});
  const std::regex decision(
      "t1 takes (PS|SFB) from clock 13 \\(PS before the trial\\): measured PS ([0-9.]+) ms, SFB ([0-9.]+) ms per "
      "clock");
  for (int w = 0; w < kWorkers; ++w) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(run.logs[w], m, decision)) << run.logs[w];
    EXPECT_LT(std::stod(m[2].str()), kPauseMs) << m[0].str();
    EXPECT_LT(std::stod(m[3].str()), kPauseMs) << m[0].str();
    EXPECT_TRUE(BytesEqual(run.weights[0], run.weights[w], "worker " + std::to_string(w)));
  }
}

// With the default trust ratio, t1's prior (through the servers a fraction
// of a millisecond a clock, as factors 0.2 s) is more than 10 times apart,
// the cheaper path its own: no trial, and the job equals one that never
// switches (--sfb=off), byte for byte. The clocks' periods are injected
// (constant): measured, a few milliseconds each on a loaded machine, they
// could drift by more than 25% for 5 clocks after the round and start a
// re-trial, which tries every layer.
TEST(SfbSwitchTest, ATrustedPriorRunsNoTrial) {
  const SfbJobResult trusted = RunJob({"--sfb=auto", "--sfb_trial_trust_ratio=10", "--sfb_inject_costs=t1:10:200"});
  const SfbJobResult off = RunJob({"--sfb=off"});
  const std::regex skipped(
      "HybComm clock 5: t1 stays on PS without a trial: the prior prices PS [0-9.]+ ms, SFB [0-9.]+ ms per clock, "
      "more than 10x apart \\(sfb_trial_trust_ratio\\)");
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_TRUE(std::regex_search(trusted.logs[w], skipped)) << trusted.logs[w];
    EXPECT_EQ(trusted.logs[w].find("takes "), std::string::npos) << trusted.logs[w];
    EXPECT_EQ(JsonNumber(trusted.json[w], "sfb_trial_clocks"), 0) << trusted.json[w];
    EXPECT_EQ(JsonNumber(trusted.json[w], "sfb_switches"), 0) << trusted.json[w];
    EXPECT_EQ(JsonList(trusted.json[w], "sfb_tensors"), "") << trusted.json[w];
    EXPECT_TRUE(BytesEqual(off.weights[w], trusted.weights[w], "trusted against off, worker " + std::to_string(w)));
  }
}

TEST(SfbSwitchTest, AWorkerThatDiesDuringATrialEndsTheJobNamingIt) {
  TempDir dir;
  ClusterSpec spec = JobOf(1, 3, kCrashHeartbeat);
  spec.worker_flags = {"--tensors=20x30", "--fc_batch=4", "--iterations=1000000",        "--compute_ms=5",
                       "--display=0",     "--sfb=auto",   "--sfb_inject_costs=t0:100:50"};
  for (const char* f : kSlowRebuild) spec.worker_flags.push_back(f);
  spec.external_workers = {0};  // This test is worker 0.
  LocalCluster cluster(spec, dir);

  ClientOptions o = TestWorkerOptions(cluster.coordinator_address(), 0);
  o.sfb = SfbMode::kAuto;
  o.sfb_link_gbit = 1;
  o.sfb_rebuild_gflops = 0.001;
  o.sfb_update_gbytes = 2;
  o.sfb_apply_gbytes = 2;
  o.sfb_trial_trust_ratio = 0;  // As kSlowRebuild: the job's digest must match.
  ClientInternals internals;
  internals.sfb_injected_costs["t0"] = {0.1, 0.05};
  FcTensor20x30 tensor;  // Outlives the client, whose threads write into it.
  auto client = ConnectClient(o, internals);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(tensor.RegisterAndInit(client->get()).ok());
  EXPECT_TRUE((*client)->sfb_tensors().empty());
  // Through the trial's switch: t0 goes as factors from clock 8.
  int64_t clock = 0;
  for (; clock < 10; ++clock) {
    ASSERT_TRUE((*client)->WaitWeights(0, clock).ok());
    ASSERT_TRUE((*client)->GradientsReady(0, clock).ok());
  }
  EXPECT_TRUE((*client)->SfbAt(0, 9));
  EXPECT_EQ((*client)->sfb_tensors(), std::vector<int>{0});
  // Killed while t0 is measured as factors (clocks 9-11; the decision's
  // agreement comes at 12).
  ExpectKilledWorker1Named(cluster, client->get(), clock, 14);
}

// The whole job in a network namespace of its own, its loopback unshaped
// at first. t1 (500 x 500, 4 factor rows) is rebuilt 100 ms slower than
// this CPU (--sfb_rebuild_delay_ms: a slow device) and the start-up model
// prices its rebuild at 0.001 GFLOP/s, so the first round trusts that prior
// (--sfb_trial_trust_ratio=10: SFB priced hundreds of times dearer) and
// leaves t1 on the servers without a trial. Not a trial there: through the
// servers t1 moves 1 MB each way a worker, which under TSan on a loaded
// machine took 534 ms a clock against the factors' 500, and a first trial
// then chose the factors. At clock 18 worker 0 reshapes the loopback to 20
// Mbit/s: the servers' path now takes about 1.7 s a clock whatever the CPU,
// the factors' (16 KB a worker) 0.1 s plus the rebuild. The clock's period
// drifts, the next check starts a re-trial, which tries every layer, and
// t1 goes as factors, every step said in the log.
TEST(SfbSwitchTest, AReshapedLinkSwitchesTheLayerAndSaysWhy) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_NET_ADMIN) to create a network namespace";
  auto ns = bench::NetNamespace::Create("nereus_switch_" + std::to_string(getpid()), /*rate_mbit=*/0);
  if (!ns.ok()) GTEST_SKIP() << "network namespaces unavailable here: " << ns.status().message();
  TempDir dir;
  ClusterSpec spec = JobOf(1, 2, {"--partition_bytes=262144"});
  spec.wrap = (*ns)->Wrap({});
  spec.worker_flags = {"--tensors=2000,500x500",
                       "--fc_batch=4",
                       "--iterations=44",
                       "--compute_ms=10",
                       "--display=0",
                       "--sfb=auto",
                       "--sfb_rebuild_delay_ms=100",
                       "--exec_at_clock=18",
                       "--exec_command=tc qdisc replace dev lo root tbf rate 20mbit burst 256kb latency 500ms"};
  for (const std::string& f : InvDecaySgdFlags()) spec.worker_flags.push_back(f);
  // The start-up model sends t1 through the servers (given rates), so the
  // first round tries the factors as the alternative.
  for (const char* f : kSlowRebuild) spec.worker_flags.push_back(f);
  spec.worker_flags.push_back("--sfb_trial_trust_ratio=10");  // After kSlowRebuild's 0: this one counts.
  AddWeightsAndSummaryFlags(&spec, dir, 2);
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(240), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;
  const std::string log = cluster.worker(0).Log();
  EXPECT_NE(log.find("ran --exec_command"), std::string::npos) << log;
  // For the record: what the job decided, and why.
  std::smatch m;
  for (auto it = log.cbegin(); std::regex_search(it, log.cend(), m, std::regex("HybComm clock [^\n]*"));
       it = m[0].second)
    std::printf("%s\n", m[0].str().c_str());
  // The first round kept the servers without a trial; the drift started a
  // second, which chose the factors.
  EXPECT_TRUE(std::regex_search(log, std::regex("HybComm clock 5: t1 stays on PS without a trial: the prior prices PS "
                                                "[0-9.]+ ms, SFB [0-9.]+ ms per clock, more than 10x apart")))
      << log;
  // Every decision on t1 is a re-trial's.
  for (auto it = log.cbegin(); std::regex_search(it, log.cend(), m, std::regex("t1 takes [^\n]*")); it = m[0].second)
    EXPECT_NE(m[0].str().find("(re-trial)"), std::string::npos) << "a first round tried t1: " << m[0].str();
  EXPECT_TRUE(std::regex_search(log, std::regex("HybComm clock \\d+: the clock's period drifted from [0-9.]+ ms, its "
                                                "median after the last round, by more than 25% and 1.0 ms for \\d+ "
                                                "clocks on "
                                                "every worker \\(now [0-9.]+ ms on the slowest\\): trying the layers "
                                                "again")))
      << log;
  EXPECT_TRUE(
      std::regex_search(log, std::regex("HybComm clock \\d+: t1 takes SFB from clock \\d+ \\(PS before the "
                                        "trial\\): measured PS [0-9.]+ ms, SFB [0-9.]+ ms per clock.*\\(re-trial\\)")))
      << log;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(JsonList(ReadFile(dir.File("s" + std::to_string(w))), "sfb_tensors"), "1");
  }
  EXPECT_TRUE(BytesEqual(ReadFloatFile(dir.File("w0")), ReadFloatFile(dir.File("w1")), "the replicas"));
}

}  // namespace
}  // namespace test
}  // namespace nereus

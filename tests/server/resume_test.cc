// Whole jobs as real processes on 127.0.0.1, killed and resumed from the
// servers' checkpoints: the resumed job ends with the same weights, bit for
// bit, as a job that was never interrupted; or only the dead server is
// restarted, it rejoins, and the job rolls back to its checkpoint and ends
// bitwise equal too. Plus the refusals (no common checkpoint, a process
// without --resume, rejoins that cannot be done, checkpoints under async).
// The synthetic worker only (no trainer): these run under ThreadSanitizer
// too. LeNet's are in lenet_resume_test.cc.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

#include "server/checkpoint.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/resume_util.h"
#include "tests/support/synthetic_weights.h"

namespace nereus {
namespace test {
namespace {

void CopyDir(const std::string& from, const std::string& to) {
  ASSERT_EQ(std::system(("cp -r '" + from + "' '" + to + "'").c_str()), 0);
}

// Worker w's weights of run `a` and of run `b` (out/<a><w>), byte for byte.
::testing::AssertionResult SameWeights(const TempDir& out, const std::string& a, const std::string& b, int w) {
  const std::string n = std::to_string(w);
  return test::BytesEqual(test::ReadFloatFile(out.File(a + n)), test::ReadFloatFile(out.File(b + n)),
                          "worker " + n + "'s weights of " + a + " against " + b);
}

void FlipLastByte(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-1, std::ios::end);
  char c = 0;
  f.read(&c, 1);
  c ^= 1;
  f.seekp(-1, std::ios::end);
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << path;
}

// --- Synthetic model ------------------------------------------------------

class SyntheticResumeTest : public ::testing::Test {
 protected:
  // 2 servers x 2 workers, partitions spread over both servers; a job where
  // nobody dies unless `heartbeat` is kCrashHeartbeat.
  ClusterSpec Spec(int iterations, const std::string& weights_prefix, const TempDir& out,
                   const std::vector<std::string>& heartbeat = kPatientHeartbeat) {
    return test::SyntheticResumeSpec(iterations, weights_prefix, out, heartbeat);
  }
  // The 100-clock reference, never interrupted: weights in out/ref<w>.
  void RunReference(const TempDir& out) {
    TempDir logs;
    std::string report;
    ExpectAllZero(RunJob(Spec(100, "ref", out), logs, &report), report);
    ExpectTrained(out);
  }
  // The reference moved every tensor from its initial weights (--seed=3):
  // runs compared bit for bit with it did train.
  static void ExpectTrained(const TempDir& out) {
    const std::vector<double> moved =
        test::MovedFromInitial(test::ReadFloatFile(out.File("ref0")), 3, {1000, 2500, 1728, 7});
    for (size_t t = 0; t < moved.size(); ++t) EXPECT_GT(moved[t], kMinMove) << "tensor " << t << " barely moved";
  }
  // The largest change of a weight in each tensor, deterministic under BSP:
  // 2.48, 2.65, 2.67 and 0.91.
  static constexpr double kMinMove = 0.5;
  // 100 clocks, checkpoints every 20 into `ckpt`, and a job that waits 20 s
  // for a dead node: time for its replacement to come.
  ClusterSpec RejoinSpec(const TempDir& out, const std::string& ckpt) {
    ClusterSpec spec = Spec(100, "rejoined", out);
    spec.coordinator_flags = Concat({"--partition_bytes=1024", "--consistency=bsp"}, kPatientHeartbeat);
    AddCheckpoints(&spec, ckpt, false);
    return spec;
  }
  // A job that runs for several seconds (150 clocks of at least 40 ms,
  // weights in out/w<w>) under BSP, checkpointing into `ckpt`; a node silent
  // for `heartbeat_timeout_ms` is dead.
  ClusterSpec SlowBspSpec(const TempDir& out, const std::string& ckpt, int heartbeat_timeout_ms) {
    ClusterSpec spec = Spec(150, "w", out);
    spec.coordinator_flags =
        Concat({"--partition_bytes=1024", "--consistency=bsp"},
               {"--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=" + std::to_string(heartbeat_timeout_ms)});
    spec.worker_flags.push_back("--compute_ms=40");
    AddCheckpoints(&spec, ckpt, false);
    return spec;
  }
  // A duplicate of server 1 refused because server 1 answered the
  // coordinator's probe, its log also holding `more`.
  static void ExpectDuplicateRefused(Subprocess& duplicate, std::vector<std::string> more = {}) {
    std::vector<std::string> parts = {"coordinator refused registration: server 1 is alive at tcp://127.0.0.1:",
                                      "(it answered the coordinator's probe after "};
    parts.insert(parts.end(), more.begin(), more.end());
    ExpectExitWithLog(duplicate, 1, parts);
  }
  // The job ends, every process exiting 0, never rolled back (logs: its
  // LocalCluster's folder).
  static void ExpectEndsWithoutRollback(LocalCluster& cluster, const TempDir& logs) {
    std::string report;
    ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report;
    ExpectAllZero(cluster.codes(), report);
    EXPECT_FALSE(Contains(ReadFile(logs.File("coordinator.log")), "rolled back")) << report;
  }
  void AddCheckpoints(ClusterSpec* spec, const std::string& dir, bool resume) {
    spec->server_flags = {"--checkpoint_dir=" + dir, "--checkpoint_every=20"};
    if (resume) {
      spec->server_flags.push_back("--resume");
      spec->coordinator_flags.push_back("--resume");
      spec->worker_flags.push_back("--resume");
    }
  }
};

TEST_F(SyntheticResumeTest, KilledServerThenWholeJobResumedEndsBitwiseEqual) {
  TempDir out, ckpt, ref_logs, crash_logs, resume_logs, fallback_logs;
  std::string report;

  // The reference: 100 clocks, never interrupted, no checkpoints.
  auto codes = RunJob(Spec(100, "ref", out), ref_logs, &report);
  ExpectAllZero(codes, report);
  ExpectTrained(out);

  // Checkpoints every 20 clocks; server 1 is killed (SIGKILL) at clock 50 of
  // a job meant to run to 60: every process stops, the job is lost.
  ClusterSpec crash = Spec(60, "crash", out, kCrashHeartbeat);
  AddCheckpoints(&crash, ckpt.File("ckpt"), false);
  crash.server_rank_flags.push_back({1, {"--crash_at_clock=50"}});
  codes = RunJob(crash, crash_logs, &report);
  ASSERT_EQ(codes.size(), 5u);
  EXPECT_EQ(codes[2], 128 + 9) << report;  // Server 1 died of SIGKILL.
  EXPECT_NE(codes[0], 0) << report;        // The coordinator aborted the job...
  EXPECT_NE(codes[3], 0) << report;        // ...and the workers failed.
  EXPECT_NE(codes[4], 0) << report;
  EXPECT_TRUE(Contains(ReadFile(crash_logs.File("coordinator.log")), "server 1")) << report;
  for (int s = 0; s < 2; ++s)
    EXPECT_EQ(ValidCheckpoints(ckpt.File("ckpt"), s), (std::vector<int64_t>{40, 20})) << "server " << s;
  CopyDir(ckpt.File("ckpt"), ckpt.File("damaged"));

  // Every process restarted with --resume, to 100: from clock 40.
  ClusterSpec resume = Spec(100, "resumed", out);
  AddCheckpoints(&resume, ckpt.File("ckpt"), true);
  codes = RunJob(resume, resume_logs, &report);
  ExpectAllZero(codes, report);
  EXPECT_TRUE(Contains(ReadFile(resume_logs.File("coordinator.log")), "resumes from the checkpoint of clock 40"))
      << report;
  EXPECT_TRUE(Contains(ReadFile(resume_logs.File("worker1.log")), "resuming at clock 40")) << report;
  for (int w = 0; w < 2; ++w) {
    const std::string ref = ReadFile(out.File("ref" + std::to_string(w)));
    ASSERT_EQ(ref.size(), (1000 + 2500 + 1728 + 7) * sizeof(float));
    EXPECT_TRUE(SameWeights(out, "resumed", "ref", w));
  }
  // The resumed job went on checkpointing (60, 80, 100; the newest 2 kept).
  EXPECT_EQ(ValidCheckpoints(ckpt.File("ckpt"), 0), (std::vector<int64_t>{100, 80}));

  // Server 0's newest checkpoint damaged: it warns naming the file, the job
  // resumes from clock 20 instead, and still ends bitwise equal.
  const std::string damaged = ckpt.File("damaged") + "/" + ShardFileName(40, 0);
  FlipLastByte(damaged);
  ClusterSpec fallback = Spec(100, "fallback", out);
  AddCheckpoints(&fallback, ckpt.File("damaged"), true);
  codes = RunJob(fallback, fallback_logs, &report);
  ExpectAllZero(codes, report);
  const std::string server0 = ReadFile(fallback_logs.File("server0.log"));
  EXPECT_TRUE(Contains(server0, "skipping the checkpoint of clock 40: " + damaged + " is corrupt")) << server0;
  EXPECT_TRUE(Contains(ReadFile(fallback_logs.File("coordinator.log")), "resumes from the checkpoint of clock 20"))
      << report;
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(SameWeights(out, "fallback", "ref", w));
  }
}

TEST_F(SyntheticResumeTest, ResumeWithoutACommonCheckpointFailsNamingEachServer) {
  TempDir out, ckpt, logs;
  ASSERT_TRUE(WriteCheckpoint(ckpt.path(),
                              [] {
                                ShardState s;
                                s.info.set_clock(20);
                                s.info.set_server_rank(1);
                                return s;
                              }())
                  .ok());
  ClusterSpec spec = Spec(10, "w", out);
  AddCheckpoints(&spec, ckpt.path(), true);
  std::string report;
  auto codes = RunJob(spec, logs, &report);
  for (auto code : codes) EXPECT_NE(code, 0) << report;
  EXPECT_TRUE(Contains(ReadFile(logs.File("coordinator.log")),
                       "--resume: no checkpoint is complete on every server: server 0 has none; server 1 has "
                       "clocks 20;"))
      << report;
}

TEST_F(SyntheticResumeTest, AProcessWithoutResumeIsNamed) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(10, "w", out);
  AddCheckpoints(&spec, ckpt.path(), true);
  spec.worker_flags.pop_back();  // The workers lack --resume.
  spec.worker_rank_flags.push_back({0, {"--resume"}});
  // The job fails at the first refused REGISTER; nodes that had not
  // registered yet give up after their start-up timeout.
  test::ExpectJobRefused(spec, logs, "worker 1 was started without --resume but the coordinator with it");
}

TEST_F(SyntheticResumeTest, CheckpointsUnderAsyncAreRefused) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(10, "w", out);
  spec.coordinator_flags.push_back("--consistency=async");
  AddCheckpoints(&spec, ckpt.path(), false);
  test::ExpectJobRefused(spec, logs,
                         "--checkpoint_every=20 but the job's consistency is ASYNC: checkpoints are refused there");
}

TEST_F(SyntheticResumeTest, AServerRestartedAloneRejoinsAndTheJobRollsBackBitwiseEqual) {
  TempDir out, ckpt, logs;
  RunReference(out);
  // Server 1 is killed at clock 50 of 100; the rest of the job waits for it.
  ClusterSpec spec = RejoinSpec(out, ckpt.path());
  spec.server_rank_flags.push_back({1, {"--crash_at_clock=50"}});
  LocalCluster cluster(spec, logs);
  ASSERT_EQ(cluster.server(1).WaitFor(kJobTimeout), 128 + 9) << ReadFile(logs.File("server1.log"));
  ASSERT_EQ(ValidCheckpoints(ckpt.path(), 1), (std::vector<int64_t>{40, 20}));

  // Only the dead server is restarted by hand: it rejoins, every process
  // rolls back to clock 40 and the job runs on to 100.
  auto again = RestartServer1(cluster, ckpt.path(), logs.File("server1-again.log"), {"--resume"});
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report;
  EXPECT_EQ(again->WaitFor(kJobTimeout), 0) << again->Log();
  const auto codes = cluster.codes();
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(codes[i], 0) << "process " << i << "\n" << report;
  const std::string coordinator = ReadFile(logs.File("coordinator.log"));
  EXPECT_TRUE(Contains(coordinator, "server 1 rejoined from ")) << coordinator;
  EXPECT_TRUE(Contains(coordinator, "epoch 1: the job rolled back to the checkpoint of clock 40")) << coordinator;
  EXPECT_TRUE(Contains(ReadFile(logs.File("server0.log")), "joining the job again to roll back")) << report;
  for (int w = 0; w < 2; ++w) {
    const std::string log = ReadFile(logs.File("worker" + std::to_string(w) + ".log"));
    EXPECT_TRUE(Contains(log, "the job rolls back to its newest checkpoint (epoch 1)")) << log;
    EXPECT_TRUE(Contains(log, "resuming at clock 40")) << log;
    const std::string ref = ReadFile(out.File("ref" + std::to_string(w)));
    ASSERT_EQ(ref.size(), (1000 + 2500 + 1728 + 7) * sizeof(float));
    EXPECT_TRUE(SameWeights(out, "rejoined", "ref", w));
  }
  // The rolled-back job went on checkpointing (60, 80, 100; the newest 2 kept).
  EXPECT_EQ(ValidCheckpoints(ckpt.path(), 1), (std::vector<int64_t>{100, 80}));
}

TEST_F(SyntheticResumeTest, AWorkerRestartedAloneRejoinsAndTheJobRollsBackBitwiseEqual) {
  TempDir out, ckpt, logs;
  RunReference(out);
  // 30 ms of compute per clock: worker 1 is killed some time after the
  // servers' checkpoint of clock 40 and before the end.
  ClusterSpec spec = RejoinSpec(out, ckpt.path());
  spec.worker_flags.push_back("--compute_ms=30");
  LocalCluster cluster(spec, logs);
  ASSERT_TRUE(cluster.server(0).WaitForLog("checkpoint of clock 40 written", kJobTimeout)) << cluster.server(0).Log();
  cluster.worker(1).Signal(SIGKILL);
  ASSERT_EQ(cluster.worker(1).WaitFor(kJobTimeout), 128 + 9);
  std::unique_ptr<Subprocess> again;
  ASSERT_NO_FATAL_FAILURE(
      test::ResumeAndFinish(cluster, cluster.worker_argv(1), /*worker 1=*/4, logs.File("worker1-again.log"), &again));
  const std::string coordinator = ReadFile(logs.File("coordinator.log"));
  EXPECT_TRUE(Contains(coordinator, "worker 1 rejoined from ")) << coordinator;
  EXPECT_TRUE(Contains(coordinator, "the job rolled back to the checkpoint of clock ")) << coordinator;
  EXPECT_TRUE(Contains(again->Log(), "resuming at clock ")) << again->Log();
  for (int w = 0; w < 2; ++w) {
    EXPECT_TRUE(SameWeights(out, "rejoined", "ref", w));
  }
}

TEST_F(SyntheticResumeTest, ARejoinThatCannotBeDoneIsRefusedAndTheJobGoesOn) {
  TempDir out, ckpt, logs;
  // A job that runs for several seconds; nobody dies.
  LocalCluster cluster(SlowBspSpec(out, ckpt.path(), 20000), logs);
  // Before the job starts a second server 1 would be an ordinary (refused)
  // registration: this is about one arriving while the job runs.
  ASSERT_TRUE(cluster.coordinator().WaitForLog(kJobStarted, kJobTimeout)) << cluster.coordinator().Log();

  // Without --resume: refused at once, saying what to do.
  auto no_resume = RestartServer1(cluster, ckpt.path(), logs.File("no-resume.log"));
  ExpectExitWithLog(*no_resume, 1,
                    {"coordinator refused registration: server 1 registered again without "
                     "--resume while the job runs: to rejoin, restart it with its flags and "
                     "--resume"});
  // With --resume, but server 1 is alive: it answers the coordinator's
  // probe and the duplicate is refused; the job is not rolled back, however
  // late server 1's heartbeats are (below the timeout).
  auto duplicate = RestartServer1(cluster, ckpt.path(), logs.File("duplicate.log"), {"--resume"});
  ExpectDuplicateRefused(*duplicate, {"a node rejoins only in the place of a member that is dead (silent for 20000 ms, "
                                      "--heartbeat_timeout_ms)"});

  ExpectEndsWithoutRollback(cluster, logs);
}

// Slow is not dead: server 1 stopped (SIGSTOP: no heartbeat, no answer) while
// a duplicate registers in its name is still a member; once it runs again it
// answers the coordinator's probe and the duplicate is refused, however long
// its heartbeats were late (below the timeout). Under the old rule (silent
// for two heartbeat intervals) the duplicate took its place and rolled the
// job back.
TEST_F(SyntheticResumeTest, AMemberThatIsSlowIsNotReplaced) {
  TempDir out, ckpt, logs;
  LocalCluster cluster(SlowBspSpec(out, ckpt.path(), 20000), logs);
  ASSERT_TRUE(cluster.coordinator().WaitForLog(kJobStarted, kJobTimeout)) << cluster.coordinator().Log();
  cluster.server(1).Signal(SIGSTOP);
  auto duplicate = RestartServer1(cluster, ckpt.path(), logs.File("duplicate.log"), {"--resume"});
  // The coordinator holds the duplicate and probes server 1, which cannot
  // answer while it is stopped.
  const bool probing = cluster.coordinator().WaitForLog("; probing server 1 at ", kJobTimeout);
  cluster.server(1).Signal(SIGCONT);
  ASSERT_TRUE(probing) << cluster.coordinator().Log();
  ExpectDuplicateRefused(*duplicate);
  ExpectEndsWithoutRollback(cluster, logs);
}

TEST_F(SyntheticResumeTest, ARejoinUnderAsyncIsRefusedNamingWhy) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(150, "w", out);
  spec.coordinator_flags = Concat({"--partition_bytes=1024", "--consistency=async"}, kPatientHeartbeat);
  spec.worker_flags.push_back("--compute_ms=40");
  LocalCluster cluster(spec, logs);
  ASSERT_TRUE(cluster.coordinator().WaitForLog(kJobStarted, kJobTimeout)) << cluster.coordinator().Log();
  auto again =
      Subprocess::Start({BinaryPath("nereus_server"), "--role=server", "--coordinator=" + cluster.coordinator_address(),
                         "--rank=1", "--resume", "--checkpoint_dir=" + ckpt.path(), "--startup_timeout_s=20"},
                        logs.File("server1-again.log"));
  ExpectExitWithLog(*again, 1,
                    {"server 1 cannot rejoin a running ASYNC job: rejoining rolls the job back to a "
                     "checkpoint, and under SSP and async no clock boundary gives a state to roll "
                     "back to"});
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report;
  ExpectAllZero(cluster.codes(), report);
}

}  // namespace
}  // namespace test
}  // namespace nereus

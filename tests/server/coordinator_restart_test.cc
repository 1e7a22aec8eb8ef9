// The coordinator killed (SIGKILL) in the middle of a job and restarted with
// --resume: it reads what it kept (DIR/coordinator.state), takes the job back
// (a new epoch, every node rolling back to the newest checkpoint every server
// holds), and the job ends with the same weights, byte for byte, as a job that
// was never interrupted; in plain TCP and under CURVE. Real processes on
// 127.0.0.1. Plus what is refused: a restart without --resume over the state
// of a job that has not ended, a damaged state file, a restart with another
// job shape or address, a job that cannot roll back; the nodes' side: they
// wait for a silent coordinator, saying so, and give up after
// --heartbeat_timeout_ms naming it; and SIGTERM, which ends the job rather
// than leaving it to be taken back. The state file's format is checked in
// process.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <regex>

#include "server/checkpoint.h"
#include "tests/support/process_util.h"
#include "tests/support/resume_util.h"

namespace nereus {
namespace test {
namespace {

constexpr size_t kWeightBytes = test::kSyntheticWeightBytes;
constexpr char kWaiting[] = "waiting for it up to --heartbeat_timeout_ms=";

// resume_test's synthetic job; the nodes wait 20 s for a silent coordinator.
ClusterSpec Spec(int iterations, const std::string& prefix, const TempDir& out) {
  return test::SyntheticResumeSpec(iterations, prefix, out, kPatientHeartbeat);
}

// Checkpoints every 20 clocks into `ckpt`, where the coordinator keeps its
// state too.
void AddCheckpoints(ClusterSpec* spec, const std::string& ckpt) {
  spec->coordinator_flags.push_back("--checkpoint_dir=" + ckpt);
  spec->server_flags = {"--checkpoint_dir=" + ckpt, "--checkpoint_every=20"};
}

void AddCurve(ClusterSpec* spec, const std::string& keys) {
  for (auto* flags : {&spec->coordinator_flags, &spec->server_flags, &spec->worker_flags})
    flags->push_back("--curve_dir=" + keys);
}

// Byte for byte (not float ==, which equates -0.0 and +0.0).
void ExpectSameBytes(const std::string& a, const std::string& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << what << " differs";
}

// The 100-clock reference, never interrupted, and the initial weights (a
// 0-clock job): the reference must have moved from them, or a job that does
// nothing could pass.
void RunReference(const TempDir& out, const std::string& keys) {
  TempDir logs, initial_logs;
  std::string report;
  ClusterSpec ref = Spec(100, "ref", out), initial = Spec(0, "initial", out);
  if (!keys.empty()) {
    AddCurve(&ref, keys);
    AddCurve(&initial, keys);
  }
  ExpectAllZero(RunJob(ref, logs, &report), report);
  ExpectAllZero(RunJob(initial, initial_logs, &report), report);
  for (int w = 0; w < 2; ++w) {
    const std::string ref_w = ReadFile(out.File("ref" + std::to_string(w)));
    const std::string initial_w = ReadFile(out.File("initial" + std::to_string(w)));
    ASSERT_EQ(ref_w.size(), kWeightBytes);
    ASSERT_EQ(initial_w.size(), kWeightBytes);
    EXPECT_NE(std::memcmp(ref_w.data(), initial_w.data(), kWeightBytes), 0) << "the reference did not train";
  }
}

// The clock the restarted coordinator rolled the job back to, or -1.
int64_t RolledBackTo(const std::string& log) {
  std::smatch m;
  static const std::regex re("epoch 1: the job rolled back to the checkpoint of clock (\\d+)");
  return std::regex_search(log, m, re) ? std::stoll(m[1]) : -1;
}

// A job with checkpoints whose coordinator is killed once server 0 has
// written the checkpoint of clock 40; a coordinator started over it without
// --resume is refused; the nodes wait for theirs, saying so; it is restarted
// with --resume and takes the job back, which ends byte for byte equal to
// the reference. Server 1 is stopped (SIGSTOP) once both servers hold the
// checkpoint of clock 40, until the new coordinator runs: the job cannot
// train on meanwhile, however long the restart takes on a loaded machine, so
// it rolls back to a clock before its end and computes the clocks after it
// again (the test once allowed 3 s of compute for the whole restart; what is
// left is the 60 clocks of 50 ms between the checkpoint and the stop).
void KillAndRestartCoordinator(const std::string& keys) {
  TempDir out, ckpt, logs;
  RunReference(out, keys);
  ClusterSpec spec = Spec(100, "restarted", out);
  AddCheckpoints(&spec, ckpt.path());
  spec.worker_flags.push_back("--compute_ms=50");
  if (!keys.empty()) AddCurve(&spec, keys);
  LocalCluster cluster(spec, logs);
  for (int s = 0; s < 2; ++s)
    ASSERT_TRUE(cluster.server(s).WaitForLog("checkpoint of clock 40 written", kJobTimeout)) << cluster.server(s).Log();
  cluster.server(1).Signal(SIGSTOP);
  cluster.coordinator().Signal(SIGKILL);
  ASSERT_EQ(cluster.coordinator().WaitFor(kJobTimeout), 128 + 9);

  // Without --resume: refused, naming the state file and what to do.
  auto refused = Subprocess::Start(cluster.coordinator_argv(), logs.File("coordinator-no-resume.log"));
  ExpectExitWithLog(*refused, 2,
                    {ckpt.File("coordinator.state") +
                         " holds a job that has not ended (epoch 0, "
                         "running, coordinator tcp://" +
                         cluster.coordinator_address() + ")",
                     "Restart the coordinator with --resume to take the job back, or remove the "
                     "file to start a new job"});

  // Every node that runs waits for its coordinator and says so.
  for (Subprocess* p : {&cluster.server(0), &cluster.worker(0), &cluster.worker(1)})
    ASSERT_TRUE(p->WaitForLog(kWaiting + std::to_string(20000), kJobTimeout)) << p->Log();
  std::unique_ptr<Subprocess> again;
  ASSERT_NO_FATAL_FAILURE(test::ResumeAndFinish(cluster, cluster.coordinator_argv(), /*the coordinator=*/0,
                                                logs.File("coordinator-again.log"), &again, [&](Subprocess& c) {
                                                  EXPECT_TRUE(c.WaitForLog("restarted with --resume", kJobTimeout))
                                                      << c.Log();
                                                  cluster.server(1).Signal(SIGCONT);
                                                }));

  const std::string coordinator = again->Log();
  EXPECT_TRUE(Contains(coordinator, "coordinator: restarted with --resume: taking back the job of " +
                                        ckpt.File("coordinator.state") + " (epoch 0, running; it started at clock 0"))
      << coordinator;
  const int64_t clock = RolledBackTo(coordinator);
  EXPECT_GE(clock, 40) << coordinator;
  EXPECT_LT(clock, 100) << "the job was not training any more when its coordinator came back:\n" << coordinator;
  EXPECT_TRUE(Contains(coordinator, "coordinator: every worker finished; job shut down cleanly")) << coordinator;
  for (int w = 0; w < 2; ++w) {
    const std::string log = ReadFile(logs.File("worker" + std::to_string(w) + ".log"));
    EXPECT_TRUE(Contains(log, "no heartbeat reply from the coordinator at tcp://" + cluster.coordinator_address()))
        << log;
    EXPECT_TRUE(Contains(log,
                         "the job rolls back to its newest checkpoint (epoch 1): the coordinator restarted and "
                         "takes the job back"))
        << log;
    EXPECT_TRUE(Contains(log, "resuming at clock " + std::to_string(clock))) << log;
    ExpectSameBytes(ReadFile(out.File("restarted" + std::to_string(w))), ReadFile(out.File("ref" + std::to_string(w))),
                    "worker " + std::to_string(w) + "'s final weights");
  }
  // The state says the job ended: a later coordinator may start a new job.
  auto state = ReadCoordinatorState(ckpt.path());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->ended());
  EXPECT_EQ(state->outcome(), "finished");
  EXPECT_EQ(state->epoch(), 1u);
  EXPECT_EQ(state->members_size(), 4);
}

TEST(CoordinatorRestartTest, KilledCoordinatorRestartedWithResumeTakesTheJobBackBitwiseEqual) {
  KillAndRestartCoordinator("");
}

TEST(CoordinatorRestartTest, UnderCurveToo) {
  TempDir keys_dir;
  KillAndRestartCoordinator(test::MakeCurveKeys(keys_dir, "keys", 2, 2));
}

// A coordinator killed while its job forms, so its state file exists: the
// file of a job that has not ended, in `dir`. Returns the address it had.
std::string LeaveStateOfAFormingJob(const TempDir& dir, const TempDir& logs) {
  const std::string address = "127.0.0.1:" + std::to_string(test::FreePort());
  auto c = Subprocess::Start({test::BinaryPath("nereus_server"), "--role=coordinator", "--coordinator=" + address,
                              "--num_servers=1", "--num_workers=2", "--checkpoint_dir=" + dir.path()},
                             logs.File("forming.log"));
  EXPECT_TRUE(c->WaitForLog("coordinator listening at", kJobTimeout)) << c->Log();
  c->Signal(SIGKILL);
  EXPECT_EQ(c->WaitFor(kJobTimeout), 128 + 9);
  return address;
}

// Starts a coordinator of that job (1 x 2) with `extra` flags; returns its
// exit code and log.
std::pair<std::optional<int>, std::string> Coordinator(const std::string& address, const TempDir& dir,
                                                       const TempDir& logs, const std::string& name,
                                                       std::vector<std::string> extra) {
  std::vector<std::string> argv = {test::BinaryPath("nereus_server"),
                                   "--role=coordinator",
                                   "--coordinator=" + address,
                                   "--num_servers=1",
                                   "--num_workers=2",
                                   "--checkpoint_dir=" + dir.path(),
                                   "--startup_timeout_s=1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto c = Subprocess::Start(argv, logs.File(name + ".log"));
  auto code = c->WaitFor(kJobTimeout);
  return {code, c->Log()};
}

TEST(CoordinatorRestartTest, ADamagedStateFileIsRefusedNamingIt) {
  TempDir dir, logs;
  const std::string address = LeaveStateOfAFormingJob(dir, logs);
  const std::string path = dir.File("coordinator.state");
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 20u);
  bytes[14] ^= 1;  // In the body.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--resume"}, std::vector<std::string>{}}) {
    auto [code, log] = Coordinator(address, dir, logs, "damaged", flags);
    EXPECT_EQ(code, 2) << log;
    EXPECT_TRUE(Contains(log, "cannot start: " + path +
                                  " is corrupt: its CRC-32C does not match. It holds what the "
                                  "coordinator of a job knows; if no process of that job runs "
                                  "any more, remove it"))
        << log;
  }
  bytes.resize(bytes.size() - 3);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto [code, log] = Coordinator(address, dir, logs, "truncated", {"--resume"});
  EXPECT_EQ(code, 2) << log;
  EXPECT_TRUE(Contains(log, path + " is truncated or overwritten")) << log;
}

TEST(CoordinatorRestartTest, ARestartWithAnotherShapeOrAddressIsRefused) {
  TempDir dir, logs;
  const std::string address = LeaveStateOfAFormingJob(dir, logs);
  const std::string path = dir.File("coordinator.state");
  {
    auto [code, log] = Coordinator(address, dir, logs, "shape", {"--resume", "--num_workers=3"});
    EXPECT_EQ(code, 2) << log;
    EXPECT_TRUE(Contains(log, "cannot take the job back: --num_workers=3 but the job in " + path +
                                  " has 2; restart the coordinator with the job's flags"))
        << log;
  }
  {
    const std::string elsewhere = "127.0.0.1:" + std::to_string(test::FreePort());
    auto [code, log] = Coordinator(elsewhere, dir, logs, "address", {"--resume"});
    EXPECT_EQ(code, 2) << log;
    EXPECT_TRUE(Contains(log, "cannot take the job back: its coordinator listened at tcp://" + address)) << log;
  }
  // At its address with --resume, the forming job forms again: here its
  // nodes never come, so start-up times out naming them, and the state then
  // says the job ended, so a coordinator without --resume may start anew.
  {
    auto [code, log] = Coordinator(address, dir, logs, "forming", {"--resume"});
    EXPECT_EQ(code, 1) << log;
    EXPECT_TRUE(Contains(log, "restarted with --resume while the job of " + path + " was forming")) << log;
    EXPECT_TRUE(Contains(log,
                         "start-up timed out after 1 s (--startup_timeout_s): missing server 0, worker 0, "
                         "worker 1"))
        << log;
  }
  auto [code, log] = Coordinator(address, dir, logs, "new", {});
  EXPECT_EQ(code, 1) << log;
  EXPECT_TRUE(Contains(log, "the job " + path + " describes ended (start-up timed out")) << log;
}

// A running job whose servers write no checkpoints cannot be taken back: the
// restarted coordinator says why and exits; the nodes, which waited for it,
// give up after --heartbeat_timeout_ms naming it.
TEST(CoordinatorRestartTest, AJobWithoutCheckpointsCannotBeTakenBackAndItsNodesGiveUp) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(100000, "w", out);
  spec.coordinator_flags = {"--partition_bytes=1024", "--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=3000",
                            "--checkpoint_dir=" + ckpt.path()};
  spec.worker_flags.push_back("--compute_ms=20");
  LocalCluster cluster(spec, logs);
  // Every node holds the address book (a node still waiting for it when its
  // coordinator dies waits out --startup_timeout_s instead).
  for (Subprocess* p : {&cluster.server(0), &cluster.server(1), &cluster.worker(0), &cluster.worker(1)})
    ASSERT_TRUE(p->WaitForLog("joined the job", kJobTimeout)) << p->Log();
  cluster.coordinator().Signal(SIGKILL);
  ASSERT_EQ(cluster.coordinator().WaitFor(kJobTimeout), 128 + 9);
  std::vector<std::string> argv = cluster.coordinator_argv();
  argv.push_back("--resume");
  auto again = Subprocess::Start(argv, logs.File("coordinator-again.log"));
  ExpectExitWithLog(
      *again, 2,
      {"cannot take the job back: " + ckpt.File("coordinator.state") +
       " holds a job that has not ended (epoch 0, running, coordinator tcp://" + cluster.coordinator_address() +
       "): its servers write no checkpoints (--checkpoint_every), so there is no "
       "state to roll the job back to"});
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report;
  const auto codes = cluster.codes();
  for (int i : {1, 2, 3, 4}) EXPECT_EQ(codes[i], 1) << "process " << i << "\n" << report;
  for (const char* name : {"server0", "worker1"}) {
    const std::string log = ReadFile(logs.File(std::string(name) + ".log"));
    const size_t waiting = log.find(std::string(kWaiting) + "3000");
    const size_t lost = log.find("lost contact with the coordinator at tcp://" + cluster.coordinator_address());
    EXPECT_NE(waiting, std::string::npos) << log;
    EXPECT_NE(lost, std::string::npos) << log;
    EXPECT_LT(waiting, lost) << log;
  }
}

// SIGTERM (launch.sh stopping a job, scancel) is the operator ending the job,
// not a crash: the coordinator sends ABORT naming it, every node exits at
// once, and the state says the job ended, so that a new job may start there.
TEST(CoordinatorRestartTest, SigtermEndsTheJobAndLeavesNothingToTakeBack) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(100000, "w", out);
  AddCheckpoints(&spec, ckpt.path());
  spec.worker_flags.push_back("--compute_ms=20");
  LocalCluster cluster(spec, logs);
  for (Subprocess* p : {&cluster.server(0), &cluster.server(1), &cluster.worker(0), &cluster.worker(1)})
    ASSERT_TRUE(p->WaitForLog("joined the job", kJobTimeout)) << p->Log();
  cluster.coordinator().Signal(SIGTERM);
  std::string report;
  // Far within the nodes' 20 s heartbeat timeout: they were told.
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(15), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 1) << report;
  for (const char* name : {"coordinator", "server1", "worker0"}) {
    const std::string log = ReadFile(logs.File(std::string(name) + ".log"));
    EXPECT_TRUE(Contains(log, "job aborted: the coordinator was stopped by SIGTERM")) << log;
  }
  auto state = ReadCoordinatorState(ckpt.path());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->ended());
  EXPECT_EQ(state->outcome(), "the coordinator was stopped by SIGTERM");
}

// --- The state file, in process --------------------------------------------

TEST(CoordinatorStateFile, RoundTripsAndRefusesDamage) {
  TempDir dir;
  EXPECT_EQ(ReadCoordinatorState(dir.path()).status().code(), StatusCode::kNotFound);
  pb::CoordinatorState s;
  s.set_coordinator("tcp://127.0.0.1:7000");
  s.mutable_job()->set_num_servers(2);
  s.mutable_job()->set_checkpoint_every(20);
  s.set_epoch(3);
  s.set_started(true);
  pb::NodeInfo* n = s.add_members();
  n->set_role(pb::SERVER);
  n->set_rank(1);
  n->set_endpoint("tcp://127.0.0.1:40001");
  n->add_checkpoint_clocks(40);
  n->add_checkpoint_clocks(20);
  ASSERT_TRUE(WriteCoordinatorState(dir.path(), s).ok());
  auto read = ReadCoordinatorState(dir.path());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->SerializeAsString(), s.SerializeAsString());

  const std::string path = CoordinatorStatePath(dir.path());
  const std::string good = ReadFile(path);
  auto damaged = [&](const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    auto r = ReadCoordinatorState(dir.path());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    return r.status().message();
  };
  EXPECT_EQ(damaged("NRCOORD"), path + " is truncated (7 bytes)");
  EXPECT_EQ(damaged("XRCOORD1" + good.substr(8)), path + " is not a Nereus coordinator state (bad magic)");
  std::string flipped = good;
  flipped[flipped.size() - 1] ^= 0x40;  // The CRC itself.
  EXPECT_EQ(damaged(flipped), path + " is corrupt: its CRC-32C does not match");
  EXPECT_EQ(damaged(good + "x"), path + " is truncated or overwritten: its body should be " +
                                     std::to_string(good.size() - 16) + " bytes, the file holds " +
                                     std::to_string(good.size() - 15));
}

}  // namespace
}  // namespace test
}  // namespace nereus

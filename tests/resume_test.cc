// Whole jobs as real processes on 127.0.0.1, killed and resumed from the
// servers' checkpoints: the resumed job ends with the same weights, bit for
// bit, as a job that was never interrupted. Plus the refusals (no common
// checkpoint, a process without --resume, a server restarted alone,
// checkpoints under async).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "server/checkpoint.h"
#include "tests/process_util.h"
#include "tests/train_test_util.h"
#include "worker/trainer/data/db.h"

namespace nereus {
namespace {

using testing::BinaryPath;
using testing::ClusterSpec;
using testing::LocalCluster;
using testing::ReadFile;
using testing::ReadWeights;
using testing::Subprocess;
using testing::TempDir;

constexpr auto kJobTimeout = std::chrono::seconds(60);
// Short heartbeats: the killed server is declared dead within a second.
const std::vector<std::string> kFastHeartbeat = {"--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=1500"};

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs the job to its end; returns the exit codes (coordinator, servers,
// workers) and the logs in `report`.
std::vector<std::optional<int>> RunJob(const ClusterSpec& spec, const TempDir& logs, std::string* report) {
  LocalCluster cluster(spec, logs);
  EXPECT_TRUE(cluster.WaitAll(kJobTimeout, report)) << *report;
  return cluster.codes();
}

void ExpectAllZero(const std::vector<std::optional<int>>& codes, const std::string& report) {
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "process " << i << "\n" << report;
}

void CopyDir(const std::string& from, const std::string& to) {
  ASSERT_EQ(std::system(("cp -r '" + from + "' '" + to + "'").c_str()), 0);
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

bool Contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// --- Synthetic model ------------------------------------------------------

class SyntheticResumeTest : public ::testing::Test {
 protected:
  // 2 servers x 2 workers, chunks spread over both servers.
  ClusterSpec Spec(int iterations, const std::string& weights_prefix, const TempDir& out) {
    ClusterSpec spec;
    spec.servers = 2;
    spec.workers = 2;
    spec.coordinator_flags = Concat({"--partition_bytes=1024", "--consistency=bsp"}, kFastHeartbeat);
    spec.worker_flags = {"--tensors=1000,250x10,64x3x3x3,7", "--iterations=" + std::to_string(iterations),
                         "--seed=3", "--lr_policy=inv", "--base_lr=0.05", "--gamma=0.001", "--power=0.75",
                         "--momentum=0.9", "--weight_decay=0.001", "--display=0"};
    for (int w = 0; w < 2; ++w)
      spec.worker_rank_flags.push_back({w, {"--weights_out=" + out.File(weights_prefix + std::to_string(w))}});
    return spec;
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

  // Checkpoints every 20 clocks; server 1 is killed (SIGKILL) at clock 50 of
  // a job meant to run to 60: every process stops, the job is lost.
  ClusterSpec crash = Spec(60, "crash", out);
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
    EXPECT_TRUE(ReadFile(out.File("resumed" + std::to_string(w))) == ref) << "worker " << w << " differs";
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
    EXPECT_TRUE(ReadFile(out.File("fallback" + std::to_string(w))) == ReadFile(out.File("ref" + std::to_string(w))))
        << "worker " << w << " differs";
  }
}

TEST_F(SyntheticResumeTest, ResumeWithoutACommonCheckpointFailsNamingEachServer) {
  TempDir out, ckpt, logs;
  ASSERT_TRUE(WriteCheckpoint(ckpt.path(), [] {
                ShardState s;
                s.info.set_clock(20);
                s.info.set_server_rank(1);
                return s;
              }()).ok());
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
  // The job fails at the first refused REGISTER; nodes that had not
  // registered yet give up after their start-up timeout.
  spec.worker_flags.push_back("--startup_timeout_s=5");
  spec.server_flags.push_back("--startup_timeout_s=5");
  spec.worker_rank_flags.push_back({0, {"--resume"}});
  std::string report;
  auto codes = RunJob(spec, logs, &report);
  EXPECT_NE(codes[0], 0) << report;
  EXPECT_TRUE(Contains(ReadFile(logs.File("coordinator.log")),
                       "worker 1 was started without --resume but the coordinator with it"))
      << report;
}

TEST_F(SyntheticResumeTest, CheckpointsUnderAsyncAreRefused) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(10, "w", out);
  spec.coordinator_flags.push_back("--consistency=async");
  AddCheckpoints(&spec, ckpt.path(), false);
  spec.worker_flags.push_back("--startup_timeout_s=5");
  spec.server_flags.push_back("--startup_timeout_s=5");
  std::string report;
  auto codes = RunJob(spec, logs, &report);
  EXPECT_NE(codes[0], 0) << report;
  EXPECT_TRUE(Contains(ReadFile(logs.File("coordinator.log")),
                       "--checkpoint_every=20 but the job's consistency is ASYNC: checkpoints are refused there"))
      << report;
}

TEST_F(SyntheticResumeTest, AServerRestartedAloneIsRefusedWithWhatToDo) {
  TempDir out, ckpt, logs;
  ClusterSpec spec = Spec(1000, "w", out);
  // The job waits 8 s for the dead server: time for its replacement to come.
  spec.coordinator_flags = {"--partition_bytes=1024", "--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=8000"};
  AddCheckpoints(&spec, ckpt.path(), false);
  spec.server_rank_flags.push_back({1, {"--crash_at_clock=25"}});
  LocalCluster cluster(spec, logs);
  EXPECT_EQ(cluster.server(1).WaitFor(kJobTimeout), 128 + 9) << ReadFile(logs.File("server1.log"));
  ASSERT_EQ(ValidCheckpoints(ckpt.path(), 1), std::vector<int64_t>{20});
  auto again = Subprocess::Start({BinaryPath("nereus_server"), "--role=server",
                                  "--coordinator=" + cluster.coordinator_address(), "--rank=1", "--resume",
                                  "--checkpoint_dir=" + ckpt.path(), "--startup_timeout_s=20"},
                                 logs.File("server1-again.log"));
  // Refused at once, naming what to do instead; it exits with that error.
  EXPECT_EQ(again->WaitFor(std::chrono::seconds(20)), 1) << again->Log();
  EXPECT_TRUE(Contains(again->Log(), "coordinator refused registration: server 1 registered again from "))
      << again->Log();
  EXPECT_TRUE(Contains(again->Log(), "a restarted server cannot rejoin a running job")) << again->Log();
  EXPECT_TRUE(Contains(again->Log(), "restart every process of the job with --resume")) << again->Log();
  // The job then ends as it would have without the replacement: the dead
  // server is named once its heartbeats are overdue.
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report;
  const std::string coordinator = ReadFile(logs.File("coordinator.log"));
  EXPECT_TRUE(Contains(coordinator, "refused: server 1 registered again from")) << coordinator;
  EXPECT_TRUE(Contains(coordinator, "server 1 (")) << coordinator;
  EXPECT_TRUE(Contains(coordinator, "is dead: no heartbeat")) << coordinator;
  for (int w = 0; w < 2; ++w) EXPECT_NE(cluster.codes()[3 + w], 0) << report;
}

// --- LeNet through the trainer ---------------------------------------------

constexpr int kRecords = 192;

// kRecords 28x28 random images with labels 0..9.
void WriteRandomMnist(const std::string& path) {
  auto db = data::LmdbDatabase::Open(path, data::DbMode::kNew);
  ASSERT_TRUE(db.ok()) << db.status();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pixel(0, 255);
  std::vector<std::pair<std::string, std::string>> records;
  for (int r = 0; r < kRecords; ++r) {
    std::string bytes(28 * 28, '\0');
    for (char& b : bytes) b = static_cast<char>(pixel(rng));
    caffe::Datum datum;
    datum.set_channels(1);
    datum.set_height(28);
    datum.set_width(28);
    datum.set_data(bytes);
    datum.set_label(r % 10);
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", r);
    records.emplace_back(key, datum.SerializeAsString());
  }
  ASSERT_TRUE((*db)->PutBatch(records).ok());
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

TEST(LenetResumeTest, KilledServerThenWholeJobResumedEndsBitwiseEqual) {
  TempDir dir, ckpt, ref_logs, crash_logs, resume_logs;
  const char* source = std::getenv("NEREUS_SOURCE_DIR");
  ASSERT_NE(source, nullptr);
  WriteRandomMnist(dir.File("lmdb"));
  std::string net = ReadFile(std::string(source) + "/worker/trainer/models/lenet_train_test.prototxt");
  ASSERT_FALSE(net.empty());
  net = Replace(net, "data/mnist/mnist_train_lmdb", dir.File("lmdb"));
  net = Replace(net, "data/mnist/mnist_test_lmdb", dir.File("lmdb"));
  net = Replace(net, "batch_size: 64", "batch_size: 8");
  std::ofstream(dir.File("lenet.prototxt")) << net;
  for (int max_iter : {60, 100}) {
    // The interrupted job's worker 0 also writes Caffe snapshots every 20
    // iterations (in a job: the iteration and the weights, not the history).
    std::ofstream(dir.File("solver" + std::to_string(max_iter) + ".prototxt"))
        << "net: \"" << dir.File("lenet.prototxt") << "\"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\n"
        << "lr_policy: \"inv\"\ngamma: 0.0001\npower: 0.75\ndisplay: 20\nmax_iter: " << max_iter
        << "\nrandom_seed: 5\nsnapshot_after_train: false\nsolver_mode: CPU\n"
        << (max_iter == 60 ? "snapshot: 20\nsnapshot_prefix: \"" + dir.File("lenet") + "\"\n" : "");
  }
  auto spec = [&](int max_iter, const std::string& weights) {
    ClusterSpec s;
    s.servers = 2;
    s.workers = 2;
    s.coordinator_flags = Concat({"--partition_bytes=65536"}, kFastHeartbeat);
    s.worker_flags = {"--solver=" + dir.File("solver" + std::to_string(max_iter) + ".prototxt")};
    s.worker_rank_flags.push_back({0, {"--weights_out=" + dir.File(weights)}});
    return s;
  };
  std::string report;
  // The uninterrupted run checkpoints too (into its own directory): a job
  // whose servers checkpoint keeps every tensor on the servers (--sfb=auto
  // would otherwise send ip1/ip2 as sufficient factors, which rounds
  // differently).
  TempDir ref_ckpt;
  ClusterSpec ref_job = spec(100, "ref.caffemodel");
  ref_job.server_flags = {"--checkpoint_dir=" + ref_ckpt.path(), "--checkpoint_every=20"};
  auto codes = RunJob(ref_job, ref_logs, &report);
  ExpectAllZero(codes, report);
  EXPECT_TRUE(Contains(ReadFile(ref_logs.File("worker0.log")),
                       "servers checkpoint: every tensor goes through the servers (--sfb=off)"));

  ClusterSpec crash = spec(60, "crash.caffemodel");
  crash.server_flags = {"--checkpoint_dir=" + ckpt.path(), "--checkpoint_every=20"};
  crash.server_rank_flags.push_back({1, {"--crash_at_clock=50"}});
  codes = RunJob(crash, crash_logs, &report);
  EXPECT_EQ(codes[2], 128 + 9) << report;
  for (int s = 0; s < 2; ++s) EXPECT_EQ(ValidCheckpoints(ckpt.path(), s), (std::vector<int64_t>{40, 20}));

  // The distributed snapshot: worker 0's .solverstate of iteration 40 plus
  // the servers' checkpoint of clock 40.
  ClusterSpec resume = spec(100, "resumed.caffemodel");
  resume.server_flags = {"--checkpoint_dir=" + ckpt.path(), "--checkpoint_every=20", "--resume"};
  resume.coordinator_flags.push_back("--resume");
  resume.worker_flags.push_back("--resume");
  resume.worker_rank_flags.push_back({0, {"--snapshot=" + dir.File("lenet_iter_40.solverstate")}});
  codes = RunJob(resume, resume_logs, &report);
  ExpectAllZero(codes, report);
  const std::string w1 = ReadFile(resume_logs.File("worker1.log"));
  EXPECT_TRUE(Contains(w1, "resuming after 40 batches; skipping 32 records of its shard")) << w1;
  const auto ref = ReadWeights(dir.File("ref.caffemodel"));
  const auto resumed = ReadWeights(dir.File("resumed.caffemodel"));
  ASSERT_EQ(ref.size(), 8u);  // conv1, conv2, ip1, ip2: weights and biases.
  EXPECT_TRUE(ref == resumed) << "largest difference " << testing::MaxAbsDiff(ref, resumed);

  // A snapshot of another iteration than the servers' checkpoint is refused,
  // naming both (the servers now hold clocks 100 and 80).
  TempDir mismatch_logs;
  ClusterSpec mismatch = spec(100, "mismatch.caffemodel");
  mismatch.server_flags = resume.server_flags;
  mismatch.coordinator_flags.push_back("--resume");
  mismatch.worker_flags.push_back("--resume");
  mismatch.worker_rank_flags.push_back({0, {"--snapshot=" + dir.File("lenet_iter_20.solverstate")}});
  codes = RunJob(mismatch, mismatch_logs, &report);
  EXPECT_NE(codes[3], 0) << report;
  const std::string w0 = ReadFile(mismatch_logs.File("worker0.log"));
  EXPECT_TRUE(Contains(w0, "lenet_iter_20.solverstate is at iteration 20 but the servers resumed from their "
                           "checkpoint of clock 100"))
      << w0;
}

}  // namespace
}  // namespace nereus

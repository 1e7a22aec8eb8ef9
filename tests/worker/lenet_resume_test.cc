// LeNet through the trainer, as real processes on 127.0.0.1: a job killed
// and resumed from the servers' checkpoints (with worker 0's Caffe snapshot:
// a distributed snapshot), a dead server restarted alone that rejoins, and a
// killed coordinator restarted with --resume that takes the job back; all end
// with the same weights, bit for bit, as an uninterrupted job.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "server/checkpoint.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/process_util.h"
#include "tests/support/resume_util.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace test {
namespace {

// --- LeNet through the trainer ---------------------------------------------

constexpr int kRecords = 192;

// kRecords 28x28 random images with labels 0..9.
void WriteRandomMnist(const std::string& path) { test::WriteRandomImageLmdb(path, kRecords, 1, 28, 10, 11); }

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
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
  // A job where nobody dies, unless `heartbeat` is kCrashHeartbeat.
  auto spec = [&](int max_iter, const std::string& weights,
                  const std::vector<std::string>& heartbeat = kPatientHeartbeat) {
    ClusterSpec s;
    s.servers = 2;
    s.workers = 2;
    s.coordinator_flags = Concat({"--partition_bytes=65536"}, heartbeat);
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

  ClusterSpec crash = spec(60, "crash.caffemodel", kCrashHeartbeat);
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
  EXPECT_TRUE(test::BytesEqual(ref, resumed));
  // A run that did nothing would also compare equal: the weights moved since
  // iteration 20 (worker 0's snapshot of the interrupted job).
  const auto early = ReadWeights(dir.File("lenet_iter_20.caffemodel"));
  EXPECT_GT(test::MaxAbsDiff(ref, early), 1e-3) << "training barely moved the weights";

  // A snapshot of another iteration than the servers' checkpoint is refused,
  // naming both (the servers now hold clocks 100 and 80).
  TempDir mismatch_logs;
  // Worker 0 fails, and tells the job so.
  ClusterSpec mismatch = spec(100, "mismatch.caffemodel");
  mismatch.server_flags = resume.server_flags;
  mismatch.coordinator_flags.push_back("--resume");
  mismatch.worker_flags.push_back("--resume");
  mismatch.worker_rank_flags.push_back({0, {"--snapshot=" + dir.File("lenet_iter_20.solverstate")}});
  codes = RunJob(mismatch, mismatch_logs, &report);
  EXPECT_NE(codes[3], 0) << report;
  const std::string w0 = ReadFile(mismatch_logs.File("worker0.log"));
  EXPECT_TRUE(Contains(w0,
                       "lenet_iter_20.solverstate is at iteration 20 but the servers resumed from their "
                       "checkpoint of clock 100"))
      << w0;
  // The others heard why at once (the job waits 20 s for a silent node).
  const std::string w1_mismatch = ReadFile(mismatch_logs.File("worker1.log"));
  EXPECT_TRUE(Contains(w1_mismatch, ") failed: ")) << w1_mismatch;
  EXPECT_TRUE(Contains(w1_mismatch, "lenet_iter_20.solverstate is at iteration 20")) << w1_mismatch;

  // Only the dead server restarted by hand: it rejoins, both trainers roll
  // back to iteration 40 (their Data layers skip back to the record of batch
  // 40) and the job ends bitwise equal to the uninterrupted one.
  TempDir rejoin_ckpt, rejoin_logs;
  ClusterSpec rejoin = spec(100, "rejoined.caffemodel");
  rejoin.coordinator_flags = Concat({"--partition_bytes=65536"}, kPatientHeartbeat);
  rejoin.server_flags = {"--checkpoint_dir=" + rejoin_ckpt.path(), "--checkpoint_every=20"};
  rejoin.server_rank_flags.push_back({1, {"--crash_at_clock=50"}});
  LocalCluster cluster(rejoin, rejoin_logs);
  ASSERT_EQ(cluster.server(1).WaitFor(kJobTimeout), 128 + 9) << ReadFile(rejoin_logs.File("server1.log"));
  auto again = RestartServer1(cluster, rejoin_ckpt.path(), rejoin_logs.File("server1-again.log"), {"--resume"});
  ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report;
  EXPECT_EQ(again->WaitFor(kJobTimeout), 0) << again->Log();
  codes = cluster.codes();
  for (int i : {0, 1, 3, 4}) EXPECT_EQ(codes[i], 0) << "process " << i << "\n" << report;
  const std::string rejoined_w1 = ReadFile(rejoin_logs.File("worker1.log"));
  EXPECT_TRUE(Contains(rejoined_w1, "resuming after 40 batches; skipping 32 records of its shard")) << rejoined_w1;
  const auto rejoined = ReadWeights(dir.File("rejoined.caffemodel"));
  EXPECT_TRUE(test::BytesEqual(ref, rejoined));

  // The coordinator killed (SIGKILL) once server 0 has written the
  // checkpoint of clock 40, and restarted at once with --resume: it takes
  // the job back from its state file, both trainers roll back, and the job
  // ends with the same .caffemodel, byte for byte, as the uninterrupted one.
  TempDir restart_ckpt, restart_logs;
  ClusterSpec restart = spec(100, "restarted.caffemodel");
  restart.coordinator_flags =
      Concat({"--partition_bytes=65536", "--checkpoint_dir=" + restart_ckpt.path()}, kPatientHeartbeat);
  restart.server_flags = {"--checkpoint_dir=" + restart_ckpt.path(), "--checkpoint_every=20"};
  LocalCluster restarted(restart, restart_logs);
  ASSERT_TRUE(restarted.server(0).WaitForLog("checkpoint of clock 40 written", kJobTimeout))
      << restarted.server(0).Log();
  restarted.coordinator().Signal(SIGKILL);
  ASSERT_EQ(restarted.coordinator().WaitFor(kJobTimeout), 128 + 9);
  std::unique_ptr<Subprocess> coordinator;
  ASSERT_NO_FATAL_FAILURE(ResumeAndFinish(restarted, restarted.coordinator_argv(), /*the coordinator=*/0,
                                          restart_logs.File("coordinator-again.log"), &coordinator));
  EXPECT_TRUE(Contains(coordinator->Log(), "epoch 1: the job rolled back to the checkpoint of clock "))
      << coordinator->Log();
  const std::string ref_bytes = ReadFile(dir.File("ref.caffemodel"));
  ASSERT_FALSE(ref_bytes.empty());
  EXPECT_TRUE(ReadFile(dir.File("restarted.caffemodel")) == ref_bytes)
      << "largest difference " << test::MaxAbsDiff(ref, ReadWeights(dir.File("restarted.caffemodel")));
}

}  // namespace
}  // namespace test
}  // namespace nereus

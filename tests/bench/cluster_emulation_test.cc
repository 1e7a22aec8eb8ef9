// nereus_bench cluster on 2 emulated hosts: it finishes, leaves no namespace
// and no process behind (also when interrupted), and the simulator predicts
// its iteration time within a stated bound. Exits 77 (ctest: skipped) where
// namespaces cannot be made.
#include <dirent.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "bench/harness/emulated_worker.h"
#include "bench/harness/netns.h"
#include "bench/sim/models.h"
#include "bench/sim/simulator.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"

namespace nereus {
namespace {

// ResNet-50 shrunk 64 times on 2 hosts, link-bound: every iteration each
// host's uplink carries its worker's pushes to the other server and its
// server's replies to the other worker, 1.48 MB (the simulator's count, the
// factors of fc1000, sent as such on 2 hosts, included), at 20 Mbit/s
// (2.39 MB/s of payload after TCP/IP and Ethernet headers): 0.62 s, while
// the compute (at 390 GFLOP/s) is 0.03 s. So the iteration is what the
// communication model makes of the bytes, the placement, the shared uplink,
// the priorities and the credit, and a wrong one shows: forgetting that a
// host's uplink carries both its pushes and its server's replies would
// predict half the time (-50%), ignoring the header overhead -4.3%.
const double kScale = 64, kGflops = 390, kMbit = 20;
// What the model leaves out here: per-message costs (about 120 messages an
// iteration each way, tens of microseconds each on this virtual machine, a
// percent or so of 0.62 s) and 4 processes sharing 2 cores with whatever
// else runs. Four runs through ctest on the shared 2-core development
// machine (load average 10-13 from other work): -0.7%, -0.6%, -0.5%, +0.4%
// (at twice the rate, where those costs weigh twice as much, one-off runs
// gave -5% to -17%: why the rate is this low). The bound, 6%, is eight
// times the largest of those errors and an eighth of the error of the model
// above that forgets the replies.
const double kBound = 0.06;

std::vector<std::string> ClusterArgs(const test::TempDir& dir, int iterations) {
  return {test::BinaryPath("nereus_bench"),
          "cluster",
          "--hosts=2",
          "--model=resnet50",
          "--model_scale=" + std::to_string(kScale),
          "--device_gflops=" + std::to_string(kGflops),
          "--link_mbit=" + std::to_string(kMbit),
          "--schedule=full",
          "--warmup=3",
          "--iterations=" + std::to_string(iterations),
          "--json=" + dir.File("result.json"),
          "--cluster_logs=" + dir.path(),
          "--timeout_s=60"};
}

// Namespaces whose name starts with `prefix`.
std::vector<std::string> Namespaces(const std::string& prefix) {
  std::string out;
  bench::RunCommand({"ip", "netns", "list"}, &out);
  std::vector<std::string> found;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line))
    if (line.compare(0, prefix.size(), prefix) == 0) found.push_back(line);
  return found;
}

// Processes whose command line mentions `needle`.
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  DIR* proc = opendir("/proc");
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  closedir(proc);
  return n;
}

// Files made in a directory, seen through inotify (no polling).
class FileWatch {
 public:
  explicit FileWatch(const std::string& dir) : fd_(inotify_init1(IN_CLOEXEC)) {
    CHECK_GE(fd_, 0) << "inotify_init1";
    CHECK_GE(inotify_add_watch(fd_, dir.c_str(), IN_CREATE | IN_MODIFY), 0) << "inotify_add_watch " << dir;
  }
  ~FileWatch() { close(fd_); }
  // Whether `name` was made (since the watch began) within 30 s.
  bool WaitForCreated(const std::string& name) {
    return WaitFor([&](const inotify_event& e) { return (e.mask & IN_CREATE) && name == e.name; });
  }
  // Whether the file `path` (in the watched directory) holds `text` within 30 s.
  bool WaitForText(const std::string& path, const std::string& text) {
    auto holds = [&] { return test::ReadFile(path).find(text) != std::string::npos; };
    return holds() || WaitFor([&](const inotify_event&) { return holds(); });
  }

 private:
  template <typename Done>
  bool WaitFor(Done done) {
    while (true) {
      pollfd pfd{fd_, POLLIN, 0};
      if (poll(&pfd, 1, 30000) <= 0) return false;
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof(buf));
      for (ssize_t i = 0; i < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf + i);
        if (e->len > 0 && done(*e)) return true;
        i += sizeof(inotify_event) + e->len;
      }
    }
  }

  const int fd_;
};

TEST(ClusterEmulationTest, RunsCleansUpAndMatchesTheSimulator) {
  test::TempDir dir;
  auto p = test::Subprocess::Start(ClusterArgs(dir, 3), dir.File("cluster.log"));
  const std::string prefix = "nrc" + std::to_string(p->pid()) + "_";
  auto code = p->WaitFor(std::chrono::seconds(90));
  if (code == 77) GTEST_SKIP() << "network namespaces unavailable here: " << p->Log();
  ASSERT_EQ(code, 0) << p->Log();
  EXPECT_TRUE(Namespaces(prefix).empty()) << "namespaces left behind";
  EXPECT_EQ(ProcessesMentioning("--cluster_result=" + dir.path()), 0) << "worker processes left behind";
  const std::string json = test::ReadFile(dir.File("result.json"));
  const double measured = test::JsonNumber(json, "iteration_s");
  ASSERT_GT(measured, 0) << json;
  // The simulator gets the compute the workers really did: each of their
  // sleeps overshoots on a loaded machine.
  const double overshoot = test::JsonNumber(json, "measured_compute_s") - test::JsonNumber(json, "compute_s");
  ASSERT_GT(overshoot, -0.01) << json;

  auto model = bench::Shrink(bench::ModelByName("resnet50").value(), kScale);
  bench::EmulatedRun run;
  run.device_gflops = kGflops;
  std::vector<double> fwd, bwd;
  bench::LayerTimes(model, run, &fwd, &bwd);
  for (size_t l = 0; l < fwd.size(); ++l) {
    fwd[l] += std::max(0.0, overshoot) / (2 * fwd.size());
    bwd[l] += std::max(0.0, overshoot) / (2 * fwd.size());
  }
  bench::SimOptions o;
  o.hosts = 2;
  o.schedule = Schedule::kFull;
  o.link_bytes_per_s = bench::PayloadBytesPerSecond(kMbit);
  o.partition_bytes = (1 << 20) / kScale;
  o.credit_bytes = (2 << 20) / kScale;
  o.sfb_flops_per_s = 1e9;  // The client's GEMM on this CPU, roughly: 0.5 ms for fc1000's 0.5 MFLOP.
  // The run rebuilds on this CPU (--sfb_rebuild=cpu): a real GEMM over the factors sent.
  auto layers = bench::SimLayersOf(model, fwd, bwd, 2, SfbMode::kAuto, run.batch, bench::HybCommRatesOf(o), nullptr,
                                   bench::RebuildCharge::kFactorsSent)
                    .value();
  auto predicted = bench::Simulate(layers, o).value();
#ifndef NEREUS_SANITIZED_BUILD
  // Link-bound, as designed: most of the iteration is waiting.
  EXPECT_GT(test::JsonNumber(json, "wait_s"), 0.8 * measured) << json;
  EXPECT_LT(std::abs(predicted.iteration_s - measured) / measured, kBound)
      << "predicted " << predicted.iteration_s << " s, measured " << measured << " s";
#endif  // Under a sanitizer the client's own CPU time is several times larger: the run and its cleanup are checked, not
        // the timing.
  std::printf("2 hosts, link-bound: measured %.4f s, predicted %.4f s (%+.1f%%)\n", measured, predicted.iteration_s,
              100 * (predicted.iteration_s - measured) / measured);
}

// SIGINT once every process has started: exit status 130, nothing left.
TEST(ClusterEmulationTest, InterruptedRunCleansUp) {
  test::TempDir dir;
  FileWatch watch(dir.path());
  auto p = test::Subprocess::Start(ClusterArgs(dir, 1000), dir.File("cluster.log"));
  const std::string prefix = "nrc" + std::to_string(p->pid()) + "_";
  // The last log file made is worker 1's: by then every namespace is up and
  // every process started.
  if (!watch.WaitForCreated("worker1.log")) {
    auto code = p->WaitFor(std::chrono::seconds(10));
    if (code == 77) GTEST_SKIP() << "network namespaces unavailable here: " << p->Log();
    FAIL() << "the cluster never started its workers: " << p->Log();
  }
  EXPECT_EQ(Namespaces(prefix).size(), 3u) << "2 hosts and the switch";
  p->Signal(SIGINT);
  auto code = p->WaitFor(std::chrono::seconds(30));
  EXPECT_EQ(code, 130) << p->Log();
  EXPECT_NE(p->Log().find("stopping every process and removing the namespaces"), std::string::npos) << p->Log();
  EXPECT_TRUE(Namespaces(prefix).empty()) << "namespaces left behind";
  EXPECT_EQ(ProcessesMentioning("--cluster_result=" + dir.path()), 0) << "worker processes left behind";
}

// --host_command: another system's command on every host, each in its own
// namespace with its own address on the shaped link; host 0's output comes
// back on stdout; nothing is left behind.
TEST(ClusterEmulationTest, AHostCommandRunsOnEveryHostAtItsOwnAddress) {
  test::TempDir dir;
  auto p = test::Subprocess::Start(
      {test::BinaryPath("nereus_bench"), "cluster", "--hosts=3", "--link_mbit=100", "--timeout_s=60",
       "--cluster_logs=" + dir.path(),
       "--host_command=echo \"host $NEREUS_BENCH_HOST of $NEREUS_BENCH_HOSTS: $NEREUS_BENCH_ADDRESSES\"; "
       "ip -4 -o addr show dev eth0"},
      dir.File("cluster.log"));
  const std::string prefix = "nrc" + std::to_string(p->pid()) + "_";
  auto code = p->WaitFor(std::chrono::seconds(60));
  if (code == 77) GTEST_SKIP() << "network namespaces unavailable here: " << p->Log();
  ASSERT_EQ(code, 0) << p->Log();
  EXPECT_TRUE(Namespaces(prefix).empty()) << "namespaces left behind";
  for (int h = 0; h < 3; ++h) {
    const std::string log = test::ReadFile(dir.File("host" + std::to_string(h) + ".log"));
    EXPECT_NE(log.find("host " + std::to_string(h) + " of 3: 10.77.0.1,10.77.0.2,10.77.0.3"), std::string::npos) << log;
    EXPECT_NE(log.find("inet 10.77.0." + std::to_string(h + 1) + "/24"), std::string::npos) << log;
  }
  EXPECT_NE(p->Log().find("host 0 of 3"), std::string::npos) << p->Log();
}

// A host's command that fails ends the run with an error naming the host and
// its status, and everything made is removed.
TEST(ClusterEmulationTest, AFailingHostCommandIsNamed) {
  test::TempDir dir;
  auto p = test::Subprocess::Start(
      {test::BinaryPath("nereus_bench"), "cluster", "--hosts=2", "--link_mbit=100", "--timeout_s=60",
       "--cluster_logs=" + dir.path(), "--host_command=echo failing on $NEREUS_BENCH_HOST; exit $NEREUS_BENCH_HOST"},
      dir.File("cluster.log"));
  const std::string prefix = "nrc" + std::to_string(p->pid()) + "_";
  auto code = p->WaitFor(std::chrono::seconds(60));
  if (code == 77) GTEST_SKIP() << "network namespaces unavailable here: " << p->Log();
  EXPECT_EQ(code, 1) << p->Log();
  EXPECT_NE(p->Log().find("host 1's command exited with status 1"), std::string::npos) << p->Log();
  EXPECT_NE(p->Log().find("failing on 1"), std::string::npos) << p->Log();
  EXPECT_TRUE(Namespaces(prefix).empty()) << "namespaces left behind";
}

// SIGTERM while every host's command runs: what the shell started is stopped
// too (each command leads a process group of its own), nothing is left. The
// command ignores SIGTERM, and so does the sleep it starts: the shell goes
// only at SIGKILL, which would orphan the sleep if it reached the shell alone.
TEST(ClusterEmulationTest, AnInterruptedHostCommandLeavesNothingBehind) {
  test::TempDir dir;
  FileWatch watch(dir.path());
  auto p = test::Subprocess::Start(
      {test::BinaryPath("nereus_bench"), "cluster", "--hosts=2", "--link_mbit=100", "--timeout_s=60",
       "--cluster_logs=" + dir.path(), "--host_command=trap '' TERM; echo ready; sleep 3017; echo not reached"},
      dir.File("cluster.log"));
  const std::string prefix = "nrc" + std::to_string(p->pid()) + "_";
  // Both shells have set their trap (and so their sleeps ignore SIGTERM too).
  for (const char* host : {"host0.log", "host1.log"}) {
    if (!watch.WaitForText(dir.File(host), "ready")) {
      auto code = p->WaitFor(std::chrono::seconds(10));
      if (code == 77) GTEST_SKIP() << "network namespaces unavailable here: " << p->Log();
      FAIL() << "the cluster never started its hosts' commands: " << p->Log();
    }
  }
  // To nereus_bench alone (p->Signal reaches its whole process group, which
  // would stop the commands' children whatever nereus_bench does).
  ASSERT_EQ(kill(p->pid(), SIGTERM), 0);
  EXPECT_EQ(p->WaitFor(std::chrono::seconds(30)), 128 + SIGTERM) << p->Log();
  EXPECT_TRUE(Namespaces(prefix).empty()) << "namespaces left behind";
  // /proc/PID/cmdline separates the arguments with NULs.
  EXPECT_EQ(ProcessesMentioning(std::string("sleep\0"
                                            "3017",
                                            10)),
            0)
      << "a host command's child left behind";
}

}  // namespace
}  // namespace nereus

// ctest reads exit status 77 as skipped (SKIP_RETURN_CODE).
int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (geteuid() != 0) {
    std::printf("SKIPPED: nereus_bench cluster needs root (CAP_NET_ADMIN) for network namespaces\n");
    return 77;
  }
  const int failed = RUN_ALL_TESTS();
  const auto* unit = ::testing::UnitTest::GetInstance();
  if (failed == 0 && unit->skipped_test_count() > 0) return 77;
  return failed;
}

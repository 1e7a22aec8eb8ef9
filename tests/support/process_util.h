// Test helpers: real processes on 127.0.0.1, bounded in time, always reaped.
#ifndef NEREUS_TESTS_SUPPORT_PROCESS_UTIL_H_
#define NEREUS_TESTS_SUPPORT_PROCESS_UTIL_H_

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/launch/subprocess.h"

namespace nereus {
namespace test {

// A child process whose stdout and stderr go to a log file: the tree's
// supervisor (common/launch/subprocess.h) plus the log. The destructor kills
// (SIGKILL) and reaps it if it is still running.
class Subprocess {
 public:
  // CHECK-fails if the program cannot be started (a test's own mistake).
  static std::unique_ptr<Subprocess> Start(const std::vector<std::string>& argv, const std::string& log_path);

  int pid() const { return process_->pid(); }
  // Waits up to `timeout` for the process to exit, without polling (pidfd).
  // Returns its exit code, 128+signal if killed by a signal, or nullopt.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout) { return process_->WaitFor(timeout); }
  void Signal(int sig) { process_->Signal(sig); }
  std::string Log() const;
  const std::string& log_path() const { return log_path_; }
  // Waits up to `timeout` until the log contains `text`, woken by inotify
  // when the log is written (no polling); false if it did not appear, or the
  // process exited without writing it.
  bool WaitForLog(const std::string& text, std::chrono::milliseconds timeout);

 private:
  Subprocess(std::unique_ptr<nereus::Subprocess> process, std::string log)
      : process_(std::move(process)), log_path_(std::move(log)) {}
  std::unique_ptr<nereus::Subprocess> process_;
  std::string log_path_;
};

// Path of a built binary (NEREUS_BIN_DIR, set by ctest).
std::string BinaryPath(const std::string& name);

// A built tool (`binary`, in NEREUS_BIN_DIR) run through the shell with
// `args` until it exits: its exit code (-1 if it did not exit normally) and
// its stdout and stderr together.
struct ToolRun {
  int exit_code = -1;
  std::string output;
};
ToolRun RunTool(const std::string& binary, const std::string& args);
// A fresh directory under TMPDIR, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};
// A TCP port on 127.0.0.1 that was free a moment ago, below the kernel's
// ephemeral range (so no connection can get it as its own source port).
int FreePort();
std::string ReadFile(const std::string& path);
// CURVE keys for a job of `servers` x `workers` in dir/name (nereus_keygen);
// returns that directory.
std::string MakeCurveKeys(const TempDir& dir, const std::string& name, int servers, int workers);

// A coordinator, S servers and W workers as real processes.
struct ClusterSpec {
  int servers = 1;
  int workers = 1;
  std::vector<std::string> coordinator_flags;
  std::vector<std::string> server_flags;
  std::vector<std::string> worker_flags;
  // Extra flags for one worker rank: {rank, flags}.
  std::vector<std::pair<int, std::vector<std::string>>> worker_rank_flags;
  // Extra flags for one server rank: {rank, flags}.
  std::vector<std::pair<int, std::vector<std::string>>> server_rank_flags;
  // Worker ranks not started as processes (the test joins as those itself).
  std::vector<int> external_workers;
  // Put before every process's command line (e.g. NetNamespace::Wrap's
  // "ip netns exec NAME": the whole job in one network namespace).
  std::vector<std::string> wrap;
  // Start the coordinator only once every server and worker process is up and
  // registering (they repeat REGISTER every second until it answers): for a
  // test of the coordinator's own --startup_timeout_s, whose window would
  // otherwise include the other processes' start, seconds on a loaded machine.
  bool coordinator_last = false;
};

// `a` then `b`.
inline std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The coordinator's heartbeats for a job in which a node is killed, or fails,
// and the job must end: the node is declared dead 10 s after its last
// heartbeat. Not less: under TSan beside two busy loops
// (tests/scripts/flake_hunt.sh) live coordinators and workers were silent for
// 1.5 s, and for 3 s with a build beside, and jobs with no fault at all were
// aborted at --heartbeat_timeout_ms=1500 and 3000.
inline const std::vector<std::string> kCrashHeartbeat = {"--heartbeat_interval_ms=500", "--heartbeat_timeout_ms=10000"};
// A job in which no node should die, or whose dead node is replaced (a
// rejoin): waits 20 s for a silent node, which no stall of a loaded machine
// reaches, and time for a replacement to come.
inline const std::vector<std::string> kPatientHeartbeat = {"--heartbeat_interval_ms=100",
                                                           "--heartbeat_timeout_ms=20000"};

// A job of `servers` servers and `workers` workers, the coordinator taking
// `coordinator_flags`; the test fills in the rest.
inline ClusterSpec JobOf(int servers, int workers, std::vector<std::string> coordinator_flags = {}) {
  ClusterSpec spec;
  spec.servers = servers;
  spec.workers = workers;
  spec.coordinator_flags = std::move(coordinator_flags);
  return spec;
}

// One server and one worker, the worker being the test itself (rank 0).
inline ClusterSpec OneServerAndTheTestAsWorker() {
  ClusterSpec spec;
  spec.external_workers = {0};
  return spec;
}

class LocalCluster {
 public:
  LocalCluster(const ClusterSpec& spec, const TempDir& dir);
  std::string coordinator_address() const;
  Subprocess& coordinator() { return *coordinator_; }
  Subprocess& server(int r) { return *servers_.at(r); }
  Subprocess& worker(int r) { return *workers_.at(r); }
  // The command line worker `r` / the coordinator was started with (to start
  // it again).
  const std::vector<std::string>& worker_argv(int r) const { return worker_argv_.at(r); }
  const std::vector<std::string>& coordinator_argv() const { return coordinator_argv_; }
  // Waits for every process; returns false if one of them has not exited by
  // the deadline (all are then killed by the destructors).
  bool WaitAll(std::chrono::milliseconds timeout, std::string* report);
  // Every process's exit code, coordinator first, then servers, then workers.
  std::vector<std::optional<int>> codes() const { return codes_; }

 private:
  int port_;
  std::unique_ptr<Subprocess> coordinator_;
  std::vector<std::unique_ptr<Subprocess>> servers_, workers_;
  std::vector<std::vector<std::string>> worker_argv_;
  std::vector<std::string> coordinator_argv_;
  std::vector<std::optional<int>> codes_;
};

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_PROCESS_UTIL_H_

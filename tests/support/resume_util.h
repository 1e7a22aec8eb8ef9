// Shared by the resume and rejoin tests: whole jobs run as processes and
// their exit codes, logs and restarts.
#ifndef NEREUS_TESTS_SUPPORT_RESUME_UTIL_H_
#define NEREUS_TESTS_SUPPORT_RESUME_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"

namespace nereus {
namespace test {

inline constexpr auto kJobTimeout = std::chrono::seconds(60);
// Runs the job to its end; returns the exit codes (coordinator, servers,
// workers) and the logs in `report`.
inline std::vector<std::optional<int>> RunJob(const ClusterSpec& spec, const TempDir& logs, std::string* report) {
  LocalCluster cluster(spec, logs);
  EXPECT_TRUE(cluster.WaitAll(kJobTimeout, report)) << *report;
  return cluster.codes();
}

// Starts `argv`, the command line of the process of `cluster` that was
// killed (index `killed` in cluster.codes()), again with --resume (its log at
// `log`, the process in `*again`), waits for the job, and expects the
// restarted process and every other of the job to exit 0. `started`, if
// given, runs once the process is started, before the wait. Call it in
// ASSERT_NO_FATAL_FAILURE.
inline void ResumeAndFinish(LocalCluster& cluster, std::vector<std::string> argv, size_t killed, const std::string& log,
                            std::unique_ptr<Subprocess>* again,
                            const std::function<void(Subprocess&)>& started = nullptr) {
  argv.push_back("--resume");
  *again = Subprocess::Start(argv, log);
  if (started) started(**again);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(kJobTimeout, &report)) << report << "--- " << log << " (the restarted process)\n"
                                                     << (*again)->Log();
  EXPECT_EQ((*again)->WaitFor(kJobTimeout), 0) << (*again)->Log();
  const auto codes = cluster.codes();
  for (size_t i = 0; i < codes.size(); ++i) {
    if (i != killed) {
      EXPECT_EQ(codes[i], 0) << "process " << i << "\n" << report;
    }
  }
}

inline void ExpectAllZero(const std::vector<std::optional<int>>& codes, const std::string& report) {
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "process " << i << "\n" << report;
}

inline bool Contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Waits for `p` and expects it to exit with `code`, its log containing each
// of `parts`.
inline void ExpectExitWithLog(Subprocess& p, int code, const std::vector<std::string>& parts) {
  EXPECT_EQ(p.WaitFor(kJobTimeout), code) << p.Log();
  for (const std::string& part : parts) EXPECT_TRUE(Contains(p.Log(), part)) << p.Log();
}

// Runs `spec`, its nodes giving up 5 s into their start-up if no job forms,
// and expects the job to fail (the coordinator's exit code) with the
// coordinator's log saying `message`.
inline void ExpectJobRefused(ClusterSpec spec, const TempDir& logs, const std::string& message) {
  spec.worker_flags.push_back("--startup_timeout_s=5");
  spec.server_flags.push_back("--startup_timeout_s=5");
  std::string report;
  const auto codes = RunJob(spec, logs, &report);
  EXPECT_NE(codes[0], 0) << report;
  EXPECT_TRUE(Contains(ReadFile(logs.File("coordinator.log")), message)) << report;
}

// Starts server 1 again, as its operator would after it died: its flags plus
// --resume.
inline std::unique_ptr<Subprocess> RestartServer1(const LocalCluster& cluster, const std::string& ckpt,
                                                  const std::string& log, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {BinaryPath("nereus_server"),
                                   "--role=server",
                                   "--coordinator=" + cluster.coordinator_address(),
                                   "--rank=1",
                                   "--checkpoint_dir=" + ckpt,
                                   "--checkpoint_every=20",
                                   "--startup_timeout_s=20"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return Subprocess::Start(argv, log);
}

inline constexpr char kJobStarted[] = "every node registered; job started";

// The synthetic job the resume, rejoin and coordinator-restart tests run: 2
// servers x 2 workers, 4 tensors spread over both servers (1 KiB partitions),
// BSP, an inv learning rate with momentum and weight decay, `iterations`
// clocks; worker w writes its final weights to out/<prefix><w>
// (kSyntheticWeightBytes each). The coordinator gets `heartbeat`.
inline constexpr size_t kSyntheticWeightBytes = (1000 + 2500 + 1728 + 7) * sizeof(float);
inline ClusterSpec SyntheticResumeSpec(int iterations, const std::string& prefix, const TempDir& out,
                                       const std::vector<std::string>& heartbeat) {
  ClusterSpec spec;
  spec.servers = 2;
  spec.workers = 2;
  spec.coordinator_flags = Concat({"--partition_bytes=1024", "--consistency=bsp"}, heartbeat);
  spec.worker_flags = Concat(
      {"--tensors=1000,250x10,64x3x3x3,7", "--iterations=" + std::to_string(iterations), "--seed=3", "--display=0"},
      InvDecaySgdFlags());
  for (int w = 0; w < 2; ++w)
    spec.worker_rank_flags.push_back({w, {"--weights_out=" + out.File(prefix + std::to_string(w))}});
  return spec;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_RESUME_UTIL_H_

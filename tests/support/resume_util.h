// Shared by the resume and rejoin tests: whole jobs run as processes and
// their exit codes, logs and restarts.
#ifndef NEREUS_TESTS_SUPPORT_RESUME_UTIL_H_
#define NEREUS_TESTS_SUPPORT_RESUME_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process_util.h"

namespace nereus {
namespace test {

inline constexpr auto kJobTimeout = std::chrono::seconds(60);
// Short heartbeats: the killed server is declared dead within a second.
inline const std::vector<std::string> kFastHeartbeat = {"--heartbeat_interval_ms=100", "--heartbeat_timeout_ms=1500"};

inline std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs the job to its end; returns the exit codes (coordinator, servers,
// workers) and the logs in `report`.
inline std::vector<std::optional<int>> RunJob(const ClusterSpec& spec, const TempDir& logs, std::string* report) {
  LocalCluster cluster(spec, logs);
  EXPECT_TRUE(cluster.WaitAll(kJobTimeout, report)) << *report;
  return cluster.codes();
}

inline void ExpectAllZero(const std::vector<std::optional<int>>& codes, const std::string& report) {
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 0) << "process " << i << "\n" << report;
}

inline bool Contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

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

// The job waits up to 20 s for a dead node: time for its replacement to come.
inline const std::vector<std::string> kPatientHeartbeat = {"--heartbeat_interval_ms=100",
                                                           "--heartbeat_timeout_ms=20000"};

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_RESUME_UTIL_H_

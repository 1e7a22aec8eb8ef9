// Jobs of synthetic workers that send fully connected tensors as sufficient
// factors (nereus_worker --fc_batch), as sfb_cluster_test and sfb_switch_test
// run them: each worker's final weights and summary written to a file and
// read back, the test joining such a job as worker 0 with the workers' one
// tensor, and a peer killed under it.
#ifndef NEREUS_TESTS_SUPPORT_SFB_JOB_H_
#define NEREUS_TESTS_SUPPORT_SFB_JOB_H_

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "nereus/client.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/synthetic_weights.h"
#include "worker/client/options_proto.h"

namespace nereus {
namespace test {

// The elements of the list `"key": [...]` in a JSON text (a --summary_json),
// as written there ("1, 2"); "missing" if there is none.
inline std::string JsonList(const std::string& json, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\": \\[([^\\]]*)\\]");
  if (!std::regex_search(json, m, re)) return "missing";
  return m[1];
}

// Gives each of `workers` workers --weights_out=DIR/wR and
// --summary_json=DIR/sR, then its flags in `rank_flags` ({rank, flags}).
inline void AddWeightsAndSummaryFlags(ClusterSpec* spec, const TempDir& dir, int workers,
                                      const std::vector<std::pair<int, std::vector<std::string>>>& rank_flags = {}) {
  for (int w = 0; w < workers; ++w) {
    std::vector<std::string> own = {"--weights_out=" + dir.File("w" + std::to_string(w)),
                                    "--summary_json=" + dir.File("s" + std::to_string(w))};
    for (const auto& [rank, more] : rank_flags)
      if (rank == w) own.insert(own.end(), more.begin(), more.end());
    spec->worker_rank_flags.push_back({w, own});
  }
}

struct SfbJobResult {
  std::vector<std::vector<float>> weights;  // Per worker, every tensor in order.
  std::vector<std::string> json, logs;
};

// Runs the job of `spec` (its workers given AddWeightsAndSummaryFlags's
// files in `dir`), expects every process to exit 0 within `timeout`, and
// reads each worker's weights, summary and log.
inline SfbJobResult RunSfbJob(const ClusterSpec& spec, const TempDir& dir, std::chrono::seconds timeout) {
  LocalCluster cluster(spec, dir);
  std::string report;
  SfbJobResult run;
  EXPECT_TRUE(cluster.WaitAll(timeout, &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  for (int w = 0; w < spec.workers; ++w) {
    run.weights.push_back(ReadFloatFile(dir.File("w" + std::to_string(w))));
    run.json.push_back(ReadFile(dir.File("s" + std::to_string(w))));
    run.logs.push_back(cluster.worker(w).Log());
  }
  return run;
}

// The one tensor of synthetic workers run with --tensors=20x30 --fc_batch=4:
// t0, 20 x 30, 4 factor rows, its buffers held here. Declare it before the
// client it is registered with: the client's threads write into it until
// the client is destroyed.
struct FcTensor20x30 {
  std::vector<float> w = std::vector<float>(600, 0.0f), g = std::vector<float>(600, 0.0f),
                     left = std::vector<float>(4 * 20, 0.01f), right = std::vector<float>(4 * 30, 0.01f);

  // Registers t0 with `client` and initialises it with the synthetic
  // workers' solver flags at their defaults (every worker applies the
  // factors itself, so the job checks they agree).
  Status RegisterAndInit(Client* client) {
    TensorSpec t{"t0", {20, 30}};
    t.layer = 0;
    t.data = w.data();
    t.diff = g.data();
    t.factor_rows = 4;
    t.factor_left = left.data();
    t.factor_right = right.data();
    StatusOr<int> registered = client->RegisterTensor(t);
    if (!registered.ok()) return registered.status();
    return client->Init(SgdConfigFromProto(SyntheticWorkerDefaultSgd()), {w.data()});
  }
};

// Kills worker 1 of `cluster` while the test, as worker 0, drives `client`
// on from `clock`: a wait for the weights of clock `last` at the latest must
// fail naming worker 1 as dead, and the job must end, worker 2 naming it
// too.
inline void ExpectKilledWorker1Named(LocalCluster& cluster, Client* client, int64_t clock, int64_t last) {
  cluster.worker(1).Signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  Status st;
  for (; clock <= last && st.ok(); ++clock) {
    st = client->WaitWeights(0, clock);
    if (st.ok()) st = client->GradientsReady(0, clock);
  }
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("worker 1 (tcp://127.0.0.1:"), std::string::npos) << st;
  EXPECT_NE(st.message().find("is dead"), std::string::npos) << st;
  // Every process ends (a hang would not): the heartbeat timeout after the
  // kill (kCrashHeartbeat: 10 s), more on a loaded machine.
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  std::printf("every process ended %.1f s after the kill\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count());
  EXPECT_NE(cluster.worker(2).Log().find("worker 1 (tcp://127.0.0.1:"), std::string::npos) << cluster.worker(2).Log();
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_SFB_JOB_H_

// Whole jobs as real processes on 127.0.0.1: consistency models end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <map>
#include <regex>

#include "common/update/sgd.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "worker/synthetic/synthetic_model.h"

namespace nereus {
namespace test {
namespace {

// [[clock, version], ...] from a worker's --summary_json.
std::vector<std::pair<int64_t, int64_t>> Pulls(const std::string& json) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto start = json.find("\"pulls\"");
  std::regex pair_re("\\[(\\d+), (\\d+)\\]");
  std::string rest = json.substr(start);
  for (std::sregex_iterator it(rest.begin(), rest.end(), pair_re), end; it != end; ++it)
    out.emplace_back(std::stoll((*it)[1]), std::stoll((*it)[2]));
  return out;
}

// A BSP job of 2 servers and 3 synthetic workers, 20 iterations; returns
// each worker's final weights (--weights_out).
std::vector<std::vector<float>> RunBspJob(const std::string& tensors, const std::string& partition_bytes,
                                          const std::vector<std::string>& server_flags) {
  TempDir dir;
  const int workers = 3;
  ClusterSpec spec = test::JobOf(2, workers, {"--partition_bytes=" + partition_bytes, "--consistency=bsp"});
  spec.server_flags = server_flags;
  spec.worker_flags = {"--tensors=" + tensors, "--iterations=20", "--seed=5", "--display=0"};
  for (const std::string& f : test::InvDecaySgdFlags()) spec.worker_flags.push_back(f);
  for (int w = 0; w < workers; ++w)
    spec.worker_rank_flags.push_back({w, {"--weights_out=" + dir.File("w" + std::to_string(w))}});
  LocalCluster cluster(spec, dir);
  std::string report;
  EXPECT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  std::vector<std::vector<float>> out;
  for (int w = 0; w < workers; ++w) out.push_back(ReadFloats(dir.File("w" + std::to_string(w))));
  return out;
}

// The single-process reference of the BSP jobs below: the same gradients,
// one SGD step per iteration on their average. `host_of[r]` is worker r's
// host: each host's gradients are summed in rank order first (host-local
// aggregation), the host sums then added in the order of their first ranks
// and scaled by 1/workers. Every worker a host of its own (the default) is
// the flat job: every gradient added in rank order.
std::vector<float> BspReference(const std::string& tensors, int workers = 3, std::vector<int> host_of = {}) {
  const int iterations = 20;
  if (host_of.empty())
    for (int r = 0; r < workers; ++r) host_of.push_back(r);
  const pb::SgdConfig sgd = test::InvDecaySgd();
  SyntheticModel model(SyntheticKind::kNoise, 5, 0.01f);
  auto shapes = ParseTensorShapes(tensors).value();
  std::vector<float> expected;
  for (size_t t = 0; t < shapes.size(); ++t) {
    const size_t n = ElementCount(shapes[t]);
    std::vector<float> w(n), h(n, 0.0f), avg(n);
    std::vector<std::vector<float>> g(workers, std::vector<float>(n));
    model.InitialWeights(t, w.data(), n);
    for (int c = 0; c < iterations; ++c) {
      for (int r = 0; r < workers; ++r) model.Gradient(r, c, t, w.data(), g[r].data(), n);
      std::map<int, std::vector<float>> sums;  // By host, in order of first rank (hosts numbered so).
      for (int r = 0; r < workers; ++r) {
        auto [it, first] = sums.try_emplace(host_of[r], g[r]);
        if (!first)
          for (size_t i = 0; i < n; ++i) it->second[i] += g[r][i];
      }
      std::vector<const float*> srcs;
      for (const auto& [host, sum] : sums) srcs.push_back(sum.data());
      AverageInOrder(srcs.data(), srcs.size(), avg.data(), n, workers);
      SgdStep(sgd, LearningRate(sgd, c), 1.0f, 1.0f, avg.data(), w.data(), h.data(), n);
    }
    expected.insert(expected.end(), w.begin(), w.end());
  }
  return expected;
}

void ExpectBitwise(const std::vector<std::vector<float>>& got, const std::vector<float>& expected,
                   const std::string& what) {
  for (size_t r = 0; r < got.size(); ++r) {
    ASSERT_EQ(got[r].size(), expected.size()) << what;
    EXPECT_EQ(std::memcmp(got[r].data(), expected.data(), expected.size() * sizeof(float)), 0)
        << what << ": worker " << r << " differs from the reference, e.g. element 0: " << got[r][0] << " vs "
        << expected[0];
  }
}

TEST(BspTest, TwoServersThreeWorkersMatchSingleProcessReferenceBitForBit) {
  // Small partitions: every tensor is split and spread over both servers.
  const std::string tensors = "1000,250x10,64x3x3x3,7";
  ExpectBitwise(RunBspJob(tensors, "1024", {}), BspReference(tensors), "--apply_threads default");
}

// The servers' updates on 1 apply thread and on 4 (--apply_threads): 256 KB
// partitions, so that every update goes through the pool (updates under
// 64 KB stay on the receive thread) and one server updates several
// partitions at once. The weights are byte-equal to each other and to the
// reference.
TEST(BspTest, ServersWithOneAndFourApplyThreadsGiveTheSameWeights) {
  const std::string tensors = "300000,65536x2,1000";
  const std::vector<float> expected = BspReference(tensors);
  ExpectBitwise(RunBspJob(tensors, "262144", {"--apply_threads=1"}), expected, "--apply_threads=1");
  ExpectBitwise(RunBspJob(tensors, "262144", {"--apply_threads=4"}), expected, "--apply_threads=4");
}

TEST(SspTest, NoWorkerReadsWeightsOlderThanTheStalenessBound) {
  TempDir dir;
  const int staleness = 2, workers = 3, iterations = 15;
  ClusterSpec spec = test::JobOf(2, workers, {"--consistency=ssp", "--staleness=2", "--partition_bytes=2048"});
  spec.worker_flags = {"--iterations=15", "--display=0", "--tensors=3000,40x40"};
  for (int w = 0; w < workers; ++w)
    spec.worker_rank_flags.push_back({w, {"--summary_json=" + dir.File("s" + std::to_string(w) + ".json")}});
  spec.worker_rank_flags.push_back({2, {"--slow_rank=2", "--slow_ms=40"}});
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;
  int64_t max_seen_by_fast = 0;
  for (int w = 0; w < workers; ++w) {
    auto pulls = Pulls(ReadFile(dir.File("s" + std::to_string(w) + ".json")));
    ASSERT_EQ(pulls.size(), iterations + 1u) << "worker " << w;
    for (auto [clock, version] : pulls) {
      EXPECT_GE(version, clock - staleness) << "worker " << w << " read version " << version << " at clock " << clock;
      EXPECT_LE(version, clock) << "worker " << w;
      if (w != 2) max_seen_by_fast = std::max(max_seen_by_fast, clock - version);
    }
  }
  // The fast workers did run ahead of the slow one, up to the bound: the test
  // would not notice a server that silently behaves as BSP otherwise.
  EXPECT_EQ(max_seen_by_fast, staleness);
}

TEST(AsyncTest, CompletesAndConvergesOnQuadratic) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(2, 2, {"--consistency=async", "--partition_bytes=4096"});
  spec.worker_flags = {"--model=quadratic", "--iterations=100", "--display=0",     "--tensors=2000,30x30",
                       "--base_lr=0.1",     "--momentum=0",     "--weight_decay=0"};
  for (int w = 0; w < 2; ++w)
    spec.worker_rank_flags.push_back({w, {"--summary_json=" + dir.File("s" + std::to_string(w) + ".json")}});
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;
  // Under async a worker that starts late reads weights the other has
  // already improved (a run saw worker 1's first read at version 40, loss
  // 10.2), so only a worker whose first read was version 0 saw the initial
  // weights' loss; at least one did, since the first push follows a read.
  double initial = -1;
  std::string jsons;
  for (int w = 0; w < 2; ++w) {
    const std::string json = ReadFile(dir.File("s" + std::to_string(w) + ".json"));
    jsons += json + "\n";
    const auto pulls = Pulls(json);
    ASSERT_FALSE(pulls.empty()) << json;
    if (pulls.front().second == 0) initial = std::max(initial, JsonNumber(json, "initial_loss"));
  }
  EXPECT_GT(initial, 100.0) << jsons;
  // How far a worker got depends on how the two interleaved, which the
  // machine decides. Each worker's last read follows its own 100 pushes (one
  // run under TSan on a loaded machine: worker 1 started as worker 0
  // finished, which read version 102, loss 0.70 of 617, 1.1e-3 of it). The
  // worker that read last read after the other had pushed (nearly) all of
  // its 100 too: nearly every update (version 200 when the other had
  // finished; 150 leaves room for pushes still in flight).
  int64_t newest = -1;
  double newest_loss = 0;
  for (int w = 0; w < 2; ++w) {
    const std::string json = ReadFile(dir.File("s" + std::to_string(w) + ".json"));
    const int64_t version = Pulls(json).back().second;
    EXPECT_GE(version, 100) << json;
    EXPECT_LT(JsonNumber(json, "final_loss"), 1e-2 * initial) << json;
    if (version > newest) {
      newest = version;
      newest_loss = JsonNumber(json, "final_loss");
    }
  }
  EXPECT_GE(newest, 150) << jsons;
  EXPECT_LE(newest, 200) << jsons;
  EXPECT_LT(newest_loss, 1e-3 * initial) << jsons;
}

// Host-local aggregation: 4 workers on two "hosts" of the loopback, ranks
// 0 and 2 on 127.0.0.1 and 1 and 3 on 127.0.0.2 (interleaved, as a
// round-robin placement puts them). Returns each worker's final weights and
// summary JSON.
struct HostJob {
  std::vector<std::vector<float>> weights;
  std::vector<std::string> summaries;
  std::string coordinator_log;
};
HostJob RunTwoHostJob(const std::string& tensors, const std::string& aggregation) {
  TempDir dir;
  const int workers = 4;
  ClusterSpec spec = test::JobOf(2, workers, {"--partition_bytes=1024", "--consistency=bsp", aggregation});
  spec.worker_flags = {"--tensors=" + tensors, "--iterations=20", "--seed=5", "--display=0"};
  for (const std::string& f : test::InvDecaySgdFlags()) spec.worker_flags.push_back(f);
  for (int w = 0; w < workers; ++w) {
    spec.worker_rank_flags.push_back({w,
                                      {"--weights_out=" + dir.File("w" + std::to_string(w)),
                                       "--summary_json=" + dir.File("s" + std::to_string(w) + ".json"),
                                       w % 2 == 0 ? "--bind_host=127.0.0.1" : "--bind_host=127.0.0.2"}});
  }
  LocalCluster cluster(spec, dir);
  std::string report;
  EXPECT_TRUE(cluster.WaitAll(std::chrono::seconds(120), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  HostJob job;
  for (int w = 0; w < workers; ++w) {
    job.weights.push_back(ReadFloats(dir.File("w" + std::to_string(w))));
    job.summaries.push_back(ReadFile(dir.File("s" + std::to_string(w) + ".json")));
  }
  job.coordinator_log = cluster.coordinator().Log();
  return job;
}

TEST(HostAggregationTest, TwoHostsPushTheirSumsInRankOrderBitForBitAndHalveTheirBytes) {
  const std::string tensors = "1000,250x10,64x3x3x3,7";
  const HostJob on = RunTwoHostJob(tensors, "--host_aggregation=on");
  // Ranks 0 and 2 on host 0, 1 and 3 on host 1: g0 + g2, then g1 + g3.
  ExpectBitwise(on.weights, BspReference(tensors, 4, {0, 1, 0, 1}), "aggregated per host");
  EXPECT_NE(on.coordinator_log.find("host-local aggregation on (--host_aggregation=on): each host's first worker "
                                    "pushes the sum of its workers' gradients; 127.0.0.1: workers {0, 2}; "
                                    "127.0.0.2: workers {1, 3}"),
            std::string::npos)
      << on.coordinator_log;
  // The flat job, for its bytes: every worker pushes everything.
  const HostJob flat = RunTwoHostJob(tensors, "--host_aggregation=off");
  ExpectBitwise(flat.weights, BspReference(tensors, 4), "flat");
  const double per_worker = JsonNumber(flat.summaries[0], "push_bytes");
  ASSERT_GT(per_worker, 0);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(JsonNumber(flat.summaries[w], "push_bytes"), per_worker) << flat.summaries[w];
    EXPECT_EQ(JsonNumber(flat.summaries[w], "host_push_bytes"), 0) << flat.summaries[w];
  }
  // Aggregated: a host's first worker pushes one copy for both (half the
  // host's bytes to the servers), the other sends its copy to it, and it
  // sums that copy in.
  for (int w : {0, 1}) {
    EXPECT_EQ(JsonNumber(on.summaries[w], "push_bytes"), per_worker) << on.summaries[w];
    EXPECT_EQ(JsonNumber(on.summaries[w], "host_summed_bytes"), per_worker) << on.summaries[w];
  }
  for (int w : {2, 3}) {
    EXPECT_EQ(JsonNumber(on.summaries[w], "push_bytes"), 0) << on.summaries[w];
    EXPECT_EQ(JsonNumber(on.summaries[w], "host_push_bytes"), per_worker) << on.summaries[w];
  }
}

// A local worker that dies mid-job ends it as any dead node does: its
// host's aggregating worker holds the host's push meanwhile, and the
// coordinator names the dead worker and its endpoint (its host) to every
// node; every process ends.
TEST(HostAggregationTest, ADeadLocalWorkerEndsTheJobNamingItAndItsHost) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(1, 4, Concat({"--consistency=bsp", "--host_aggregation=on"}, kCrashHeartbeat));
  spec.worker_flags = {"--tensors=1000,7", "--iterations=1000000", "--display=20"};
  for (int w = 0; w < 4; ++w)
    spec.worker_rank_flags.push_back({w, {w % 2 == 0 ? "--bind_host=127.0.0.1" : "--bind_host=127.0.0.2"}});
  LocalCluster cluster(spec, dir);
  ASSERT_TRUE(cluster.worker(3).WaitForLog("worker 3 iteration 20,", std::chrono::seconds(120)))
      << cluster.worker(3).Log();
  cluster.worker(3).Signal(SIGKILL);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (int w : {0, 1, 2}) {
    const std::string log = cluster.worker(w).Log();
    EXPECT_NE(log.find("worker 3 (tcp://127.0.0.2:"), std::string::npos) << "worker " << w << ":\n" << log;
    EXPECT_NE(log.find("is dead"), std::string::npos) << "worker " << w << ":\n" << log;
    EXPECT_NE(cluster.codes()[2 + w], 0) << report;  // Coordinator, server, then the workers.
  }
}

TEST(HostAggregationTest, OnUnderAsyncAndUnknownValuesAreRefusedByName) {
  const ToolRun run =
      RunTool("nereus_server", "--role=coordinator --coordinator=127.0.0.1:" + std::to_string(FreePort()) +
                                   " --consistency=async --host_aggregation=on --num_workers=2");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--host_aggregation=on needs --consistency=bsp or ssp"), std::string::npos) << run.output;
  const ToolRun bad = RunTool("nereus_server", "--role=coordinator --host_aggregation=sometimes");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--host_aggregation must be auto, on or off, got \"sometimes\""), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace test
}  // namespace nereus

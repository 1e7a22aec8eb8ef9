// Sufficient-factor broadcasting with real processes on 127.0.0.1: the
// synthetic model's fully connected tensors (nereus_worker --fc_batch) sent
// as factors (--sfb=on/auto) against the servers' full-matrix path
// (--sfb=off), SSP's fallback and refusal, and a dead peer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <regex>

#include "nereus/client.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/sfb_job.h"
#include "tests/support/synthetic_weights.h"

namespace nereus {
namespace test {
namespace {

// Tensors: t0 1000 (through the servers), t1 64 x 100 and t2 250 x 10 (fully
// connected, 8 factor rows per worker), t3 7 (through the servers).
constexpr char kTensors[] = "1000,64x100,250x10,7";
constexpr int kWorkers = 3, kClocks = 20, kBatch = 8;
const size_t kOffsets[] = {0, 1000, 1000 + 6400, 1000 + 6400 + 2500, 1000 + 6400 + 2500 + 7};

const char* const kRates[] = {"--sfb_link_gbit=1", "--sfb_rebuild_gflops=20", "--sfb_update_gbytes=2",
                              "--sfb_apply_gbytes=2"};

SfbJobResult RunJob(const std::string& sfb, const std::string& consistency = "bsp") {
  TempDir dir;
  ClusterSpec spec =
      test::JobOf(2, kWorkers, {"--partition_bytes=1024", "--consistency=" + consistency, "--staleness=1"});
  spec.worker_flags = {"--tensors=" + std::string(kTensors),
                       "--fc_batch=" + std::to_string(kBatch),
                       "--iterations=" + std::to_string(kClocks),
                       "--seed=5",
                       "--display=0",
                       "--sfb=" + sfb};
  for (const std::string& f : test::InvDecaySgdFlags()) spec.worker_flags.push_back(f);
  // HybComm's rates given (a 1 Gbit/s link; rebuild GEMM 20 GFLOP/s, SGD
  // step and server apply 2 GB/s), and no measured trials (sfb_switch_test
  // has those), so auto's choice does not depend on timing.
  for (const char* f : kRates) spec.worker_flags.push_back(f);
  spec.worker_flags.push_back("--sfb_trial_clocks=0");
  AddWeightsAndSummaryFlags(&spec, dir, kWorkers);
  return RunSfbJob(spec, dir, std::chrono::seconds(90));
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b, int tensor) {
  double m = 0;
  for (size_t i = kOffsets[tensor]; i < kOffsets[tensor + 1]; ++i)
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

// Tolerance of SFB against the servers. Only the summation order differs:
// each element of the clock's FC gradient sums W*K = 24 products u*v with
// |u| <= 0.5/8 and |v| <= 0.5 (so sum |u v| <= 0.75), in one GEMM on one
// side and as 3 per-worker sums averaged on the other. Float32 rounding
// bounds the difference of one gradient element by about 24 * 2^-24 * 0.75
// ~ 1.1e-6. A gradient error e moves the weights by at most lr * e / (1 -
// momentum) = 0.05 * e * 10 over the following steps, so 20 clocks give at
// most 20 * 0.5 * 1.1e-6 ~ 1.1e-5 (weight decay 0.001 feeds back
// negligibly). We allow 2e-5; random rounding signs make the real difference
// far smaller, while a lost worker or a clock applied twice moves the
// weights by > 1e-2 (each tensor moves by 0.09 to 0.8 in all, checked below).
constexpr double kTolerance = 2e-5;

TEST(SfbClusterTest, OnMatchesOffWithinToleranceAndReplicasAreBitwiseIdentical) {
  const SfbJobResult off = RunJob("off");
  const SfbJobResult on = RunJob("on");
  ASSERT_EQ(off.weights[0].size(), kOffsets[4]);
  ASSERT_EQ(on.weights[0].size(), kOffsets[4]);
  // Every worker holds the same bits, SFB replicas included.
  for (int w = 1; w < kWorkers; ++w) {
    EXPECT_TRUE(test::BytesEqual(on.weights[0], on.weights[w], "--sfb=on, worker " + std::to_string(w)));
    EXPECT_TRUE(test::BytesEqual(off.weights[0], off.weights[w], "--sfb=off, worker " + std::to_string(w)));
  }
  // Tensors through the servers: the same path, the same bits.
  for (int t : {0, 3}) {
    EXPECT_TRUE(test::BytesEqual(on.weights[0].data() + kOffsets[t], kOffsets[t + 1] - kOffsets[t],
                                 off.weights[0].data() + kOffsets[t], kOffsets[t + 1] - kOffsets[t],
                                 "tensor t" + std::to_string(t)));
  }
  // Every tensor moved far more than the tolerance (the largest change of a
  // weight, deterministic under BSP: 0.82, 0.105, 0.0915, 0.51 for t0..t3), so
  // a job that lost its updates cannot pass.
  const std::vector<double> moved = test::MovedFromInitial(off.weights[0], 5, {1000, 6400, 2500, 7});
  for (int t = 0; t < 4; ++t) {
    EXPECT_GT(moved[t], 2500 * kTolerance) << "tensor t" << t << " barely moved";
    std::printf("tensor t%d: max |final - initial| = %g\n", t, moved[t]);
  }
  // Fully connected tensors: within the tolerance, having moved far more.
  for (int t : {1, 2}) {
    const double d = MaxDiff(on.weights[0], off.weights[0], t);
    EXPECT_LE(d, kTolerance) << "tensor " << t;
    std::printf("tensor t%d: max |on - off| = %g (tolerance %g)\n", t, d, kTolerance);
  }
  // Counters: on sends 2 tensors x 2 peers x 20 clocks of factors, 8 x (64 + 100) and 8 x (250 + 10) floats.
  // The job's workers share a host (host-local aggregation, docs/HOSTAGG.md):
  // worker 0 pushes the host's gradients to the servers, the others theirs
  // to worker 0, as many bytes each.
  auto pushed = [](const std::string& json) {
    return JsonNumber(json, "push_bytes") + JsonNumber(json, "host_push_bytes");
  };
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(JsonList(on.json[w], "sfb_tensors"), "1, 2") << on.json[w];
    EXPECT_EQ(JsonNumber(on.json[w], "factor_messages"), 2 * 2 * kClocks) << on.json[w];
    EXPECT_EQ(JsonNumber(on.json[w], "factor_bytes"), kClocks * 2 * kBatch * (164 + 260) * 4.0) << on.json[w];
    EXPECT_EQ(pushed(on.json[w]), kClocks * (1000 + 7) * 4.0) << on.json[w];
    EXPECT_EQ(JsonNumber(on.json[w], w == 0 ? "host_push_bytes" : "push_bytes"), 0) << on.json[w];
    EXPECT_EQ(JsonList(off.json[w], "sfb_tensors"), "") << off.json[w];
    EXPECT_EQ(JsonNumber(off.json[w], "factor_messages"), 0) << off.json[w];
    EXPECT_EQ(pushed(off.json[w]), kClocks * (1000 + 6400 + 2500 + 7) * 4.0) << off.json[w];
  }
  // Worker 0 logs the decision table, the others do not.
  EXPECT_NE(on.logs[0].find("HybComm (--sfb=on, 3 worker(s), 2 server(s))"), std::string::npos) << on.logs[0];
  EXPECT_EQ(on.logs[1].find("HybComm ("), std::string::npos);
}

TEST(SfbClusterTest, AutoSendsOnlyTheLayersTheRuleChooses) {
  // 3 workers, 2 servers, K = 8, the rates of kRates (link 1.25e8 bytes/s each way):
  // t1 (64 x 100): PS 4*2*6400*3/2 = 76800 bytes, 0.3072 ms on the link + 4*6400/2 / 2e9 = 0.0064 ms of apply
  //   = 0.3136 ms; SFB 4*2*8*2*164 = 20992 bytes, 0.083968 ms + 2*24*6400 / 20e9 = 0.01536 ms of GEMM
  //   + 25600 / 2e9 = 0.0128 ms of step = 0.112128 ms: as factors.
  // t2 (250 x 10): PS 30000 bytes, 0.12 + 0.0025 = 0.1225 ms; SFB 33280 bytes, 0.13312 + 0.006 + 0.005
  //   = 0.14412 ms: through the servers.
  const SfbJobResult autorun = RunJob("auto");
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(JsonList(autorun.json[w], "sfb_tensors"), "1") << autorun.json[w];
    EXPECT_EQ(JsonNumber(autorun.json[w], "factor_messages"), 2 * kClocks) << autorun.json[w];
    EXPECT_TRUE(test::BytesEqual(autorun.weights[0], autorun.weights[w], "worker " + std::to_string(w)));
  }
  const std::string& log = autorun.logs[0];
  EXPECT_NE(log.find("HybComm (--sfb=auto, 3 worker(s), 2 server(s))"), std::string::npos) << log;
  EXPECT_NE(log.find("link 0.125 GB/s each way; rebuild on cpu: GEMM 20 GFLOP/s, SGD step 2 GB/s; server apply 2 "
                     "GB/s (link, GEMM, SGD step and apply given; the slowest of 3 workers)"),
            std::string::npos)
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("t1 +64x100 +8 +76800 +20992 +0\\.307 +0\\.006 +0\\.314 +0\\.084 "
                                                "+0\\.028 +0\\.000 +0\\.112 +SFB +auto: SFB costs less\n")))
      << log;
  EXPECT_TRUE(std::regex_search(log, std::regex("t2 +250x10 +8 +30000 +33280 +0\\.120 +0\\.00[23] +0\\.12[23] "
                                                "+0\\.133 +0\\.011 +0\\.000 +0\\.144 +PS +auto: PS costs less\n")))
      << log;
}

TEST(SfbClusterTest, SspFallsBackUnderAutoAndRefusesOn) {
  const SfbJobResult ssp = RunJob("auto", "ssp");
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(JsonList(ssp.json[w], "sfb_tensors"), "") << ssp.json[w];
  EXPECT_NE(ssp.logs[0].find("auto falls back to PS under SSP (SFB needs BSP)"), std::string::npos) << ssp.logs[0];

  TempDir dir;
  // The workers fail, and tell the job so.
  ClusterSpec spec = test::JobOf(1, 2, Concat({"--consistency=ssp", "--staleness=1"}, kPatientHeartbeat));
  spec.worker_flags = {"--tensors=64x100", "--fc_batch=8", "--iterations=3", "--display=0", "--sfb=on"};
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
  EXPECT_NE(cluster.codes()[2], 0);
  EXPECT_NE(cluster.worker(0).Log().find("--sfb=on needs --consistency=bsp"), std::string::npos)
      << cluster.worker(0).Log();
  EXPECT_NE(cluster.coordinator().Log().find(") failed: Init: "), std::string::npos) << cluster.coordinator().Log();
}

// SFB replicas are not in the servers' checkpoints: while the servers
// checkpoint, --sfb=on is refused naming why, and auto keeps every tensor on
// the servers (saying so).
TEST(SfbClusterTest, OnIsRefusedAndAutoFallsBackWhileServersCheckpoint) {
  for (const std::string mode : {"on", "auto"}) {
    TempDir dir, ckpt;
    // With "on" the workers fail, and tell the job so; with "auto" nobody
    // dies.
    ClusterSpec spec = test::JobOf(1, 2, kPatientHeartbeat);
    spec.server_flags = {"--checkpoint_dir=" + ckpt.path(), "--checkpoint_every=2"};
    spec.worker_flags = {"--tensors=64x100", "--fc_batch=8", "--iterations=3", "--display=0", "--sfb=" + mode};
    LocalCluster cluster(spec, dir);
    std::string report;
    ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
    const std::string log0 = cluster.worker(0).Log();
    if (mode == "on") {
      EXPECT_NE(cluster.codes()[2], 0) << report;
      EXPECT_NE(log0.find("--sfb=on cannot be used while the servers checkpoint (--checkpoint_every=2): SFB replicas "
                          "are not in the checkpoints"),
                std::string::npos)
          << log0;
      const std::string coordinator = cluster.coordinator().Log();
      EXPECT_NE(coordinator.find(") failed: Init: --sfb=on cannot be used while the servers checkpoint"),
                std::string::npos)
          << coordinator;
    } else {
      for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
      EXPECT_NE(log0.find("servers checkpoint: every tensor goes through the servers (--sfb=off)"), std::string::npos)
          << log0;
    }
  }
}

TEST(SfbClusterTest, DeadPeerFailsTheWaitNamingIt) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(1, 3, kCrashHeartbeat);
  // Only a fully connected tensor: after clock 0 nothing but factors moves.
  spec.worker_flags = {"--tensors=20x30", "--fc_batch=4", "--iterations=1000000",
                       "--compute_ms=5",  "--display=0",  "--sfb=on"};
  spec.external_workers = {0};  // This test is worker 0.
  LocalCluster cluster(spec, dir);

  ClientOptions o = test::TestWorkerOptions(cluster.coordinator_address(), 0);
  o.sfb = SfbMode::kOn;
  FcTensor20x30 tensor;  // Outlives the client, whose threads write into it.
  auto client = Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE(tensor.RegisterAndInit(client->get()).ok());
  EXPECT_EQ((*client)->sfb_tensors(), std::vector<int>{0});
  int64_t clock = 0;
  for (; clock < 5; ++clock) {
    ASSERT_TRUE((*client)->WaitWeights(0, clock).ok());
    ASSERT_TRUE((*client)->GradientsReady(0, clock).ok());
  }
  // Worker 1 may have sent factors up to clock 5 before it died, never
  // those of clock 6 (they need ours of clock 5): the wait for the weights
  // of clock 7 at the latest must fail, naming it.
  ExpectKilledWorker1Named(cluster, client->get(), clock, 7);
}

}  // namespace
}  // namespace test
}  // namespace nereus

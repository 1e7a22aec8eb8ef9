// HybComm's per-layer choice (common/update/hybcomm.h) against cases worked by hand
// from Poseidon's cost model (docs/CLIENT.md) and the cost model of hybcomm.h:
//   SFB floats per worker: 2K(P1-1)(M+N);  PS floats per node: 2MN(P1+P2-2)/P2
//   PS  seconds = PS bytes / 2 / link  + 4MN / P2 / apply
//   SFB seconds = SFB bytes / 2 / link + 2 (P1 K) M N / rebuild + 4MN / update
//   SFB iff SFB seconds <= PS seconds.
// Every expected number below was multiplied out by hand (bytes = 4 x floats).
#include "common/update/hybcomm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>

namespace nereus {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Free compute: the model reduces to Poseidon's bytes-only rule. A link of
// 0.5 bytes/s each way makes each path's seconds equal its bytes.
HybCommRates BytesOnly() {
  HybCommRates r;
  r.link_bytes_per_s = 0.5;
  r.rebuild_flops_per_s = kInf;
  r.update_bytes_per_s = kInf;
  r.apply_bytes_per_s = kInf;
  return r;
}

// What DecideHybComm works out for one layer, worked by hand: each is
// compared with EXPECT_DOUBLE_EQ.
struct Costs {
  double sfb_bytes, ps_bytes, ps_s, sfb_link_s, sfb_rebuild_s, sfb_s;
};

void ExpectCosts(const HybCommChoice& x, const Costs& c) {
  EXPECT_DOUBLE_EQ(x.sfb_bytes, c.sfb_bytes) << x.layer.name;
  EXPECT_DOUBLE_EQ(x.ps_bytes, c.ps_bytes) << x.layer.name;
  EXPECT_DOUBLE_EQ(x.ps_s, c.ps_s) << x.layer.name;
  EXPECT_DOUBLE_EQ(x.sfb_link_s, c.sfb_link_s) << x.layer.name;
  EXPECT_DOUBLE_EQ(x.sfb_rebuild_s, c.sfb_rebuild_s) << x.layer.name;
  EXPECT_DOUBLE_EQ(x.sfb_s, c.sfb_s) << x.layer.name;
}

HybCommRates Rates(double link, double rebuild, double update, double apply) {
  HybCommRates r;
  r.link_bytes_per_s = link;
  r.rebuild_flops_per_s = rebuild;
  r.update_bytes_per_s = update;
  r.apply_bytes_per_s = apply;
  return r;
}

struct Row {
  const char* name;
  int64_t rows, cols, batch;
  int workers, servers;
  double sfb_floats, ps_floats;
  bool sfb;
};

// VGG19: fc6 4096 x 25088, fc7 4096 x 4096, fc8 1000 x 4096; LeNet: ip1 500 x 800, ip2 10 x 500.
const Row kTable[] = {
    // P1 = P2 = 8, K = 32: 13.07M against 359.7M floats.
    {"fc6", 4096, 25088, 32, 8, 8, 13074432, 359661568, true},  // 2*32*7*29184 vs 2*102760448*14/8
    {"fc7", 4096, 4096, 32, 8, 8, 3670016, 58720256, true},     // 2*32*7*8192 vs 2*16777216*14/8
    {"fc8", 1000, 4096, 32, 8, 8, 2283008, 14336000, true},     // 2*32*7*5096 vs 2*4096000*14/8
    // fc6's crossover: P <= 2MN / (K(M+N)) = 205520896 / 933888 = 220.07.
    {"fc6", 4096, 25088, 32, 220, 220, 409042944, 409173420.218, true},   // 2*32*219*29184 vs 2MN*438/220
    {"fc6", 4096, 25088, 32, 221, 221, 410910720, 409181874.389, false},  // 2*32*220*29184 vs 2MN*440/221
    // fc6 at 4 x 4: a batch of 2048 per worker is too big for SFB, 1024 is not (2MN*6/4 = 308281344).
    {"fc6", 4096, 25088, 2048, 4, 4, 358612992, 308281344, false},  // 2*2048*3*29184
    {"fc6", 4096, 25088, 1024, 4, 4, 179306496, 308281344, true},   // 2*1024*3*29184
    // LeNet, K = 64: crossover 2MN / (K(M+N)) = 800000 / 83200 = 9.6 for ip1.
    {"ip1", 500, 800, 64, 2, 2, 166400, 800000, true},       // 2*64*1*1300 vs 2*400000*2/2
    {"ip2", 10, 500, 64, 2, 2, 65280, 10000, false},         // 2*64*1*510 vs 2*5000*2/2
    {"ip1", 500, 800, 64, 8, 8, 1164800, 1400000, true},     // 2*64*7*1300 vs 2*400000*14/8
    {"ip1", 500, 800, 64, 10, 10, 1497600, 1440000, false},  // 2*64*9*1300 vs 2*400000*18/10
    {"ip1", 500, 800, 256, 2, 2, 665600, 800000, true},      // 2*256*1300
    {"ip1", 500, 800, 512, 2, 2, 1331200, 800000, false},    // 2*512*1300
    // Unequal worker and server counts.
    {"fc7", 4096, 4096, 32, 4, 1, 1572864, 100663296, true},  // 2*32*3*8192 vs 2*16777216*3/1
    {"ip2", 10, 500, 1, 4, 2, 3060, 20000, true},             // 2*1*3*510 vs 2*5000*4/2
    {"ip2", 10, 500, 9, 2, 4, 9180, 10000, true},             // 2*9*1*510 vs 2*5000*4/4
    {"ip2", 10, 500, 10, 2, 4, 10200, 10000, false},          // 2*10*1*510 vs 2*5000*4/4
    // A tie goes to SFB (<=): M = N = 4, K = 2, P1 = P2 = 2: 2*2*1*8 = 32 = 2*16*2/2.
    {"tie", 4, 4, 2, 2, 2, 32, 32, true},
    // One worker, one server: nothing to send either way (0 <= 0).
    {"ip1", 500, 800, 64, 1, 1, 0, 0, true},
};

TEST(HybCommTest, WithFreeComputeAutoIsPoseidonsBytesRule) {
  for (const Row& r : kTable) {
    auto c =
        DecideHybComm(SfbMode::kAuto, r.workers, r.servers, pb::BSP, BytesOnly(), {{r.name, r.rows, r.cols, r.batch}});
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->size(), 1u);
    const HybCommChoice& x = (*c)[0];
    SCOPED_TRACE(std::string(r.name) + " K=" + std::to_string(r.batch) + " P1=" + std::to_string(r.workers) +
                 " P2=" + std::to_string(r.servers));
    EXPECT_EQ(x.sfb, r.sfb);
    EXPECT_DOUBLE_EQ(x.sfb_bytes, 4 * r.sfb_floats);
    EXPECT_NEAR(x.ps_bytes, 4 * r.ps_floats, 0.1);
    ASSERT_TRUE(x.priced);
    EXPECT_DOUBLE_EQ(x.sfb_s, x.sfb_bytes);
    EXPECT_DOUBLE_EQ(x.ps_s, x.ps_bytes);
    EXPECT_EQ(x.sfb_rebuild_s, 0.0);
    EXPECT_EQ(x.ps_apply_s, 0.0);
    if (r.sfb_floats == r.ps_floats)
      EXPECT_EQ(x.reason, "auto: same cost, SFB (a tie goes to SFB)");
    else
      EXPECT_EQ(x.reason, r.sfb ? "auto: SFB costs less" : "auto: PS costs less");
    EXPECT_EQ(x.layer.name, r.name);
  }
}

// A case measured on a 16-core machine (docs/SCALING.md): VGG19, 4 workers x 4 servers, K = 32,
// the rebuild on a CPU. There each worker rebuilt 31.6 GFLOP per iteration in 0.857 s
// (36.9 GFLOP/s); here 40 GFLOP/s, a 5 GB/s link each way (the unshaped
// loopback moved off's 1.7 GB per node in < 0.33 s), SGD step and server
// apply 5 GB/s. SFB moves 55x fewer bytes of fc6 but costs 5x more.
TEST(HybCommTest, BytesFavourSfbButACpuRebuildMakesItSlower) {
  auto c = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(5e9, 40e9, 5e9, 5e9),
                         {{"fc6", 4096, 25088, 32}, {"fc7", 4096, 4096, 32}, {"fc8", 1000, 4096, 32}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 3u);
  const HybCommChoice& fc6 = (*c)[0];
  // Bytes: SFB 4*2*32*3*29184 = 22413312, PS 4*2*102760448*6/4 = 1233125376.
  // PS:  1233125376 / 2 / 5e9 = 0.1233125376 s + 4*102760448/4 / 5e9 = 0.0205520896 s.
  // SFB: 22413312 / 1e10 = 0.0022413312 s + 26306674688 / 40e9 = 0.6576668672 s
  //      + 411041792 / 5e9 = 0.0822083584 s.
  ExpectCosts(fc6, {22413312, 1233125376, 0.1438646272, 0.0022413312, 0.7398752256, 0.7421165568});
  // GEMM: 2 * (4*32) * 102760448 = 26306674688 FLOPs.
  EXPECT_DOUBLE_EQ(fc6.rebuild_flops, 26306674688.0);
  EXPECT_DOUBLE_EQ(fc6.ps_link_s, 0.1233125376);
  EXPECT_DOUBLE_EQ(fc6.ps_apply_s, 0.0205520896);
  // fc7: PS 0.0201326592 + 0.0033554432; SFB 0.0006291456 + 0.1073741824 + 0.0134217728.
  EXPECT_DOUBLE_EQ((*c)[1].ps_s, 0.0234881024);
  EXPECT_DOUBLE_EQ((*c)[1].sfb_s, 0.1214251008);
  // fc8: PS 0.0049152 + 0.0008192; SFB 0.0003913728 + 0.0262144 + 0.0032768.
  EXPECT_DOUBLE_EQ((*c)[2].ps_s, 0.0057344);
  EXPECT_DOUBLE_EQ((*c)[2].sfb_s, 0.0298825728);
  for (const auto& x : *c) {
    EXPECT_FALSE(x.sfb) << x.layer.name;
    EXPECT_EQ(x.reason, "auto: PS costs less, though SFB moves fewer bytes") << x.layer.name;
  }
  // The same job rebuilding on an H200 (GPU.md: fc6's GEMM at 40 TFLOP/s;
  // SGD step 800 GB/s): fc6 SFB 0.0022413312 + 0.000657666867 + 0.00051380224
  // = 0.00341280031 s against PS 0.1438646272 s.
  auto gpu = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(5e9, 40e12, 800e9, 5e9), {{"fc6", 4096, 25088, 32}});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_TRUE((*gpu)[0].sfb);
  EXPECT_NEAR((*gpu)[0].sfb_s, 0.0034128003, 1e-10);
  EXPECT_EQ((*gpu)[0].reason, "auto: SFB costs less");
  // A free link: only the work counts, and the servers' apply is cheaper than the CPU's rebuild.
  auto free_link =
      DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(kInf, 40e9, 5e9, 5e9), {{"fc6", 4096, 25088, 32}});
  ASSERT_TRUE(free_link.ok()) << free_link.status();
  EXPECT_FALSE((*free_link)[0].sfb);
  EXPECT_DOUBLE_EQ((*free_link)[0].ps_s, 0.0205520896);
}

// The reverse: SFB moves more bytes, but the servers' apply costs more than
// a GPU's rebuild. fc8 (1000 x 4096) with K = 1024, 2 workers, 1 server
// applying at 1 GB/s, a 100 Gbit/s link (12.5 GB/s).
TEST(HybCommTest, BytesFavourServersButTheirApplyMakesThemSlower) {
  auto c = DecideHybComm(SfbMode::kAuto, 2, 1, pb::BSP, Rates(12.5e9, 40e12, 800e9, 1e9), {{"fc8", 1000, 4096, 1024}});
  ASSERT_TRUE(c.ok()) << c.status();
  const HybCommChoice& x = (*c)[0];
  // Bytes: SFB 4*2*1024*1*5096 = 41746432 > PS 4*2*4096000*1/1 = 32768000.
  // PS:  32768000 / 2 / 12.5e9 = 0.00131072 + 16384000 / 1e9 = 0.016384.
  // SFB: 41746432 / 25e9 = 0.00166985728 + 2*2048*4096000 / 40e12 = 0.0004194304 + 16384000 / 800e9 = 0.00002048.
  ExpectCosts(x, {41746432, 32768000, 0.01769472, 0.00166985728, 0.0004399104, 0.00210976768});
  EXPECT_TRUE(x.sfb);
  EXPECT_EQ(x.reason, "auto: SFB costs less, though it moves more bytes");
}

// M = N = 4, K = 2, P1 = P2 = 2: 128 bytes either way, a 64 B/s link (1 s
// each), apply 4*16/2 = 32 bytes at 32 B/s (1 s); the rebuild 2*4*16 = 128
// FLOPs at 256 FLOP/s (0.5 s) and 64 bytes at 128 B/s (0.5 s): 2 s each.
TEST(HybCommTest, AnExactTieGoesToSfbAndAHairSlowerRebuildToServers) {
  auto tie = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, Rates(64, 256, 128, 32), {{"t", 4, 4, 2}});
  ASSERT_TRUE(tie.ok()) << tie.status();
  EXPECT_EQ((*tie)[0].ps_s, 2.0);
  EXPECT_EQ((*tie)[0].sfb_s, 2.0);
  EXPECT_TRUE((*tie)[0].sfb);
  EXPECT_EQ((*tie)[0].reason, "auto: same cost, SFB (a tie goes to SFB)");
  // GEMM at 255 FLOP/s: 128/255 > 0.5 s.
  auto slower = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, Rates(64, 255, 128, 32), {{"t", 4, 4, 2}});
  ASSERT_TRUE(slower.ok()) << slower.status();
  EXPECT_FALSE((*slower)[0].sfb);
  EXPECT_EQ((*slower)[0].reason, "auto: PS costs less");
}

TEST(HybCommTest, AutoRefusesUnknownOrBadRatesNamingThem) {
  const std::vector<FcLayerShape> fc6 = {{"fc6", 4096, 25088, 32}};
  auto zero_link = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(0, 40e9, 5e9, 5e9), fc6);
  ASSERT_FALSE(zero_link.ok());
  EXPECT_EQ(zero_link.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(zero_link.status().message(),
            "HybComm (--sfb=auto) cannot price the layers: the link rate (bytes/s) is unknown (0)");
  auto negative = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(5e9, -1, 5e9, 5e9), fc6);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().message(),
            "HybComm (--sfb=auto) cannot price the layers: the rebuild GEMM rate (FLOP/s) is -1.000000, which is not "
            "> 0");
  auto nan = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(5e9, 40e9, std::nan(""), 5e9), fc6);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("the rebuild SGD step rate (bytes/s) is nan"), std::string::npos)
      << nan.status();
  auto apply = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, Rates(5e9, 40e9, 5e9, 0), fc6);
  ASSERT_FALSE(apply.ok());
  EXPECT_NE(apply.status().message().find("the server apply rate (bytes/s) is unknown (0)"), std::string::npos)
      << apply.status();
  // Where nothing is priced, unknown rates are no error and nothing is priced.
  for (SfbMode mode : {SfbMode::kOff, SfbMode::kOn}) {
    auto x = DecideHybComm(mode, 4, 4, pb::BSP, HybCommRates(), fc6);
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_FALSE((*x)[0].priced);
    EXPECT_EQ((*x)[0].ps_s, 0.0);
  }
  auto ssp = DecideHybComm(SfbMode::kAuto, 4, 4, pb::SSP, HybCommRates(), fc6);
  ASSERT_TRUE(ssp.ok()) << ssp.status();
  EXPECT_FALSE((*ssp)[0].sfb);
  EXPECT_TRUE(DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, HybCommRates(), {}).ok());
}

TEST(HybCommTest, OnAndOffOverrideTheRule) {
  // ip2 at 2 x 2, K = 64 is PS by the rule; on forces SFB. ip1 is SFB by the rule; off forces PS.
  auto on = DecideHybComm(SfbMode::kOn, 2, 2, pb::BSP, BytesOnly(), {{"ip2", 10, 500, 64}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE((*on)[0].sfb);
  EXPECT_EQ((*on)[0].reason, "--sfb=on");
  EXPECT_TRUE((*on)[0].priced);  // Known rates: on is priced too, for the table.
  auto off = DecideHybComm(SfbMode::kOff, 2, 2, pb::BSP, BytesOnly(), {{"ip1", 500, 800, 64}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE((*off)[0].sfb);
  EXPECT_EQ((*off)[0].reason, "--sfb=off");
}

TEST(HybCommTest, AutoFallsBackToServersUnderSspAndAsync) {
  for (pb::Consistency c : {pb::SSP, pb::ASYNC}) {
    auto x = DecideHybComm(SfbMode::kAuto, 8, 8, c, BytesOnly(), {{"fc6", 4096, 25088, 32}});
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_FALSE((*x)[0].sfb);
    EXPECT_EQ((*x)[0].reason, "auto falls back to PS under " + pb::Consistency_Name(c) + " (SFB needs BSP)");
  }
}

TEST(HybCommTest, OnIsRefusedUnderSspAndAsync) {
  auto x = DecideHybComm(SfbMode::kOn, 2, 2, pb::SSP, BytesOnly(), {{"ip1", 500, 800, 64}});
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(x.status().message().find("--sfb=on needs --consistency=bsp"), std::string::npos) << x.status();
  EXPECT_NE(x.status().message().find("SSP"), std::string::npos) << x.status();
  EXPECT_FALSE(DecideHybComm(SfbMode::kOn, 2, 2, pb::ASYNC, BytesOnly(), {}).ok());
}

TEST(HybCommTest, BadShapesAndJobsAreRefusedNamingThem) {
  auto x = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, BytesOnly(), {{"ip9", 10, 0, 64}});
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().message(), "layer \"ip9\": HybComm needs a positive shape and batch, got 10 x 0 with batch 64");
  auto y = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, BytesOnly(), {{"ip1", 500, 800, 0}});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("with batch 0"), std::string::npos) << y.status();
  auto z = DecideHybComm(SfbMode::kAuto, 0, 2, pb::BSP, BytesOnly(), {});
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().message(), "HybComm needs at least one worker and one server, got 0 worker(s) and 2 server(s)");
}

// The rebuild runs beside the backward of the layers below: only what
// exceeds it counts. ip2 of ParseAndTable (SFB rebuild 312.5 s, link 63.75
// s; PS 625 s) with 250 s of backward below it: hidden 250, SFB 63.75 +
// 312.5 - 250 = 126.25 s; with 400 s below, all of the rebuild is hidden:
// SFB 63.75 s. A layer priced at Init (overlap unknown, 0) pays all of it.
// The link is never credited (every layer's bytes share it). With the
// rebuild slow against the link, the model chooses PS without the overlap
// and SFB with enough backward below the layer to hide it.
TEST(HybCommTest, OverlapHidesTheRebuildOnly) {
  const HybCommRates rates = Rates(64, 256, 128, 32);
  FcLayerShape ip2{"ip2", 10, 500, 2};
  ip2.overlap_s = 250;
  FcLayerShape all = ip2;
  all.overlap_s = 400;
  auto c = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, rates, {ip2, all, {"ip2", 10, 500, 2}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ((*c)[0].sfb_rebuild_s, 312.5);
  EXPECT_DOUBLE_EQ((*c)[0].sfb_hidden_s, 250);
  EXPECT_DOUBLE_EQ((*c)[0].sfb_s, 126.25);
  EXPECT_DOUBLE_EQ((*c)[1].sfb_hidden_s, 312.5);
  EXPECT_DOUBLE_EQ((*c)[1].sfb_s, 63.75);
  EXPECT_DOUBLE_EQ((*c)[2].sfb_hidden_s, 0);
  EXPECT_DOUBLE_EQ((*c)[2].sfb_s, 376.25);
  // 10 x 500, K = 2, 2 x 2: PS 40000 bytes, SFB 8160; link 256 B/s: PS 78.125 + apply 10000 / 256 = 39.0625
  // -> 117.1875 s; SFB 15.9375 + rebuild 40000 / 256 + 20000 / 128 = 312.5 s. Without overlap PS; with 300 s
  // below the layer SFB costs 15.9375 + 12.5 = 28.4375 s.
  const HybCommRates slow_work = Rates(256, 256, 128, 256);
  FcLayerShape hidden{"ip2", 10, 500, 2};
  hidden.overlap_s = 300;
  auto d = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, slow_work, {{"ip2", 10, 500, 2}, hidden});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_DOUBLE_EQ((*d)[0].ps_s, 117.1875);
  EXPECT_DOUBLE_EQ((*d)[0].sfb_s, 328.4375);
  EXPECT_FALSE((*d)[0].sfb);
  EXPECT_DOUBLE_EQ((*d)[1].sfb_s, 28.4375);
  EXPECT_TRUE((*d)[1].sfb);
}

TEST(HybCommTest, ParseAndTable) {
  EXPECT_EQ(*ParseSfbMode("auto"), SfbMode::kAuto);
  EXPECT_EQ(*ParseSfbMode("on"), SfbMode::kOn);
  EXPECT_EQ(*ParseSfbMode("off"), SfbMode::kOff);
  auto bad = ParseSfbMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--sfb must be auto, off or on, got \"yes\"");
  // The tie above, and ip2 (10 x 500, K = 2) at the same rates: PS 8*5000*2/2 = 40000 bytes, 312.5 s on the
  // link + 4*5000/2 / 32 = 312.5 s; SFB 8*2*1*510 = 8160 bytes, 63.75 s + 2*4*5000/256 = 156.25 s + 20000/128
  // = 156.25 s.
  HybCommRates rates = Rates(64, 256, 128, 32);
  rates.rebuild_on = "cpu";
  rates.origin = "given";
  auto c = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, rates, {{"t", 4, 4, 2}, {"ip2", 10, 500, 2}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ((*c)[1].ps_s, 625);
  EXPECT_DOUBLE_EQ((*c)[1].sfb_s, 376.25);
  const std::string t = FormatHybCommTable(SfbMode::kAuto, 2, 2, rates, *c);
  EXPECT_NE(t.find("HybComm (--sfb=auto, 2 worker(s), 2 server(s)); per clock per node; link 6.4e-08 GB/s each way; "
                   "rebuild on cpu: GEMM 2.56e-07 GFLOP/s, SGD step 1.28e-07 GB/s; server apply 3.2e-08 GB/s "
                   "(given); costs in ms:\n"),
            std::string::npos)
      << t;
  EXPECT_TRUE(
      std::regex_search(t, std::regex("\n  t +4x4 +2 +128 +128 +1000\\.000 +1000\\.000 +2000\\.000 +1000\\.000 "
                                      "+1000\\.000 +0\\.000 +2000\\.000 SFB  auto: same cost, SFB \\(a tie goes to "
                                      "SFB\\)\n")))
      << t;
  EXPECT_TRUE(
      std::regex_search(t, std::regex("\n  ip2 +10x500 +2 +40000 +8160 +312500\\.000 +312500\\.000 +625000\\.000 "
                                      "+63750\\.000 +312500\\.000 +0\\.000 +376250\\.000 SFB  auto: SFB costs less\n")))
      << t;
  // Unpriced (off with unknown rates): dashes, and the unknown rates marked.
  auto off = DecideHybComm(SfbMode::kOff, 2, 2, pb::BSP, HybCommRates(), {{"t", 4, 4, 2}});
  ASSERT_TRUE(off.ok());
  const std::string u = FormatHybCommTable(SfbMode::kOff, 2, 2, HybCommRates(), *off);
  EXPECT_NE(u.find("link ? GB/s each way; rebuild on cpu: GEMM ? GFLOP/s"), std::string::npos) << u;
  EXPECT_TRUE(std::regex_search(u, std::regex("\n  t +4x4 +2 +128 +128( +-){7} PS +--sfb=off\n"))) << u;
  // A free part is named so.
  const std::string f = FormatHybCommTable(SfbMode::kAuto, 2, 2, BytesOnly(), {});
  EXPECT_NE(f.find("GEMM free (inf GFLOP/s)"), std::string::npos) << f;
}

}  // namespace
}  // namespace nereus

// HybComm's per-layer choice (common/hybcomm.h) against a table worked by
// hand from Poseidon's cost model (docs/CLIENT.md):
//   SFB floats per worker: 2K(P1-1)(M+N);  PS floats per node: 2MN(P1+P2-2)/P2;
//   SFB iff the first <= the second.
// Every expected number below was multiplied out by hand (bytes = 4 x floats).
#include "common/hybcomm.h"

#include <gtest/gtest.h>

namespace nereus {
namespace {

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

TEST(HybCommTest, AutoMatchesTheHandWorkedTable) {
  for (const Row& r : kTable) {
    auto c = DecideHybComm(SfbMode::kAuto, r.workers, r.servers, pb::BSP, {{r.name, r.rows, r.cols, r.batch}});
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->size(), 1u);
    const HybCommChoice& x = (*c)[0];
    SCOPED_TRACE(std::string(r.name) + " K=" + std::to_string(r.batch) + " P1=" + std::to_string(r.workers) +
                 " P2=" + std::to_string(r.servers));
    EXPECT_EQ(x.sfb, r.sfb);
    EXPECT_DOUBLE_EQ(x.sfb_bytes, 4 * r.sfb_floats);
    EXPECT_NEAR(x.ps_bytes, 4 * r.ps_floats, 0.1);
    EXPECT_EQ(x.reason, r.sfb ? "auto: SFB bytes <= PS bytes" : "auto: SFB bytes > PS bytes");
    EXPECT_EQ(x.layer.name, r.name);
  }
}

TEST(HybCommTest, VggFcLayersKeepTheirOrderAndBytesInOneCall) {
  // VGG19 at 4 workers x 4 servers, K = 32: every FC layer goes SFB.
  auto c = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP,
                         {{"fc6", 4096, 25088, 32}, {"fc7", 4096, 4096, 32}, {"fc8", 1000, 4096, 32}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].layer.name, "fc6");
  EXPECT_EQ((*c)[2].layer.name, "fc8");
  // fc6: SFB 4*2*32*3*29184 = 22413312 bytes, PS 4*2*102760448*6/4 = 1233125376 bytes.
  EXPECT_DOUBLE_EQ((*c)[0].sfb_bytes, 22413312);
  EXPECT_DOUBLE_EQ((*c)[0].ps_bytes, 1233125376);
  for (const auto& x : *c) EXPECT_TRUE(x.sfb) << x.layer.name;
}

TEST(HybCommTest, OnAndOffOverrideTheRule) {
  // ip2 at 2 x 2, K = 64 is PS by the rule; on forces SFB. ip1 is SFB by the rule; off forces PS.
  auto on = DecideHybComm(SfbMode::kOn, 2, 2, pb::BSP, {{"ip2", 10, 500, 64}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE((*on)[0].sfb);
  EXPECT_EQ((*on)[0].reason, "--sfb=on");
  auto off = DecideHybComm(SfbMode::kOff, 2, 2, pb::BSP, {{"ip1", 500, 800, 64}});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE((*off)[0].sfb);
  EXPECT_EQ((*off)[0].reason, "--sfb=off");
}

TEST(HybCommTest, AutoFallsBackToServersUnderSspAndAsync) {
  for (pb::Consistency c : {pb::SSP, pb::ASYNC}) {
    auto x = DecideHybComm(SfbMode::kAuto, 8, 8, c, {{"fc6", 4096, 25088, 32}});
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_FALSE((*x)[0].sfb);
    EXPECT_EQ((*x)[0].reason, "auto falls back to PS under " + pb::Consistency_Name(c) + " (SFB needs BSP)");
  }
}

TEST(HybCommTest, OnIsRefusedUnderSspAndAsync) {
  auto x = DecideHybComm(SfbMode::kOn, 2, 2, pb::SSP, {{"ip1", 500, 800, 64}});
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(x.status().message().find("--sfb=on needs --consistency=bsp"), std::string::npos) << x.status();
  EXPECT_NE(x.status().message().find("SSP"), std::string::npos) << x.status();
  EXPECT_FALSE(DecideHybComm(SfbMode::kOn, 2, 2, pb::ASYNC, {}).ok());
}

TEST(HybCommTest, BadShapesAndJobsAreRefusedNamingThem) {
  auto x = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, {{"ip9", 10, 0, 64}});
  ASSERT_FALSE(x.ok());
  EXPECT_NE(x.status().message().find("layer \"ip9\""), std::string::npos) << x.status();
  auto y = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, {{"ip1", 500, 800, 0}});
  EXPECT_FALSE(y.ok());
  auto z = DecideHybComm(SfbMode::kAuto, 0, 2, pb::BSP, {});
  ASSERT_FALSE(z.ok());
  EXPECT_NE(z.status().message().find("0 worker(s)"), std::string::npos) << z.status();
}

TEST(HybCommTest, ParseAndTable) {
  EXPECT_EQ(*ParseSfbMode("auto"), SfbMode::kAuto);
  EXPECT_EQ(*ParseSfbMode("on"), SfbMode::kOn);
  EXPECT_EQ(*ParseSfbMode("off"), SfbMode::kOff);
  auto bad = ParseSfbMode("yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--sfb must be auto, off or on, got \"yes\"");
  auto c = DecideHybComm(SfbMode::kAuto, 2, 2, pb::BSP, {{"ip1", 500, 800, 64}, {"ip2", 10, 500, 64}});
  ASSERT_TRUE(c.ok());
  const std::string t = FormatHybCommTable(SfbMode::kAuto, 2, 2, *c);
  EXPECT_NE(t.find("HybComm (--sfb=auto, 2 worker(s), 2 server(s))"), std::string::npos) << t;
  // ip1: 665600 SFB bytes, 3200000 PS bytes; ip2: 261120 and 40000.
  EXPECT_NE(t.find("ip1"), std::string::npos);
  EXPECT_NE(t.find("500x800"), std::string::npos) << t;
  EXPECT_NE(t.find("3200000"), std::string::npos) << t;
  EXPECT_NE(t.find("665600"), std::string::npos) << t;
  EXPECT_NE(t.find("SFB  auto: SFB bytes <= PS bytes"), std::string::npos) << t;
  EXPECT_NE(t.find("PS   auto: SFB bytes > PS bytes"), std::string::npos) << t;
}

}  // namespace
}  // namespace nereus

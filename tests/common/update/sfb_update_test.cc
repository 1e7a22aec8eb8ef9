// Sufficient factors (common/update/sfb.h): the wire format and its checks, and the
// per-clock update (one GEMM over the factors stacked in rank order, then the
// servers' SGD step) against the full-matrix path of the servers
// (AverageInOrder + SgdStep).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/update/sfb.h"
#include "common/update/sgd.h"
#include "tests/support/fixtures.h"

namespace nereus {
namespace {

Buffer Floats(const std::vector<float>& v) { return Buffer::CopyOf(v.data(), v.size() * sizeof(float)); }

Factors Make(int64_t k, const std::vector<float>& left, const std::vector<float>& right) {
  return Factors{k, Floats(left), Floats(right)};
}

std::vector<float> ToVector(const Buffer& b) {
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

TEST(FactorGradientTest, HandWorkedTwoWorkers) {
  // 2 x 3 weight, one row per worker:
  //   worker 0: [1 2]^T [1 0 -1];  worker 1: [0 3]^T [2 1 1]
  //   sum = [[1 0 -1], [2 0 -2]] + [[0 0 0], [6 3 3]] = [[1 0 -1], [8 3 1]]; x 1/2.
  const Factors w0 = Make(1, {1, 2}, {1, 0, -1});
  const Factors w1 = Make(1, {0, 3}, {2, 1, 1});
  FactorScratch scratch;
  std::vector<float> g(6, 42.0f);
  FactorGradient({&w0, &w1}, {2, 3}, 0.5f, g.data(), &scratch);
  EXPECT_EQ(g, (std::vector<float>{0.5f, 0.0f, -0.5f, 4.0f, 1.5f, 0.5f}));
}

TEST(FactorGradientTest, SeveralRowsPerWorkerAndRankOrderStacking) {
  // K = 2 for worker 0, K = 1 for worker 1; rows = 1, cols = 2.
  //   worker 0: left [1; 2] (2 x 1), right [[1 1], [0 1]] -> [1 1] + [0 2] = [1 3]
  //   worker 1: left [4], right [[1 -1]] -> [4 -4];  total [5 -1].
  const Factors w0 = Make(2, {1, 2}, {1, 1, 0, 1});
  const Factors w1 = Make(1, {4}, {1, -1});
  FactorScratch scratch;
  std::vector<float> g(2);
  FactorGradient({&w0, &w1}, {1, 2}, 1.0f, g.data(), &scratch);
  EXPECT_EQ(g, (std::vector<float>{5, -1}));
  // The stack holds worker 0's rows first.
  EXPECT_EQ(scratch.left, (std::vector<float>{1, 2, 4}));
  EXPECT_EQ(scratch.right, (std::vector<float>{1, 1, 0, 1, 1, -1}));
}

// Integer-valued factors: every product and sum is exact in float32, so the
// SFB update equals the servers' full-matrix update bit for bit.
TEST(ApplySufficientFactorsTest, EqualsTheServersUpdateBitForBitWhenExact) {
  const FactorShape shape{3, 4};
  const int workers = 3, k = 2;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<Factors> f;
  std::vector<std::vector<float>> full(workers, std::vector<float>(12, 0.0f));
  for (int w = 0; w < workers; ++w) {
    std::vector<float> l(k * 3), r(k * 4);
    for (auto& x : l) x = static_cast<float>(small(rng));
    for (auto& x : r) x = static_cast<float>(small(rng));
    for (int s = 0; s < k; ++s)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 4; ++j) full[w][i * 4 + j] += l[s * 3 + i] * r[s * 4 + j];
    f.push_back(Make(k, l, r));
  }
  const pb::SgdConfig sgd = test::InvDecaySgd();
  std::vector<float> w_sfb(12), w_ps(12), h_sfb(12, 0.0f), h_ps(12, 0.0f);
  for (int i = 0; i < 12; ++i) w_sfb[i] = w_ps[i] = 0.25f * static_cast<float>(i) - 1.0f;
  FactorScratch scratch;
  std::vector<const Factors*> by_rank = {&f[0], &f[1], &f[2]};
  for (int64_t clock = 0; clock < 3; ++clock) {
    ApplySufficientFactors(sgd, clock, 2.0f, 0.5f, by_rank, shape, w_sfb.data(), h_sfb.data(), &scratch);
    const float* srcs[3] = {full[0].data(), full[1].data(), full[2].data()};
    std::vector<float> avg(12);
    AverageInOrder(srcs, 3, avg.data(), 12);
    SgdStep(sgd, LearningRate(sgd, clock), 2.0f, 0.5f, avg.data(), w_ps.data(), h_ps.data(), 12);
  }
  EXPECT_EQ(std::memcmp(w_sfb.data(), w_ps.data(), 12 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(h_sfb.data(), h_ps.data(), 12 * sizeof(float)), 0);
  EXPECT_NE(w_sfb[0], -1.0f);  // It moved.
}

// Random factors: only the summation order differs from the servers' path.
// Each gradient element is a sum of W*K = 96 products; float32 rounding
// bounds the difference by about 96 * 2^-24 * sum|u v| ~ 6e-6 * sum|u v|.
// With |u|, |v| < 1 that sum is < 96, lr 0.1 x lr_mult 1 and momentum 0.9
// over 5 steps give |dw| < 5 * 10 * 0.1 * 6e-6 * 96 ~ 3e-3 as a hard bound;
// the typical error is far smaller (random signs), so 1e-5 is used and a
// real mistake (a missing worker) moves weights by > 1e-2.
TEST(ApplySufficientFactorsTest, TracksTheServersUpdateAndIsDeterministic) {
  const FactorShape shape{20, 30};
  const int workers = 3, k = 32;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const pb::SgdConfig sgd = test::InvDecaySgd();
  std::vector<float> w_sfb(600), w_sfb2(600), w_ps(600), h_sfb(600, 0), h_sfb2(600, 0), h_ps(600, 0);
  for (int i = 0; i < 600; ++i) w_sfb[i] = w_sfb2[i] = w_ps[i] = u(rng);
  FactorScratch s1, s2;
  for (int64_t clock = 0; clock < 5; ++clock) {
    std::vector<Factors> f;
    std::vector<std::vector<float>> full(workers, std::vector<float>(600, 0.0f));
    for (int w = 0; w < workers; ++w) {
      std::vector<float> l(k * 20), r(k * 30);
      for (auto& x : l) x = u(rng) / k;
      for (auto& x : r) x = u(rng);
      // The worker's own full gradient (what it would push), rank by rank.
      for (int i = 0; i < 20; ++i)
        for (int j = 0; j < 30; ++j) {
          float acc = 0;
          for (int s = 0; s < k; ++s) acc += l[s * 20 + i] * r[s * 30 + j];
          full[w][i * 30 + j] = acc;
        }
      f.push_back(Make(k, l, r));
    }
    std::vector<const Factors*> by_rank = {&f[0], &f[1], &f[2]};
    ApplySufficientFactors(sgd, clock, 1.0f, 1.0f, by_rank, shape, w_sfb.data(), h_sfb.data(), &s1);
    ApplySufficientFactors(sgd, clock, 1.0f, 1.0f, by_rank, shape, w_sfb2.data(), h_sfb2.data(), &s2);
    const float* srcs[3] = {full[0].data(), full[1].data(), full[2].data()};
    std::vector<float> avg(600);
    AverageInOrder(srcs, 3, avg.data(), 600);
    SgdStep(sgd, LearningRate(sgd, clock), 1.0f, 1.0f, avg.data(), w_ps.data(), h_ps.data(), 600);
  }
  EXPECT_EQ(std::memcmp(w_sfb.data(), w_sfb2.data(), 600 * sizeof(float)), 0) << "same inputs, other bits";
  double diff = 0;
  for (int i = 0; i < 600; ++i) diff = std::max(diff, static_cast<double>(std::fabs(w_sfb[i] - w_ps[i])));
  EXPECT_LE(diff, 1e-5);
  std::printf("max |SFB - PS| after 5 clocks: %g\n", diff);
}

TEST(FactorWireTest, RoundTripsThroughTheWireFormat) {
  const Factors f = Make(2, {1, 2, 3, 4}, {5, 6, 7, 8, 9, 10});
  Message m = FactorsMessage(7, 12, f);
  const std::string header = EncodeHeader(&m);
  auto decoded = DecodeMessage(Buffer::CopyOf(header.data(), header.size()), m.payload);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->header.op(), pb::FACTORS);
  EXPECT_EQ(decoded->header.tensor(), 7);
  EXPECT_EQ(decoded->header.clock(), 12);
  EXPECT_EQ(decoded->header.factor_rows(), 2);
  EXPECT_EQ(decoded->header.payload_bytes(), 40u);
  auto parsed = ParseFactors(*decoded, {2, 3}, "ip1/0");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->k, 2);
  EXPECT_EQ(ToVector(parsed->left), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(ToVector(parsed->right), (std::vector<float>{5, 6, 7, 8, 9, 10}));
}

TEST(FactorWireTest, BadFramesAreRefusedNamingTheProblem) {
  const FactorShape shape{2, 3};
  auto error = [&](Message m) {
    auto p = ParseFactors(m, shape, "ip1/0");
    EXPECT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    return p.status().message();
  };
  const Factors good = Make(2, {1, 2, 3, 4}, {5, 6, 7, 8, 9, 10});
  Message short_left = FactorsMessage(0, 3, Make(2, {1, 2, 3}, {5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(error(short_left),
            "factors of ip1/0 for clock 3: left factor frame has 12 bytes, expected 16 (2 x 2 floats)");
  Message long_right = FactorsMessage(0, 3, Make(2, {1, 2, 3, 4}, {5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(error(long_right),
            "factors of ip1/0 for clock 3: right factor frame has 28 bytes, expected 24 (2 x 3 floats)");
  Message one_frame = FactorsMessage(0, 3, good);
  one_frame.payload.pop_back();
  EXPECT_EQ(error(one_frame), "factors of ip1/0 for clock 3: 1 payload frame(s), expected 2 (left and right factor)");
  Message no_rows = FactorsMessage(0, 3, good);
  no_rows.header.set_factor_rows(0);
  EXPECT_EQ(error(no_rows), "factors of ip1/0 for clock 3: factor_rows 0 is outside [1, 1048576]");
  Message huge = FactorsMessage(0, 3, good);
  huge.header.set_factor_rows(int64_t{1} << 40);
  EXPECT_NE(error(huge).find("outside [1, 1048576]"), std::string::npos);
  Message dtype = FactorsMessage(0, 3, good);
  dtype.header.set_dtype(pb::DTYPE_UNSPECIFIED);
  EXPECT_NE(error(dtype).find("expected FLOAT32"), std::string::npos);
}

}  // namespace
}  // namespace nereus

#include "worker/client/merge_plan.h"

#include <gtest/gtest.h>

namespace nereus {
namespace {

TEST(FitLinkModelTest, RecoversALine) {
  std::vector<std::pair<double, double>> s;
  for (double p = 32768; p <= 2097152; p *= 2) s.emplace_back(p, 50e-6 + 1e-9 * p);
  auto m = FitLinkModel(s);
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->alpha, 50e-6, 1e-9);
  EXPECT_NEAR(m->beta, 1e-9, 1e-15);
  EXPECT_FALSE(FitLinkModel({{1000, 1.0}, {1000, 2.0}}).ok());
}

// The true link: alpha 1 ms, beta 1 us/byte (2, 3 and 5 ms at 1, 2 and 4 KB).
// Two of three repeats of the small sizes were delayed by CPU wake-ups of
// 25-30 ms, and one 4 KB ping by 40 ms: the medians (27, 28, 6 ms) would fit
// alpha = 38 ms and beta = -7.57 us/byte; the minima give the line exactly.
TEST(FitLinkRobustTest, MinimumIgnoresWakeUpsAndOutliers) {
  std::vector<PingSample> pings = {
      {0, 1000, 2e-3},  {0, 1000, 32e-3}, {0, 1000, 27e-3},  //
      {0, 2000, 28e-3}, {0, 2000, 3e-3},  {0, 2000, 33e-3},  //
      {0, 4000, 5e-3},  {0, 4000, 45e-3}, {0, 4000, 6e-3},
  };
  LinkFit fit = FitLinkRobust(pings);
  EXPECT_FALSE(fit.fell_back);
  EXPECT_FALSE(fit.alpha_bounded);
  EXPECT_TRUE(fit.note.empty());
  EXPECT_NEAR(fit.model.alpha, 1e-3, 1e-12);
  EXPECT_NEAR(fit.model.beta, 1e-6, 1e-15);
  EXPECT_DOUBLE_EQ(fit.min_round_trip, 2e-3);
}

// Minima (after one 50 ms outlier at 2 KB is dropped) of 2, 9 and 4 ms at 1,
// 2 and 3 KB. By hand: mean size 2000, mean time 5 ms, slope
// ((-1000)(-3e-3) + 0 + (1000)(-1e-3)) / (2 * 1000^2) = 1e-6 s/byte, intercept
// 5e-3 - 2000 * 1e-6 = 3 ms, above the smallest round trip (2 ms at 1 KB): a
// message cannot cost more at start-up than that whole round trip, so alpha
// is bounded to 2 ms; beta stays 1 us/byte.
TEST(FitLinkRobustTest, AlphaNeverExceedsTheSmallestRoundTrip) {
  std::vector<PingSample> pings = {
      {0, 1000, 2e-3}, {0, 1000, 2.5e-3}, {0, 2000, 50e-3}, {0, 2000, 9e-3}, {0, 3000, 4e-3}, {0, 3000, 4.2e-3},
  };
  LinkFit fit = FitLinkRobust(pings);
  EXPECT_FALSE(fit.fell_back);
  EXPECT_TRUE(fit.alpha_bounded);
  EXPECT_NEAR(fit.fitted_alpha, 3e-3, 1e-12);
  EXPECT_DOUBLE_EQ(fit.model.alpha, 2e-3);
  EXPECT_NEAR(fit.model.beta, 1e-6, 1e-15);
  EXPECT_NE(fit.note.find("smallest round trip 2000 us"), std::string::npos) << fit.note;
}

// Minima of 5, 4 and 3 ms at 1, 2 and 4 KB: by hand (mean size 2333.3 bytes,
// mean time 4 ms) the slope is ((-1333.3)(1e-3) + (-333.3)(0) +
// (1666.7)(-1e-3)) / 4.6667e6 = -3 / 4.6667e6 = -643 ns/byte. A link does
// not get faster with bigger messages: the fit is implausible and the default
// (100 us, 0.8 ns/byte) is used, with a note naming the measured figures.
TEST(FitLinkRobustTest, NegativeBetaFallsBackToTheDefault) {
  std::vector<PingSample> pings = {{0, 1000, 5e-3}, {0, 2000, 4e-3}, {0, 4000, 3e-3}, {0, 4000, 3.5e-3}};
  LinkFit fit = FitLinkRobust(pings);
  EXPECT_TRUE(fit.fell_back);
  EXPECT_EQ(fit.model.alpha, kDefaultLinkModel.alpha);
  EXPECT_EQ(fit.model.beta, kDefaultLinkModel.beta);
  EXPECT_EQ(fit.model.alpha, 100e-6);
  EXPECT_EQ(fit.model.beta, 0.8e-9);
  EXPECT_NEAR(fit.fitted_beta, -3.0 / 4.666666666666667e6, 1e-15);
  EXPECT_NE(fit.note.find("beta not positive"), std::string::npos) << fit.note;
  EXPECT_NE(fit.note.find("4 pings, 3 (target, size) minima, smallest round trip 3000 us"), std::string::npos)
      << fit.note;
  // A stated fallback of the caller's is used as given.
  LinkFit other = FitLinkRobust(pings, LinkModel{1e-3, 2e-9});
  EXPECT_EQ(other.model.alpha, 1e-3);
  EXPECT_EQ(other.model.beta, 2e-9);
}

TEST(FitLinkRobustTest, OneSizeOrNoPingsFallsBack) {
  LinkFit one = FitLinkRobust({{0, 1000, 2e-3}, {1, 1000, 3e-3}});
  EXPECT_TRUE(one.fell_back);
  EXPECT_EQ(one.model.alpha, kDefaultLinkModel.alpha);
  EXPECT_NE(one.note.find("two different sizes"), std::string::npos) << one.note;
  LinkFit none = FitLinkRobust({});
  EXPECT_TRUE(none.fell_back);
  EXPECT_EQ(none.model.beta, kDefaultLinkModel.beta);
  // Non-positive or non-finite times are not round trips.
  LinkFit bad = FitLinkRobust({{0, 1000, 0.0}, {0, 2000, -1.0}, {0, 4000, 1.0 / 0.0}});
  EXPECT_TRUE(bad.fell_back);
}

// Minima are taken per target: a worker's own server (no link, 0.1 and
// 0.2 ms) must not stand for the remote one (1.1 and 2.1 ms). By hand over
// the four minima: mean size 1500, mean time 0.875 ms, slope
// ((-500)(-0.775) + 500(-0.675) + (-500)(0.225) + 500(1.225)) ms / 1e6 =
// 550 ms / 1e6 bytes = 0.55 us/byte, intercept 0.875 ms - 1500 * 0.55 us =
// 50 us (below the smallest round trip, 100 us).
TEST(FitLinkRobustTest, MinimaPerTargetAndNonNegativeAlpha) {
  std::vector<PingSample> pings = {
      {0, 1000, 0.1e-3}, {0, 1000, 0.4e-3}, {0, 2000, 0.2e-3},  //
      {1, 1000, 1.1e-3}, {1, 2000, 2.1e-3}, {1, 2000, 7e-3},
  };
  LinkFit fit = FitLinkRobust(pings);
  EXPECT_FALSE(fit.fell_back);
  EXPECT_FALSE(fit.alpha_bounded);
  EXPECT_NEAR(fit.model.alpha, 50e-6, 1e-12);
  EXPECT_NEAR(fit.model.beta, 0.55e-6, 1e-15);
  EXPECT_DOUBLE_EQ(fit.min_round_trip, 0.1e-3);
  // 1 and 3 ms at 1 and 2 KB: alpha -1 ms, clamped to 0; beta 2 us/byte.
  LinkFit steep = FitLinkRobust({{0, 1000, 1e-3}, {0, 2000, 3e-3}});
  EXPECT_FALSE(steep.fell_back);
  EXPECT_EQ(steep.model.alpha, 0.0);
  EXPECT_NEAR(steep.model.beta, 2e-6, 1e-15);
}

// 50 tiny layers (10 bytes each), start-up cost alpha = 1 s, beta = 1 ms/byte,
// backward 0.1 s per layer except layers 30 and 10, whose backward takes 5 s.
//
// By hand (tau_b[49] = 0, layers ready every 0.1 s): at l = 49 the gradient of
// layer 48 is ready 0.1 s after layer 49's message could start, sooner than
// alpha, so 49 merges into 48; the same holds down to l = 32, so layers 31..49
// form one message of 190 bytes (t_c = 1.19) that may start at tau_c[31] = 1.9.
// At l = 31, layer 30 is ready only at r = 1.9 + 5.0 = 6.9 > 1.9 + 1.19: no
// merge. Layers 30..11 merge likewise (each 0.1 s after the previous); at
// l = 11, tau_c[11] = 8.8, t_c = 1.2, and layer 10 is ready at 13.8: no merge.
// Layers 10..0 merge into one. Plan: [0,10] [11,30] [31,49]: 3 messages, not 50.
TEST(PlanMergesTest, FiftyTinyLayersByHand) {
  const int L = 50;
  std::vector<double> bytes(L, 10.0), tb(L, 0.1);
  tb[30] = 5.0;
  tb[10] = 5.0;
  LinkModel link{1.0, 0.001};
  auto plan = PlanMerges(link, bytes, tb);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].first, 0);
  EXPECT_EQ(plan[0].last, 10);
  EXPECT_EQ(plan[1].first, 11);
  EXPECT_EQ(plan[1].last, 30);
  EXPECT_EQ(plan[2].first, 31);
  EXPECT_EQ(plan[2].last, 49);
  // Fewer messages and an earlier end than one message per layer.
  std::vector<MergeGroup> unmerged;
  for (int l = 0; l < L; ++l) unmerged.push_back({l, l});
  EXPECT_LT(ModelledFinish(link, bytes, tb, plan), ModelledFinish(link, bytes, tb, unmerged));
  // By hand: [0,10] leaves when layer 0 is ready, at tau_b[0] + t_b[0] =
  // (19 * 0.1 + 5 + 19 * 0.1 + 5 + 9 * 0.1) + 0.1 = 14.8, taking 1 + 0.11.
  EXPECT_NEAR(ModelledFinish(link, bytes, tb, plan), 14.8 + 1.11, 1e-9);
}

TEST(PlanMergesTest, NoStartupCostNoMerging) {
  std::vector<double> bytes(20, 1000.0), tb(20, 0.01);
  auto plan = PlanMerges(LinkModel{0.0, 1e-9}, bytes, tb);
  EXPECT_EQ(plan.size(), 20u);
}

TEST(PlanMergesTest, BusyLinkMergesEvenWithoutStartupCost) {
  // Communication (1 s per layer) is far slower than backward (0.01 s): a
  // layer's message cannot start before the next gradient is ready.
  std::vector<double> bytes(5, 1000.0), tb(5, 0.01);
  auto plan = PlanMerges(LinkModel{0.0, 1e-3}, bytes, tb);
  // l = 4: its message starts at once (tau_c = r - 0.01): r - tau_c = 0.01 is
  // not < alpha = 0, and tau_c < r: no merge. l = 3: layer 3's message must
  // wait for layer 4's (until 1.01) while layer 2 is ready at 0.03: merge; and
  // so on down to 0.
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].first, 0);
  EXPECT_EQ(plan[0].last, 3);
  EXPECT_EQ(plan[1].first, 4);
}

TEST(ChooseMergesTest, TakesMgWfbpsPlanWhenItGainsAndNotOnATie) {
  // The fifty tiny layers above: MG-WFBP's 3 messages end at 15.91 s; one
  // message per layer pays alpha = 1 s fifty times and ends far later.
  {
    const int L = 50;
    std::vector<double> bytes(L, 10.0), tb(L, 0.1);
    tb[30] = 5.0;
    tb[10] = 5.0;
    const MergeChoice c = ChooseMerges(LinkModel{1.0, 0.001}, bytes, tb);
    EXPECT_TRUE(c.merged);
    ASSERT_EQ(c.groups.size(), 3u);
    EXPECT_EQ(c.groups[2].first, 31);
    EXPECT_NEAR(c.merged_end, 14.8 + 1.11, 1e-9);
    EXPECT_GT(c.unmerged_end, c.merged_end / (1 - kMinMergeGain));
  }
  // The busy link above (alpha 0): MG-WFBP merges layers 0..3, but with no
  // start-up cost both plans end when the 5,000 bytes are through: layer 4
  // leaves at 0.01 and every byte takes 1 ms, so 0.01 + 5 s either way. A
  // tie: no merging.
  {
    std::vector<double> bytes(5, 1000.0), tb(5, 0.01);
    const LinkModel link{0.0, 1e-3};
    ASSERT_EQ(PlanMerges(link, bytes, tb).size(), 2u);
    const MergeChoice c = ChooseMerges(link, bytes, tb);
    EXPECT_FALSE(c.merged);
    EXPECT_NEAR(c.merged_end, 5.01, 1e-9);
    EXPECT_NEAR(c.unmerged_end, 5.01, 1e-9);
    ASSERT_EQ(c.groups.size(), 5u);
    for (int l = 0; l < 5; ++l) {
      EXPECT_EQ(c.groups[l].first, l);
      EXPECT_EQ(c.groups[l].last, l);
    }
  }
  // A gain just under 1% is not taken; just over, it is. Two layers of 1000
  // bytes, backward 1 ms each, 1 ms a byte: 1 s a message, plus alpha.
  // Unmerged: layer 1 leaves at 0.001, layer 0 waits for it and ends at
  // 2.001 + 2 alpha. MG-WFBP merges them (layer 0 is ready 1 ms after layer 1,
  // sooner than alpha): one message from 0.002, ending at 2.002 + alpha. The
  // gain (alpha - 0.001) / (2.001 + 2 alpha) reaches 1% at alpha = 0.02144:
  // 0.93% at alpha 0.02, 1.07% at 0.023.
  for (const double alpha : {0.02, 0.023}) {
    std::vector<double> bytes(2, 1000.0), tb(2, 0.001);
    const MergeChoice c = ChooseMerges(LinkModel{alpha, 1e-3}, bytes, tb);
    EXPECT_NEAR(c.unmerged_end, 2.001 + 2 * alpha, 1e-9);
    EXPECT_NEAR(c.merged_end, 2.002 + alpha, 1e-9);
    EXPECT_EQ(c.merged, alpha > 0.0215) << alpha;
    EXPECT_EQ(c.groups.size(), c.merged ? 1u : 2u) << alpha;
  }
}

}  // namespace
}  // namespace nereus

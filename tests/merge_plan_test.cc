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

}  // namespace
}  // namespace nereus

// HybComm's measured choice without a network: SfbTrials driven clock by
// clock with injected per-path costs, the workers' proposals min-reduced as
// the "nereus.hybcomm.<clock>" barrier reduces them; SfbPaths and the
// forced schedule's parser.
#include "worker/client/sfb_trials.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "worker/client/sfb_paths.h"

namespace nereus {
namespace {

// fc6/0 (tensor 5) and fc7/0 (tensor 7) start on the servers; the start-up
// model priced fc6 at PS 200 ms, SFB 280 ms and fc7 at 10 and 20 ms, so fc6
// (the larger stake) is tried first.
std::vector<TrialLayer> Layers() {
  TrialLayer fc6{5, "fc6/0", false, 0.2, 0.28};
  TrialLayer fc7{7, "fc7/0", false, 0.01, 0.02};
  return {fc7, fc6};  // Registration order; the prior orders the trials.
}

SfbTrialsConfig Config() {
  SfbTrialsConfig c;
  c.warmup = 2;
  c.measure = 3;
  c.settle = 1;
  c.switch_margin = 0.05;
  c.drift_margin = 0.25;
  c.drift_clocks = 3;
  c.check_every = 4;
  return c;
}

// A layer's cost per clock on a path, as worker `w` measures it at `clock`.
using Cost = std::function<double(int w, int tensor, bool sfb, int64_t clock)>;

struct Job {
  std::vector<SfbPaths> paths;        // Per worker.
  std::vector<TrialSwitch> switches;  // Worker 0's, in order (every worker's are checked equal).
  std::vector<std::string> log;       // Worker 0's.
  std::vector<int64_t> agreements;    // Clocks with an agreement.
  std::vector<std::unique_ptr<SfbTrials>> trials;
};

double MinIgnoringNaN(double a, double b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return std::min(a, b);
}

// Runs `workers` workers' trials in lock step for `clocks` clocks; the
// clock's period on a worker is the sum of its layers' costs on their paths
// of that clock, each layer's wait a tenth of its cost.
Job RunJob(int workers, int64_t clocks, const Cost& cost, SfbTrialsConfig config = Config(),
           SfbTrials::Pricer pricer = nullptr) {
  Job job;
  const std::vector<TrialLayer> layers = Layers();
  std::vector<bool> start(8, false);
  for (int w = 0; w < workers; ++w) {
    job.paths.emplace_back();
    job.paths.back().Reset(0, start);
    job.trials.push_back(std::make_unique<SfbTrials>(config, layers, pricer));
  }
  for (int64_t c = 0; c < clocks; ++c) {
    std::vector<TrialStep> steps;
    for (int w = 0; w < workers; ++w) {
      double period = -1;
      std::vector<double> waits;
      if (c > 0) {
        period = 0;
        for (const TrialLayer& l : layers) {
          const double x = cost(w, l.tensor, job.paths[w].At(l.tensor, c - 1), c - 1);
          period += x;
          waits.push_back(x / 10);
        }
      }
      steps.push_back(job.trials[w]->Begin(c, period, waits));
      EXPECT_EQ(steps[w].agree, steps[0].agree) << "clock " << c;
      EXPECT_EQ(steps[w].proposal.size(), steps[0].proposal.size()) << "clock " << c;
    }
    std::vector<double> reduced;
    if (steps[0].agree) {
      job.agreements.push_back(c);
      reduced = steps[0].proposal;
      for (int w = 1; w < workers; ++w)
        for (size_t i = 0; i < reduced.size(); ++i) reduced[i] = MinIgnoringNaN(reduced[i], steps[w].proposal[i]);
    }
    std::vector<TrialSwitch> first;
    for (int w = 0; w < workers; ++w) {
      std::vector<std::string> log;
      std::vector<TrialSwitch> s = job.trials[w]->Decide(c, reduced, &log);
      if (w == 0) {
        first = s;
        job.log.insert(job.log.end(), log.begin(), log.end());
        job.switches.insert(job.switches.end(), s.begin(), s.end());
      }
      EXPECT_EQ(s.size(), first.size()) << "clock " << c << " worker " << w;
      if (s.size() != first.size()) return job;
      for (size_t i = 0; i < s.size(); ++i) {
        EXPECT_EQ(s[i].tensor, first[i].tensor);
        EXPECT_EQ(s[i].clock, first[i].clock);
        EXPECT_EQ(s[i].sfb, first[i].sfb);
        EXPECT_EQ(s[i].clock, c + 1) << "decided one clock ahead";
        job.paths[w].Set(s[i].tensor, s[i].clock, s[i].sfb);
      }
    }
  }
  return job;
}

std::string Describe(const std::vector<TrialSwitch>& v) {
  std::string out;
  for (const TrialSwitch& s : v)
    out += std::to_string(s.tensor) + "@" + std::to_string(s.clock) + (s.sfb ? ":sfb " : ":ps ");
  return out;
}

// fc6 costs 1.0 s per clock through the servers and 0.8 s as factors; fc7
// 0.1 and 0.15 s.
double Steady(int, int tensor, bool sfb, int64_t) {
  if (tensor == 5) return sfb ? 0.8 : 1.0;
  return sfb ? 0.15 : 0.1;
}

TEST(SfbTrialsTest, ARoundTriesEachLayerInThePriorsOrderAndKeepsTheShorterClock) {
  Job job = RunJob(1, 30, Steady);
  // The prior's agreement at clock 2 (the end of the warm-up); fc6: baseline
  // 2-4 on PS, SFB from 5 (decided at 4), 5 settling, 6-8 measured, decided
  // at 9: SFB stays. fc7: baseline 10-12, SFB from 13, measured 14-16,
  // decided at 17: back to PS from 18. The period's reference is measured
  // over 19-21 (18 is the switch back's settling clock), then drift checks
  // every 4 clocks from 26.
  EXPECT_EQ(Describe(job.switches), "5@5:sfb 7@13:sfb 7@18:ps ");
  EXPECT_EQ(job.agreements, (std::vector<int64_t>{2, 9, 17, 26}));
  ASSERT_EQ(job.log.size(), 2u);
  EXPECT_EQ(job.log[0],
            "HybComm clock 9: fc6/0 takes SFB from clock 10 (PS before the trial): measured PS 1100.0 ms, SFB 900.0 ms "
            "per clock (the slowest worker's median of 3 clocks each; the shorter clock wins); its own wait in "
            "WaitWeights PS 100.0 ms, SFB 80.0 ms; prior PS 200.0 ms, SFB 280.0 ms");
  EXPECT_EQ(job.log[1],
            "HybComm clock 17: fc7/0 takes PS from clock 18 (PS before the trial): measured PS 900.0 ms, SFB 950.0 ms "
            "per clock (the slowest worker's median of 3 clocks each; the shorter clock wins); its own wait in "
            "WaitWeights PS 10.0 ms, SFB 15.0 ms; prior PS 10.0 ms, SFB 20.0 ms");
  const SfbTrials& t = *job.trials[0];
  // fc6: 5 clocks on SFB under trial (5-9, kept); fc7: 5 (13-17) and the switch back's settling clock.
  EXPECT_EQ(t.trial_clocks(), 11);
  EXPECT_EQ(t.rounds(), 1);
  EXPECT_EQ(t.Mark(1), "");
  EXPECT_EQ(t.Mark(2), "HybComm trial: fc6/0 baseline on PS");
  EXPECT_EQ(t.Mark(5), "HybComm trial: fc6/0 on SFB, settling");
  EXPECT_EQ(t.Mark(8), "HybComm trial: fc6/0 measured on SFB");
  EXPECT_EQ(t.Mark(9), "HybComm trial: fc6/0 decided");
  EXPECT_EQ(t.Mark(14), "HybComm trial: fc7/0 measured on SFB");
  EXPECT_EQ(t.Mark(19), "");
  EXPECT_TRUE(job.paths[0].At(5, 29));
  EXPECT_FALSE(job.paths[0].At(7, 29));
  EXPECT_EQ(job.paths[0].switches(), 3);
}

// fc7's prior re-priced at SFB 200 ms against PS 10 (its rebuild exposed):
// 20 times apart, the cheaper path (PS) its own; fc6 (480 ms in all) is
// still tried first.
void LopsidedFc7(const std::vector<double>&, std::vector<TrialLayer>* layers) {
  for (TrialLayer& l : *layers)
    if (l.tensor == 7) l.sfb_s = 0.2;
}

TEST(SfbTrialsTest, AFirstRoundLeavesALayerWhosePriorIsLopsidedUntried) {
  // fc6 (prices 1.4 times apart) is tried as in the round above; fc7 is
  // not: the steady phase starts at clock 10, its reference over 10-12, the
  // first drift check at 17.
  Job job = RunJob(1, 30, Steady, Config(), LopsidedFc7);
  EXPECT_EQ(Describe(job.switches), "5@5:sfb ");
  EXPECT_EQ(job.agreements, (std::vector<int64_t>{2, 9, 17, 21, 25, 29}));
  ASSERT_EQ(job.log.size(), 2u);
  EXPECT_NE(job.log[0].find("HybComm clock 9: fc6/0 takes SFB from clock 10"), std::string::npos) << job.log[0];
  EXPECT_EQ(job.log[1],
            "HybComm clock 9: fc7/0 stays on PS without a trial: the prior prices PS 10.0 ms, SFB 200.0 ms per clock, "
            "more than 10x apart (sfb_trial_trust_ratio)");
  EXPECT_EQ(job.trials[0]->trial_clocks(), 5);
  EXPECT_EQ(job.trials[0]->Mark(13), "");
  // A ratio above theirs (or 0: try every layer) tries fc7 too.
  for (double ratio : {0.0, 25.0}) {
    SfbTrialsConfig config = Config();
    config.trust_ratio = ratio;
    Job tried = RunJob(1, 30, Steady, config, LopsidedFc7);
    EXPECT_EQ(Describe(tried.switches), "5@5:sfb 7@13:sfb 7@18:ps ") << "ratio " << ratio;
  }
  // Both layers lopsided the way they start: no trial at all, the steady
  // phase from the warm-up's agreement (clock 2) on.
  SfbTrials::Pricer both = [](const std::vector<double>&, std::vector<TrialLayer>* layers) {
    for (TrialLayer& l : *layers) l.sfb_s = 20 * l.ps_s;
  };
  Job none = RunJob(1, 12, Steady, Config(), both);
  EXPECT_EQ(Describe(none.switches), "");
  EXPECT_EQ(none.agreements, (std::vector<int64_t>{2, 9}));
  ASSERT_EQ(none.log.size(), 2u);
  EXPECT_NE(none.log[0].find("HybComm clock 2: fc6/0 stays on PS without a trial"), std::string::npos) << none.log[0];
  EXPECT_NE(none.log[1].find("HybComm clock 2: fc7/0 stays on PS without a trial"), std::string::npos) << none.log[1];
}

TEST(SfbTrialsTest, APriorThatPrefersTheOtherPathOrARetrialIsTried) {
  // fc7 priced 50 times cheaper as factors than through the servers, where
  // it starts (the start-up choice, made before the overlaps re-priced it):
  // tried, however lopsided, and first (1.02 s in all against fc6's 0.48);
  // back to PS (Steady: 0.15 s a clock as factors against 0.1), then fc6.
  SfbTrials::Pricer other = [](const std::vector<double>&, std::vector<TrialLayer>* layers) {
    for (TrialLayer& l : *layers)
      if (l.tensor == 7) l.ps_s = 50 * l.sfb_s;
  };
  Job job = RunJob(1, 30, Steady, Config(), other);
  EXPECT_EQ(Describe(job.switches), "7@5:sfb 7@10:ps 5@14:sfb ");
  // After a drift, every layer is tried again, the lopsided one too: fc7's
  // re-trial switches to factors at 41 (see DriftStartsANewRoundWithHysteresis).
  auto drift = [](int, int tensor, bool sfb, int64_t clock) {
    if (tensor == 5) return clock < 24 ? (sfb ? 0.8 : 1.0) : (sfb ? 2.0 : 1.2);
    return sfb ? 0.15 : 0.1;
  };
  Job retried = RunJob(1, 60, drift, Config(), LopsidedFc7);
  // The first round: fc6 tried, fc7 not; the drift (its reference over
  // 10-12 now) found at the check of 29; the re-trial: fc6 back to PS from
  // 32, fc7 tried from 40 (and back to PS, 1350 against 1300 ms).
  EXPECT_EQ(Describe(retried.switches), "5@5:sfb 5@32:ps 7@40:sfb 7@45:ps ");
  ASSERT_EQ(retried.log.size(), 5u);
  EXPECT_NE(retried.log[1].find("fc7/0 stays on PS without a trial"), std::string::npos) << retried.log[1];
  EXPECT_NE(retried.log[4].find("HybComm clock 44: fc7/0 takes PS from clock 45 (PS before the trial): measured PS "
                                "1300.0 ms, SFB 1350.0 ms"),
            std::string::npos)
      << retried.log[4];
}

TEST(SfbTrialsTest, WorkersThatMeasureDifferentlyTakeOneChoice) {
  // Alone, worker 0 would keep SFB for fc6 (0.6 against 1.0 s) and worker 1
  // would go back to PS (0.9 against 0.7 s). The job takes each path's
  // slowest worker: PS 1.0 + 0.1, SFB 0.9 + 0.1: SFB, on both.
  auto cost = [](int w, int tensor, bool sfb, int64_t) {
    if (tensor == 5) return w == 0 ? (sfb ? 0.6 : 1.0) : (sfb ? 0.9 : 0.7);
    return sfb ? 0.15 : 0.1;
  };
  Job job = RunJob(2, 20, cost);
  EXPECT_EQ(Describe(job.switches), "5@5:sfb 7@13:sfb 7@18:ps ");
  ASSERT_GE(job.log.size(), 1u);
  EXPECT_NE(
      job.log[0].find("fc6/0 takes SFB from clock 10 (PS before the trial): measured PS 1100.0 ms, SFB 1000.0 ms"),
      std::string::npos)
      << job.log[0];
  for (int w = 0; w < 2; ++w) EXPECT_TRUE(job.paths[w].At(5, 19));
  // Each alone: the other choice for worker 1.
  Job alone = RunJob(1, 20, [&](int, int t, bool s, int64_t c) { return cost(1, t, s, c); });
  EXPECT_EQ(Describe(alone.switches), "5@5:sfb 5@10:ps 7@14:sfb 7@19:ps ");
}

TEST(SfbTrialsTest, ATieGoesToThePriorsPath) {
  // fc6 costs the same either way; its prior prefers PS (200 < 280 ms): back
  // to PS. A prior that prefers SFB keeps it.
  auto cost = [](int, int tensor, bool sfb, int64_t) { return tensor == 5 ? 1.0 : (sfb ? 0.15 : 0.1); };
  Job ps = RunJob(1, 12, cost);
  EXPECT_EQ(Describe(ps.switches), "5@5:sfb 5@10:ps ");
  EXPECT_NE(ps.log[0].find("a tie goes to the prior's path"), std::string::npos) << ps.log[0];
  // The pricer re-prices fc6 at SFB 150 ms (its rebuild hidden by the backward below it).
  SfbTrials::Pricer cheap = [](const std::vector<double>& overlaps, std::vector<TrialLayer>* layers) {
    ASSERT_EQ(overlaps.size(), 2u);
    for (TrialLayer& l : *layers)
      if (l.tensor == 5) l.sfb_s = 0.15;
  };
  Job sfb = RunJob(1, 12, cost, Config(), cheap);
  EXPECT_EQ(Describe(sfb.switches), "5@5:sfb ");
}

TEST(SfbTrialsTest, TheJobsOverlapsAreTheSmallestAndRepriceTheOrder) {
  // Worker 0 measured 0.3 s of backward below fc7 and 0.2 below fc6, worker 1
  // 0.25 and 0.4: the job takes 0.25 and 0.2. The pricer makes fc7 the
  // larger stake, so it is tried first.
  std::vector<std::vector<double>> seen;
  SfbTrials::Pricer pricer = [&](const std::vector<double>& overlaps, std::vector<TrialLayer>* layers) {
    seen.push_back(overlaps);
    for (TrialLayer& l : *layers)
      if (l.tensor == 7) l.ps_s = 5;
  };
  std::vector<std::unique_ptr<SfbTrials>> t;
  for (int w = 0; w < 2; ++w) t.push_back(std::make_unique<SfbTrials>(Config(), Layers(), pricer));
  t[0]->set_overlaps({0.3, 0.2});
  t[1]->set_overlaps({0.25, 0.4});
  std::vector<std::string> log;
  for (int64_t c = 0; c < 2; ++c)
    for (auto& x : t) {
      EXPECT_FALSE(x->Begin(c, 1, {0, 0}).agree);
      EXPECT_TRUE(x->Decide(c, {}, &log).empty());
    }
  const TrialStep a = t[0]->Begin(2, 1, {0, 0}), b = t[1]->Begin(2, 1, {0, 0});
  ASSERT_TRUE(a.agree);
  EXPECT_EQ(a.proposal, (std::vector<double>{0.3, 0.2}));
  const std::vector<double> reduced = {std::min(a.proposal[0], b.proposal[0]), std::min(a.proposal[1], b.proposal[1])};
  for (auto& x : t) x->Decide(2, reduced, &log);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<double>{0.25, 0.2}));
  EXPECT_EQ(t[0]->agreed_overlaps(), (std::vector<double>{0.25, 0.2}));
  EXPECT_EQ(t[0]->order(), (std::vector<int>{0, 1}));  // fc7 (index 0) first now.
  EXPECT_EQ(t[0]->Mark(2), "HybComm trial: fc7/0 baseline on PS");
}

TEST(SfbTrialsTest, DriftStartsANewRoundWithHysteresis) {
  // From clock 24 a host slows down: fc6 as factors costs 2.0 s, through the
  // servers 1.2 s. The clocks from 24 (fc6 on SFB, fc7 on PS: 2.1 s against
  // the 0.9 s measured over 19-21) drift by more than 25%; the check at 26
  // finds 2, the one at 30 finds 6 on every worker and starts a round: fc6
  // baseline 30-32 on SFB, PS from 33, measured 34-36, decided at 37 (1.3 s
  // against 2.1: PS). fc7 from 38: SFB from 41, decided at 45 (1.35 against
  // 1.3): back to PS from 46.
  auto cost = [](int, int tensor, bool sfb, int64_t clock) {
    if (tensor == 5) return clock < 24 ? (sfb ? 0.8 : 1.0) : (sfb ? 2.0 : 1.2);
    return sfb ? 0.15 : 0.1;
  };
  Job job = RunJob(2, 60, cost);
  EXPECT_EQ(Describe(job.switches), "5@5:sfb 7@13:sfb 7@18:ps 5@33:ps 7@41:sfb 7@46:ps ");
  ASSERT_EQ(job.log.size(), 5u);
  EXPECT_EQ(job.log[2],
            "HybComm clock 30: the clock's period drifted from 900.0 ms, its median after the last round, by more "
            "than 25% and 1.0 ms for 6 clocks on every worker (now 2100.0 ms on the slowest): trying the layers "
            "again");
  EXPECT_EQ(job.log[3],
            "HybComm clock 37: fc6/0 takes PS from clock 38 (SFB before the trial): measured PS 1300.0 ms, SFB 2100.0 "
            "ms per clock (the slowest worker's median of 3 clocks each; a re-trial switches only for more than 5% "
            "less); its own wait in WaitWeights PS 120.0 ms, SFB 200.0 ms; prior PS 200.0 ms, SFB 280.0 ms "
            "(re-trial)");
  EXPECT_EQ(job.trials[0]->rounds(), 2);
  // After it, the period (1.3 s) stays where the round left it: no third
  // round.
  EXPECT_FALSE(job.paths[0].At(5, 59));
}

// Clocks of a few milliseconds: the drift is measured against a floor of
// 1 ms as well as 25% of the reference, so that a noisy machine's jitter
// starts no round. The first round is the one above at a thousandth of the
// cost (fc6 on SFB, fc7 on PS: a reference of 0.9 ms); from clock 24 fc6 as
// factors costs `from24` more.
TEST(SfbTrialsTest, DriftIsMeasuredAgainstAFloorInAbsoluteTime) {
  auto run = [](double from24) {
    auto cost = [from24](int, int tensor, bool sfb, int64_t clock) {
      if (tensor == 5) return sfb ? 0.0008 + (clock < 24 ? 0 : from24) : 0.001;
      return sfb ? 0.00015 : 0.0001;
    };
    return RunJob(2, 60, cost);
  };
  // 0.9 ms more (0.9 -> 1.8 ms): over 25% of the reference, under 1 ms.
  Job jitter = run(0.0009);
  EXPECT_EQ(Describe(jitter.switches), "5@5:sfb 7@13:sfb 7@18:ps ");
  EXPECT_EQ(jitter.trials[0]->rounds(), 1);
  // 1.1 ms more (to 2.0 ms): over both, a new round (fc6 back to PS, 1.0 ms
  // against 1.9).
  Job drift = run(0.0011);
  EXPECT_EQ(drift.trials[0]->rounds(), 2);
  ASSERT_GE(drift.log.size(), 3u);
  EXPECT_EQ(drift.log[2],
            "HybComm clock 30: the clock's period drifted from 0.9 ms, its median after the last round, by more than "
            "25% and 1.0 ms for 6 clocks on every worker (now 2.0 ms on the slowest): trying the layers again");
  EXPECT_FALSE(drift.paths[0].At(5, 59));
}

TEST(SfbTrialsTest, ARetrialNeedsMoreThanTheMargin) {
  // After the drift, fc6 on PS would be 4% shorter than on SFB: a first
  // round would switch, a re-trial does not (hysteresis).
  auto cost = [](int, int tensor, bool sfb, int64_t clock) {
    if (tensor == 5) return clock < 24 ? (sfb ? 0.8 : 1.0) : (sfb ? 2.0 : 2.0 * 0.96 - 0.004);
    return sfb ? 0.15 : 0.1;
  };
  Job job = RunJob(1, 44, cost);
  EXPECT_EQ(Describe(job.switches), "5@5:sfb 7@13:sfb 7@18:ps 5@33:ps 5@38:sfb 7@42:sfb ");
  ASSERT_GE(job.log.size(), 4u);
  EXPECT_NE(job.log[3].find("fc6/0 takes SFB from clock 38 (SFB before the trial)"), std::string::npos) << job.log[3];
}

TEST(SfbTrialsTest, AClockWithoutFiguresGoesBackToTheBaseline) {
  // A worker that measured nothing proposes NaN, which the reduction
  // ignores; if nobody measured, the layer goes back to its baseline path.
  auto t = std::make_unique<SfbTrials>(Config(), Layers());
  std::vector<std::string> log;
  std::vector<TrialSwitch> all;
  for (int64_t c = 0; c < 12; ++c) {
    const TrialStep s = t->Begin(c, -1, {});
    std::vector<double> reduced = s.proposal;
    for (double v : reduced) EXPECT_TRUE(c == 2 || std::isnan(v)) << c;
    for (const TrialSwitch& x : t->Decide(c, reduced, &log)) all.push_back(x);
  }
  EXPECT_EQ(Describe(all), "5@5:sfb 5@10:ps ");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("measured PS ?, SFB ? per clock"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("a window was not measured: back to the baseline"), std::string::npos) << log[0];
}

TEST(SfbPathsTest, SwitchesAtClockBoundaries) {
  SfbPaths p;
  p.Reset(3, {false, true});
  EXPECT_FALSE(p.At(0, 0));
  EXPECT_TRUE(p.At(1, 3));
  p.Set(0, 6, true);
  p.Set(0, 9, false);
  p.Set(1, 9, true);  // Already SFB: no switch.
  EXPECT_FALSE(p.At(0, 5));
  EXPECT_TRUE(p.At(0, 6));
  EXPECT_TRUE(p.At(0, 8));
  EXPECT_FALSE(p.At(0, 9));
  EXPECT_EQ(p.switches(), 2);
  EXPECT_TRUE(p.WeightsFromServers(0, 3));   // The first clock.
  EXPECT_TRUE(p.WeightsFromServers(0, 6));   // Clock 5 went through the servers.
  EXPECT_FALSE(p.WeightsFromServers(0, 7));  // Clock 6 went as factors.
  EXPECT_FALSE(p.WeightsFromServers(0, 9));
  EXPECT_TRUE(p.WeightsFromServers(0, 10));
  EXPECT_EQ(p.SfbTensors(7), (std::vector<int>{0, 1}));
  EXPECT_EQ(p.SfbTensors(9), (std::vector<int>{1}));
  EXPECT_FALSE(p.At(7, 4));  // Not a tensor of this job.
}

TEST(SfbPathsTest, ParsesForcedSchedules) {
  auto s = ParseSfbSchedule("fc6:10:sfb,fc6/0:20:ps");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].layer, "fc6");
  EXPECT_EQ((*s)[0].clock, 10);
  EXPECT_TRUE((*s)[0].sfb);
  EXPECT_EQ((*s)[1].layer, "fc6/0");
  EXPECT_FALSE((*s)[1].sfb);
  EXPECT_TRUE(ParseSfbSchedule("")->empty());
  for (const auto& [text, why] :
       std::vector<std::pair<std::string, std::string>>{{"fc6:10", "\"fc6:10\" is not layer:clock:path"},
                                                        {"fc6:x:sfb", "\"fc6:x:sfb\" has no clock >= 0"},
                                                        {"fc6:-1:sfb", "has no clock >= 0"},
                                                        {":3:ps", "names no layer"},
                                                        {"fc6:3:gpu", "has path \"gpu\""},
                                                        {"fc6:3:ps,", "\"\" is not layer:clock:path"}}) {
    auto bad = ParseSfbSchedule(text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status();
  }
  EXPECT_TRUE(ScheduleNames("fc6", "fc6/0"));
  EXPECT_TRUE(ScheduleNames("fc6/0", "fc6/0"));
  EXPECT_FALSE(ScheduleNames("fc6", "fc60/0"));
  EXPECT_FALSE(ScheduleNames("fc6", "fc"));
}

}  // namespace
}  // namespace nereus

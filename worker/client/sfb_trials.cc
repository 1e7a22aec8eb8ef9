#include "worker/client/sfb_trials.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <utility>

namespace nereus {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Ms(double s) {
  if (!std::isfinite(s)) return "?";
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f ms", s * 1e3);
  return b;
}

const char* PathName(bool sfb) { return sfb ? "SFB" : "PS"; }

}  // namespace

SfbTrials::SfbTrials(const SfbTrialsConfig& config, std::vector<TrialLayer> layers, Pricer pricer)
    : config_(config), layers_(std::move(layers)), pricer_(std::move(pricer)), waits_(layers_.size()) {
  Order();
}

std::string SfbTrials::Name(int layer) const { return layers_[layer].name; }

void SfbTrials::Order() {
  order_.resize(layers_.size());
  std::iota(order_.begin(), order_.end(), 0);
  // The layer whose paths cost the most first; ties keep the registration order.
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
    return layers_[a].ps_s + layers_[a].sfb_s > layers_[b].ps_s + layers_[b].sfb_s;
  });
}

double SfbTrials::Median(const std::map<int64_t, double>& by_clock, int64_t from, int64_t to) {
  std::vector<double> v;
  for (int64_t c = from; c < to; ++c) {
    auto it = by_clock.find(c);
    if (it != by_clock.end() && it->second >= 0) v.push_back(it->second);
  }
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void SfbTrials::StartTrial(int order_index, int64_t baseline) {
  order_index_ = order_index;
  trial_.layer = order_[order_index];
  trial_.baseline = baseline;
  trial_.switch_at = baseline + config_.measure;
  trial_.decide_at = trial_.switch_at + config_.settle + config_.measure;
  trial_.from_sfb = layers_[trial_.layer].sfb;
  const std::string n = Name(trial_.layer);
  const bool p = trial_.from_sfb;
  for (int64_t c = trial_.baseline; c < trial_.switch_at; ++c)
    marks_[c] = "HybComm trial: " + n + " baseline on " + PathName(p);
  for (int64_t c = trial_.switch_at; c < trial_.switch_at + config_.settle; ++c)
    marks_[c] = "HybComm trial: " + n + " on " + PathName(!p) + ", settling";
  for (int64_t c = trial_.switch_at + config_.settle; c < trial_.decide_at; ++c)
    marks_[c] = "HybComm trial: " + n + " measured on " + PathName(!p);
  marks_[trial_.decide_at] = "HybComm trial: " + n + " decided";
}

bool SfbTrials::Trusted(int layer) const {
  const TrialLayer& l = layers_[layer];
  if (retrial_ || !(config_.trust_ratio > 0) || !(l.ps_s > 0 || l.sfb_s > 0)) return false;
  const bool prior_sfb = l.sfb_s <= l.ps_s;
  const double cheap = prior_sfb ? l.sfb_s : l.ps_s, dear = prior_sfb ? l.ps_s : l.sfb_s;
  return prior_sfb == l.sfb && dear > config_.trust_ratio * cheap;
}

void SfbTrials::NextTrial(int order_index, int64_t baseline, int64_t clock, std::vector<std::string>* log) {
  for (; order_index < static_cast<int>(order_.size()); ++order_index) {
    const int l = order_[order_index];
    if (!Trusted(l)) {
      StartTrial(order_index, baseline);
      return;
    }
    char line[512];
    std::snprintf(line, sizeof(line),
                  "HybComm clock %lld: %s stays on %s without a trial: the prior prices PS %s, SFB %s per clock, "
                  "more than %gx apart (sfb_trial_trust_ratio)",
                  static_cast<long long>(clock), Name(l).c_str(), PathName(layers_[l].sfb), Ms(layers_[l].ps_s).c_str(),
                  Ms(layers_[l].sfb_s).c_str(), config_.trust_ratio);
    log->push_back(line);
  }
  phase_ = Phase::kSteady;
  steady_from_ = baseline;
  ref_s_ = 0;
  next_check_ = baseline + config_.measure + config_.check_every;
  drifted_ = 0;
}

void SfbTrials::StartRound(int64_t baseline, bool retrial, std::vector<std::string>* log) {
  phase_ = Phase::kTrial;
  retrial_ = retrial;
  ++rounds_;
  NextTrial(0, baseline, baseline, log);
}

TrialStep SfbTrials::Begin(int64_t clock, double period_s, const std::vector<double>& waits_s) {
  if (period_s >= 0) periods_[clock - 1] = period_s;
  for (size_t i = 0; i < waits_s.size() && i < waits_.size(); ++i) waits_[i][clock - 1] = waits_s[i];
  TrialStep step;
  switch (phase_) {
    case Phase::kWarmup:
      if (clock == config_.start_clock + config_.warmup) {
        // The prior's agreement: every worker's overlaps, the job's smallest.
        step.agree = true;
        step.what = "the overlap of each layer's rebuild with the backward (the prior's order)";
        for (size_t i = 0; i < layers_.size(); ++i)
          step.proposal.push_back(i < own_overlaps_.size() ? own_overlaps_[i] : 0.0);
      }
      break;
    case Phase::kTrial:
      if (clock == trial_.decide_at) {
        const int l = trial_.layer;
        step.agree = true;
        step.what = "the trial of " + Name(l);
        // Negated: the minimum of the negations is the largest figure.
        const double base = Median(periods_, trial_.baseline, trial_.switch_at);
        const double alt = Median(periods_, trial_.switch_at + config_.settle, trial_.decide_at);
        const double base_wait = Median(waits_[l], trial_.baseline, trial_.switch_at);
        const double alt_wait = Median(waits_[l], trial_.switch_at + config_.settle, trial_.decide_at);
        step.proposal = {-base, -alt, -base_wait, -alt_wait};
      }
      break;
    case Phase::kSteady:
      if (clock - 1 == steady_from_ + config_.measure - 1) {
        // The reference: this worker's median of the first clocks after the
        // round, settled (a trial's window can still carry the switch's
        // traffic).
        ref_s_ = Median(periods_, steady_from_, steady_from_ + config_.measure);
      } else if (clock - 1 >= steady_from_ + config_.measure && period_s >= 0 && ref_s_ > 0) {
        const double margin_s = std::max(config_.drift_margin * ref_s_, config_.drift_floor_s);
        drifted_ = std::fabs(period_s - ref_s_) > margin_s ? drifted_ + 1 : 0;
      }
      if (clock == next_check_) {
        step.agree = true;
        step.what = "whether the clock's period drifted";
        step.proposal = {static_cast<double>(drifted_), period_s >= 0 ? -period_s : kNaN};
      }
      break;
  }
  for (double& v : step.proposal)
    if (!std::isfinite(v)) v = kNaN;
  return step;
}

std::vector<TrialSwitch> SfbTrials::Decide(int64_t clock, const std::vector<double>& reduced,
                                           std::vector<std::string>* log) {
  std::vector<TrialSwitch> out;
  char line[1024];
  switch (phase_) {
    case Phase::kWarmup:
      if (clock == config_.start_clock + config_.warmup) {
        agreed_overlaps_.assign(layers_.size(), 0.0);
        for (size_t i = 0; i < layers_.size() && i < reduced.size(); ++i)
          agreed_overlaps_[i] = std::isfinite(reduced[i]) ? std::max(0.0, reduced[i]) : 0.0;
        if (pricer_) pricer_(agreed_overlaps_, &layers_);
        Order();
        StartRound(clock, /*retrial=*/false, log);
      }
      break;
    case Phase::kTrial:
      if (clock == trial_.decide_at) {
        const int l = trial_.layer;
        TrialLayer& layer = layers_[l];
        auto get = [&](size_t i) { return i < reduced.size() ? -reduced[i] : kNaN; };
        const double base = get(0), alt = get(1), base_wait = get(2), alt_wait = get(3);
        const bool p = trial_.from_sfb;
        const double ps = p ? alt : base, sfb = p ? base : alt;
        bool keep_alt;
        std::string rule;
        if (!std::isfinite(base) || !std::isfinite(alt)) {
          keep_alt = false;
          rule = "a window was not measured: back to the baseline";
        } else if (retrial_) {
          keep_alt = alt < base * (1 - config_.switch_margin);
          std::snprintf(line, sizeof(line), "a re-trial switches only for more than %.0f%% less",
                        config_.switch_margin * 100);
          rule = line;
        } else {
          const bool priced = layer.ps_s > 0 || layer.sfb_s > 0;
          const bool prior_sfb = priced ? layer.sfb_s <= layer.ps_s : p;
          keep_alt = alt < base || (alt == base && prior_sfb != p);
          rule = alt == base ? "a tie goes to the prior's path" : "the shorter clock wins";
        }
        const bool chosen = keep_alt ? !p : p;
        const bool priced = layer.ps_s > 0 || layer.sfb_s > 0;
        std::snprintf(line, sizeof(line),
                      "HybComm clock %lld: %s takes %s from clock %lld (%s before the trial): measured PS %s, SFB %s "
                      "per clock (the "
                      "slowest worker's median of %d clocks each; %s); its own wait in WaitWeights PS %s, SFB %s; "
                      "prior PS %s, SFB %s%s",
                      static_cast<long long>(clock), Name(l).c_str(), PathName(chosen),
                      static_cast<long long>(clock + 1), PathName(p), Ms(ps).c_str(), Ms(sfb).c_str(), config_.measure,
                      rule.c_str(), Ms(p ? alt_wait : base_wait).c_str(), Ms(p ? base_wait : alt_wait).c_str(),
                      priced ? Ms(layer.ps_s).c_str() : "-", priced ? Ms(layer.sfb_s).c_str() : "-",
                      retrial_ ? " (re-trial)" : "");
        log->push_back(line);
        trial_clocks_ += trial_.decide_at - trial_.switch_at + 1;
        layer.sfb = chosen;
        int64_t next = clock + 1;
        if (!keep_alt) {
          out.push_back({layer.tensor, clock + 1, p});  // Back to the baseline's path.
          trial_clocks_ += config_.settle;
          next += config_.settle;
        }
        NextTrial(order_index_ + 1, next, clock, log);
      }
      break;
    case Phase::kSteady:
      if (clock == next_check_) {
        const double count = reduced.empty() ? 0 : reduced[0];
        const double period = reduced.size() > 1 ? -reduced[1] : kNaN;
        if (std::isfinite(count) && count >= config_.drift_clocks) {
          std::snprintf(line, sizeof(line),
                        "HybComm clock %lld: the clock's period drifted from %s, its median after the last round, "
                        "by more than %.0f%% and %s for %d clocks on every worker (now %s on the slowest): trying "
                        "the layers again",
                        static_cast<long long>(clock), Ms(ref_s_).c_str(), config_.drift_margin * 100,
                        Ms(config_.drift_floor_s).c_str(), static_cast<int>(count), Ms(period).c_str());
          log->push_back(line);
          StartRound(clock, /*retrial=*/true, log);
        } else {
          next_check_ = clock + config_.check_every;
        }
      }
      break;
  }
  // The switch to a trial's alternative, decided one clock ahead.
  if (phase_ == Phase::kTrial && clock + 1 == trial_.switch_at)
    out.push_back({layers_[trial_.layer].tensor, trial_.switch_at, !trial_.from_sfb});
  return out;
}

std::string SfbTrials::Mark(int64_t clock) const {
  auto it = marks_.find(clock);
  return it == marks_.end() ? "" : it->second;
}

}  // namespace nereus

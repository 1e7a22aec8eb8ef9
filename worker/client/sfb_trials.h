// SfbTrials: HybComm's measured choice (docs/ARCHITECTURE.md, "HybComm").
// For each layer that can go either way (a tensor with factors, under BSP),
// after a warm-up, the job runs the layer on each path for a few clocks and
// keeps the one whose clocks were shorter; it tries the layers again when
// the clock's period drifts. Pure: no lock, no network, no clock of its
// own. The client (LayerPipeline) calls it at the start of every clock
// with what the last clock cost, runs the agreements it asks for through
// the "nereus.hybcomm.<clock>" min-reduce barriers and applies the
// switches it returns; tests drive it with injected figures.
//
// What is measured: the clock's period, its busy span, from the first
// WaitWeights (or GradientsReady) of clock c to the end of the last call of
// clock c (the iteration as the client sees it: its compute and every wait
// in it; not what the trainer does between iterations, a test phase, a
// snapshot, a pause, which would cost both paths alike). A layer's path moves the other
// layers' waits too (its bytes share their link and servers, its rebuild
// their host), so the period, not the layer's own wait, is what a path
// costs; the layer's own wait in WaitWeights is logged beside it. A clock
// measures the path its layer took in it and in the clock before (the
// forward of c waits for the weights the gradients of c - 1 made), so the
// first clock after a switch is not measured (`settle`).
//
// The schedule of one round of trials, layer by layer in the prior's order
// (the start-up model, HybComm's cost table, re-priced at the end of the
// warm-up with the agreed overlap of each layer's rebuild with the backward
// below it: the layer whose paths cost the most first), a layer on path P
// with Q the other:
//   [b, b + measure)         baseline: P, measured
//   x = b + measure          Q from here (decided at the start of x - 1)
//   [x, x + settle)          Q, not measured
//   [x + settle, e)          Q, measured (e = x + settle + measure)
//   e                        agreement: every worker proposes its medians
//                            of both windows; the job takes the largest of
//                            each (the slowest worker bounds a BSP clock)
//                            and keeps Q iff its median is lower (a first
//                            round; a tie keeps the prior's path), or lower
//                            by more than `switch_margin` (a re-trial:
//                            hysteresis). Q or P from e + 1.
//   the next layer's baseline starts at e + 1, or e + 1 + settle after a
//   switch back.
// A first round leaves untried a layer whose prior's two prices are more
// than `trust_ratio` apart, the cheaper path being the one it is on (one
// log line says so): a trial would only confirm it, running the slower path
// for settle + measure + 1 clocks (VGG-19 at 1 Gbit/s: fc6 7 times slower a
// clock through the servers, the trials 3.6% of a 1000-clock job). The
// priors are the same on every worker (agreed rates and overlaps), so every
// worker skips alike. A re-trial tries every layer: the drift that started it
// is what the prior did not see.
//
// Paths are decided one clock ahead (at the start of clock c - 1 for clock
// c), so every worker knows a clock's path before any peer can send it
// factors of that clock.
//
// After a round, the clock's period is watched against its median over the
// round's first `measure` settled clocks (`ref`, each worker its own): a
// clock whose period is off by more than `drift_margin` of it, and by more
// than `drift_floor_s` (so that the jitter of a noisy machine's clocks of a
// few milliseconds is not taken for a drift), is drifted;
// every `check_every` clocks (the first after those `measure`) the workers
// agree on their counts of consecutive drifted clocks, and when every one
// has at least `drift_clocks` (the link was reshaped, a host slowed down)
// a new round of trials starts, with the hysteresis above.
//
// Every decision is one log line with the figures that made it.
#ifndef NEREUS_WORKER_CLIENT_SFB_TRIALS_H_
#define NEREUS_WORKER_CLIENT_SFB_TRIALS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace nereus {

struct SfbTrialsConfig {
  int64_t start_clock = 0;       // The job's first clock.
  int warmup = 5;                // Clocks before the first round (merging is planned in them, caches warm up).
  int measure = 3;               // Clocks measured on each path (their median).
  int settle = 1;                // Clocks after a switch not measured (>= 1).
  double switch_margin = 0.05;   // A re-trial keeps the other path only if it is this much faster.
  double drift_margin = 0.25;    // A clock whose period is off the reference by more than this is drifted,
  double drift_floor_s = 0.001;  // if it is off by more than this too (seconds).
  int drift_clocks = 5;          // Consecutive drifted clocks, on every worker, that start a new round.
  int check_every = 10;          // Clocks between the drift agreements.
  double trust_ratio = 10;       // A first round skips a layer whose prior's prices are this far apart (0: never).
};

// A layer that can go either way, and its start-up price (for the prior's
// order and the log).
struct TrialLayer {
  int tensor = -1;
  std::string name;
  bool sfb = false;  // Its path at the start (the start-up choice).
  double ps_s = 0;   // The start-up model's cost of each path, per clock
  double sfb_s = 0;  // (0 when unpriced).
};

// What this worker does at the start of a clock, before it goes on.
struct TrialStep {
  bool agree = false;            // Pass an agreement (a min-reduce barrier) first.
  std::string what;              // What it is about, for the barrier's name and errors.
  std::vector<double> proposal;  // This worker's values (NaN: none; the reduction ignores it).
};

// A path switch taking effect at `clock`.
struct TrialSwitch {
  int tensor = -1;
  int64_t clock = 0;
  bool sfb = false;
};

class SfbTrials {
 public:
  // Re-prices the layers' ps_s and sfb_s with the job's agreed overlaps
  // (per layer, in the constructor's order): the start-up model counting
  // the rebuild's overlap with the backward below each layer. Null: the
  // start-up prices stay.
  using Pricer = std::function<void(const std::vector<double>& overlaps_s, std::vector<TrialLayer>* layers)>;

  SfbTrials(const SfbTrialsConfig& config, std::vector<TrialLayer> layers, Pricer pricer = nullptr);

  // Clock `clock` starts (its first WaitWeights). `period_s`: how long clock
  // - 1 took (negative: unknown); `waits_s`: per layer (in the constructor's
  // order), how long WaitWeights of clock - 1 blocked on it. Clocks must
  // come one after the other.
  TrialStep Begin(int64_t clock, double period_s, const std::vector<double>& waits_s);
  // After Begin, every clock: `reduced` the element-wise minimum of every
  // worker's proposal (empty if Begin asked for no agreement). Returns the
  // switches decided for clock + 1 and appends a log line per decision to
  // `log`.
  std::vector<TrialSwitch> Decide(int64_t clock, const std::vector<double>& reduced, std::vector<std::string>* log);

  // What this worker proposes at the prior's agreement (the start of clock
  // start + warmup), per layer: the backward time below the layer, which its
  // rebuild overlaps (the job takes the smallest). The caller measures it
  // from its GradientsReady times; default 0.
  void set_overlaps(const std::vector<double>& overlaps_s) { own_overlaps_ = overlaps_s; }
  // The agreed overlaps, once the prior's agreement passed (else empty).
  const std::vector<double>& agreed_overlaps() const { return agreed_overlaps_; }
  const std::vector<TrialLayer>& layers() const { return layers_; }

  // For the timeline: what clock `clock` is in the trials ("" if nothing).
  std::string Mark(int64_t clock) const;
  // Clocks run on a path under trial (the alternative, its settling and a
  // switch back's), and rounds started.
  int64_t trial_clocks() const { return trial_clocks_; }
  int rounds() const { return rounds_; }
  // The layers in the order of the trials (indices into the constructor's).
  const std::vector<int>& order() const { return order_; }

 private:
  enum class Phase { kWarmup, kTrial, kSteady };
  struct Trial {
    int layer = -1;  // Index into layers_.
    int64_t baseline = 0, switch_at = 0, decide_at = 0;
    bool from_sfb = false;
  };
  static double Median(const std::map<int64_t, double>& by_clock, int64_t from, int64_t to);
  void Order();  // order_ by the layers' prices.
  void StartTrial(int order_index, int64_t baseline);
  void StartRound(int64_t baseline, bool retrial, std::vector<std::string>* log);
  // Whether a first round leaves layer `layer` on its path untried (its
  // prior's prices more than config_.trust_ratio apart, the cheaper path
  // its own).
  bool Trusted(int layer) const;
  // The trial of the first layer from order_[order_index] on that is not
  // Trusted (each skipped one logged, at `clock`), its baseline from
  // `baseline`; the steady phase from `baseline` if none is left.
  void NextTrial(int order_index, int64_t baseline, int64_t clock, std::vector<std::string>* log);
  std::string Name(int layer) const;

  const SfbTrialsConfig config_;
  std::vector<TrialLayer> layers_;
  const Pricer pricer_;
  std::vector<int> order_;
  Phase phase_ = Phase::kWarmup;
  bool retrial_ = false;
  int order_index_ = -1;
  Trial trial_;
  std::map<int64_t, double> periods_;             // Clock -> its period.
  std::vector<std::map<int64_t, double>> waits_;  // Per layer: clock -> its wait.
  std::vector<double> own_overlaps_, agreed_overlaps_;
  double ref_s_ = 0;  // This worker's median period of the first `measure` clocks after the last round (0: not yet).
  int64_t steady_from_ = 0, next_check_ = 0;
  int drifted_ = 0;  // Consecutive drifted clocks, this worker.
  int64_t trial_clocks_ = 0;
  int rounds_ = 0;
  std::map<int64_t, std::string> marks_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_SFB_TRIALS_H_

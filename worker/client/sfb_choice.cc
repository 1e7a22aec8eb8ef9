#include "worker/client/sfb_choice.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "common/update/compute_rates.h"

namespace nereus {

StatusOr<SfbPlan> SfbChoice::Choose(const pb::SgdConfig& sgd, bool layered) {
  const int rank = node_->rank();
  const int num_workers = node_->job().num_workers();
  const int num_servers = node_->job().num_servers();
  const int64_t start = node_->job().start_clock();
  std::vector<int> eligible;
  std::vector<FcLayerShape> shapes;
  for (int t = 0; t < tensors_->size(); ++t) {
    const TensorSpec& s = tensors_->spec(t);
    if (s.factor_rows <= 0) continue;
    eligible.push_back(t);
    shapes.push_back({s.name, s.shape[0], s.shape[1], s.factor_rows});
  }
  if (eligible.empty()) {
    if (!options_.sfb_schedule.empty())
      return InvalidArgumentError("--sfb_schedule \"" + options_.sfb_schedule +
                                  "\": no tensor of this job has sufficient factors");
    return SfbPlan();
  }
  if (!layered)
    return InvalidArgumentError("tensor \"" + tensors_->spec(eligible[0]).name +
                                "\" has factors but not every tensor has data and diff buffers (the layer-wise API)");
  // The forced schedule, by tensor.
  ASSIGN_OR_RETURN(std::vector<SfbScheduleEntry> schedule, ParseSfbSchedule(options_.sfb_schedule));
  std::vector<std::pair<int, SfbScheduleEntry>> forced;
  for (const SfbScheduleEntry& e : schedule) {
    bool named = false;
    for (int t : eligible) {
      if (!ScheduleNames(e.layer, tensors_->spec(t).name)) continue;
      forced.emplace_back(t, e);
      named = true;
    }
    if (!named) {
      std::string names;
      for (int t : eligible) names += (names.empty() ? "" : ", ") + tensors_->spec(t).name;
      return InvalidArgumentError("--sfb_schedule names \"" + e.layer +
                                  "\", which is no tensor with sufficient factors (those are " + names + ")");
    }
  }
  std::stable_sort(forced.begin(), forced.end(),
                   [](const auto& a, const auto& b) { return a.second.clock < b.second.clock; });
  SfbMode mode = options_.sfb;
  std::string no_sfb;  // Why no tensor may travel as factors in this job, if so.
  if (sgd.type() != pb::SOLVER_SGD) {
    // ApplySufficientFactors runs Caffe's SGD step only.
    if (mode == SfbMode::kOn)
      return InvalidArgumentError("--sfb=on supports solver type SGD only, got " + pb::SolverType_Name(sgd.type()));
    if (rank == 0)
      LOG(INFO) << "worker 0: solver " << pb::SolverType_Name(sgd.type())
                << ": every tensor goes through the servers (SFB applies SGD only)";
    no_sfb = "solver type " + pb::SolverType_Name(sgd.type()) + " (SFB applies SGD only)";
    mode = SfbMode::kOff;
  }
  if (start > 0) {
    // A resumed job restarts from the servers' checkpoint; SFB replicas are not in it.
    if (mode == SfbMode::kOn)
      return InvalidArgumentError("--sfb=on cannot resume a job from a checkpoint (use --sfb=off or auto)");
    if (rank == 0) LOG(INFO) << "worker 0: resumed job: every tensor goes through the servers (--sfb=off)";
    no_sfb = "a resumed job";
    mode = SfbMode::kOff;
  } else if (node_->job().checkpoint_every() > 0) {
    // The servers checkpoint what they hold; SFB replicas would be missing from it.
    if (mode == SfbMode::kOn)
      return InvalidArgumentError("--sfb=on cannot be used while the servers checkpoint (--checkpoint_every=" +
                                  std::to_string(node_->job().checkpoint_every()) +
                                  "): SFB replicas are not in the checkpoints (use --sfb=off or auto)");
    if (rank == 0) LOG(INFO) << "worker 0: servers checkpoint: every tensor goes through the servers (--sfb=off)";
    no_sfb = "servers that checkpoint";
    mode = SfbMode::kOff;
  }
  const pb::Consistency consistency = node_->job().consistency();
  const bool bsp = consistency == pb::BSP || consistency == pb::CONSISTENCY_UNSPECIFIED;
  if (!forced.empty() && !bsp)
    return InvalidArgumentError(
        "--sfb_schedule needs --consistency=bsp: a layer changes path at a clock boundary, "
        "which " +
        pb::Consistency_Name(consistency) + " does not have");
  if (!forced.empty() && !no_sfb.empty()) return InvalidArgumentError("--sfb_schedule cannot be used with " + no_sfb);
  // Paths may change only where every rebuild can take part.
  const FactorApplier* applier = Applier();
  const bool switchable = bsp && no_sfb.empty() && (applier == nullptr || applier->switchable());
  if (!forced.empty() && !switchable)
    return InvalidArgumentError("--sfb_schedule: the sufficient factors' applier (" + applier->rebuild_on() +
                                ") cannot switch a tensor's path");
  const bool trials = mode == SfbMode::kAuto && options_.sfb_trial_clocks > 0 && forced.empty() && switchable;
  if (rank == 0 && mode == SfbMode::kAuto && options_.sfb_trial_clocks > 0 && forced.empty() && !trials) {
    LOG(INFO) << "worker 0: HybComm's measured switching "
              << (!bsp ? "needs BSP: under " + pb::Consistency_Name(consistency) +
                             " every tensor stays on the servers, with no trials"
                       : "is off: the sufficient factors' applier (" + applier->rebuild_on() +
                             ") cannot switch a tensor's path; the start-up choice stays");
  }
  HybCommRates rates;
  std::vector<double> values;  // Sent to the barrier only when auto prices the layers.
  if (mode == SfbMode::kAuto && bsp) {
    ASSIGN_OR_RETURN(rates, OwnRates());
    values = {rates.link_bytes_per_s, rates.rebuild_flops_per_s, rates.update_bytes_per_s, rates.apply_bytes_per_s};
  }
  RETURN_IF_ERROR(node_->Barrier("nereus.hybcomm", pb::WORKER, 0, &values)
                      .Annotate("agreeing on HybComm's rates (every worker needs the same --sfb)"));
  if (!values.empty()) {
    rates.link_bytes_per_s = values[0];
    rates.rebuild_flops_per_s = values[1];
    rates.update_bytes_per_s = values[2];
    rates.apply_bytes_per_s = values[3];
    if (num_workers > 1) rates.origin += "; the slowest of " + std::to_string(num_workers) + " workers";
  }
  ASSIGN_OR_RETURN(auto choices, DecideHybComm(mode, num_workers, num_servers, consistency, rates, shapes));
  if (rank == 0) LOG(INFO) << "worker 0: " << FormatHybCommTable(mode, num_workers, num_servers, rates, choices);
  SfbPlan plan;
  plan.trials = trials;
  plan.forced = forced;
  plan.rates = rates;
  plan.mode = mode;
  plan.start_sfb.assign(tensors_->size(), false);
  for (size_t i = 0; i < choices.size(); ++i) plan.start_sfb[eligible[i]] = choices[i].sfb;
  // Entries of the forced schedule at or before the first clock give the start path.
  for (const auto& [t, e] : forced)
    if (e.clock <= start) plan.start_sfb[t] = e.sfb;
  const bool switching = plan.switching();
  uint64_t digest = 1469598103934665603ull;  // FNV-1a's offset basis: never 0 (0 = no check).
  auto mix = [&](uint64_t v) { digest = (digest ^ v) * 1099511628211ull; };
  for (size_t i = 0; i < choices.size(); ++i) {
    const int t = eligible[i];
    if (plan.start_sfb[t]) {
      plan.tensors.push_back(t);
      mix(static_cast<uint64_t>(t) + 0x5fb);
    }
    if (switching) {
      TrialLayer l;
      l.tensor = t;
      l.name = tensors_->spec(t).name;
      l.sfb = plan.start_sfb[t];
      l.ps_s = choices[i].priced ? choices[i].ps_s : 0;
      l.sfb_s = choices[i].priced ? choices[i].sfb_s : 0;
      plan.trial_layers.push_back(l);
      plan.shapes.push_back(shapes[i]);
    }
    if (!plan.start_sfb[t] && !switching) continue;
    const TensorSpec& s = tensors_->spec(t);
    FactorExchange::TensorInfo info;
    info.id = t;
    info.name = s.name;
    info.shape = {s.shape[0], s.shape[1]};
    info.batch = s.factor_rows;
    info.lr_mult = s.lr_mult;
    info.decay_mult = s.decay_mult;
    info.data = s.data;
    info.left = s.factor_left;
    info.right = s.factor_right;
    info.applier = s.factor_applier;
    plan.infos.push_back(info);
  }
  if (!plan.infos.empty()) {
    // Each worker applies the SFB updates itself: with the same solver
    // settings, and by the same code, so that the replicas stay equal bit for
    // bit (a CPU rebuild and a cuBLAS one, or two GPUs whose cuBLAS sums
    // differently, would drift apart by rounding).
    plan.engine =
        applier != nullptr ? applier->rebuild_engine() : "the client on the CPU (common/update/sfb, OpenBLAS)";
    for (unsigned char c : sgd.SerializeAsString()) mix(c);
    for (unsigned char c : plan.engine) mix(c);
  }
  if (switching) {
    // Every worker must run the same trials (their agreements come at the
    // same clocks) or the same schedule.
    mix(trials ? 0x7a1 + static_cast<uint64_t>(options_.sfb_trial_clocks) : 0x5c4);
    if (trials) mix(static_cast<uint64_t>(std::llround(options_.sfb_trial_trust_ratio * 1000)) + 0x7125);
    for (unsigned char c : options_.sfb_schedule) mix(c);
    for (int t : eligible) mix(static_cast<uint64_t>(t) + 0xe11);
  }
  plan.digest = digest;
  return plan;
}

StatusOr<HybCommRates> SfbChoice::OwnRates() {
  HybCommRates r;
  std::vector<std::string> timed, given;
  auto note = [&](bool was_given, const char* what) { (was_given ? given : timed).push_back(what); };
  if (options_.sfb_link_gbit > 0) {
    r.link_bytes_per_s = options_.sfb_link_gbit * 1e9 / 8;
    note(true, "link");
  } else if (options_.merge_beta_s_per_byte > 0) {
    r.link_bytes_per_s = 1 / options_.merge_beta_s_per_byte;
    note(true, "link");
  } else {
    auto measured = measure_link_();
    if (!measured.ok()) return measured.status().Annotate("measuring the link for HybComm");
    const LinkFit& fit = *measured;
    r.link_bytes_per_s = 1 / fit.model.beta;
    note(false, fit.fell_back ? "link (implausible: 10 Gbit/s assumed)" : "link");
  }
  // Where the rebuild runs: an applier's device (its own figures, measured
  // there), else this CPU (timed here).
  const FactorApplier* applier = Applier();
  const double applier_gflops = applier != nullptr ? applier->rebuild_gflops() : 0;
  const double applier_gbytes = applier != nullptr ? applier->update_gbytes() : 0;
  const bool cpu = (options_.sfb_rebuild_gflops <= 0 && applier_gflops <= 0) ||
                   (options_.sfb_update_gbytes <= 0 && applier_gbytes <= 0);
  const CpuRates& here = cpu ? ThisCpuRates() : CpuRates{};
  r.rebuild_flops_per_s = options_.sfb_rebuild_gflops > 0 ? options_.sfb_rebuild_gflops * 1e9
                          : applier_gflops > 0            ? applier_gflops * 1e9
                                                          : here.gemm_flops_per_s;
  note(options_.sfb_rebuild_gflops > 0,
       options_.sfb_rebuild_gflops <= 0 && applier_gflops > 0 ? "GEMM (timed on the rebuilding device)" : "GEMM");
  r.update_bytes_per_s = options_.sfb_update_gbytes > 0 ? options_.sfb_update_gbytes * 1e9
                         : applier_gbytes > 0           ? applier_gbytes * 1e9
                                                        : here.step_bytes_per_s;
  note(options_.sfb_update_gbytes > 0, options_.sfb_update_gbytes <= 0 && applier_gbytes > 0
                                           ? "SGD step (timed on the rebuilding device)"
                                           : "SGD step");
  r.apply_bytes_per_s = options_.sfb_apply_gbytes > 0 ? options_.sfb_apply_gbytes * 1e9
                                                      : MeasureApplyBytesPerS(node_->job().num_workers());
  note(options_.sfb_apply_gbytes > 0, "apply");
  r.rebuild_on = applier != nullptr ? applier->rebuild_on() : options_.sfb_rebuild_on;
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i == 0 ? "" : i + 1 == v.size() ? " and " : ", ") + v[i];
    return out;
  };
  if (!timed.empty()) r.origin = join(timed) + " timed on each worker at Init";
  if (!given.empty()) r.origin += (r.origin.empty() ? "" : "; ") + join(given) + " given";
  return r;
}

const FactorApplier* SfbChoice::Applier() const {
  for (int t = 0; t < tensors_->size(); ++t) {
    const TensorSpec& s = tensors_->spec(t);
    if (s.factor_rows > 0 && s.factor_applier != nullptr) return s.factor_applier;
  }
  return nullptr;
}

}  // namespace nereus

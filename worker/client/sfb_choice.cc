#include "worker/client/sfb_choice.h"

#include <string>
#include <utility>

#include "common/update/compute_rates.h"

namespace nereus {

StatusOr<SfbPlan> SfbChoice::Choose(const pb::SgdConfig& sgd, bool layered) {
  const int rank = node_->rank();
  const int num_workers = node_->job().num_workers();
  const int num_servers = node_->job().num_servers();
  std::vector<int> eligible;
  std::vector<FcLayerShape> shapes;
  for (int t = 0; t < tensors_->size(); ++t) {
    const TensorSpec& s = tensors_->spec(t);
    if (s.factor_rows <= 0) continue;
    eligible.push_back(t);
    shapes.push_back({s.name, s.shape[0], s.shape[1], s.factor_rows});
  }
  if (eligible.empty()) return SfbPlan();
  if (!layered)
    return InvalidArgumentError("tensor \"" + tensors_->spec(eligible[0]).name +
                                "\" has factors but not every tensor has data and diff buffers (the layer-wise API)");
  SfbMode mode = options_.sfb;
  if (sgd.type() != pb::SOLVER_SGD) {
    // ApplySufficientFactors runs Caffe's SGD step only.
    if (mode == SfbMode::kOn)
      return InvalidArgumentError("--sfb=on supports solver type SGD only, got " + pb::SolverType_Name(sgd.type()));
    if (rank == 0)
      LOG(INFO) << "worker 0: solver " << pb::SolverType_Name(sgd.type())
                << ": every tensor goes through the servers (SFB applies SGD only)";
    mode = SfbMode::kOff;
  }
  if (node_->job().start_clock() > 0) {
    // A resumed job restarts from the servers' checkpoint; SFB replicas are not in it.
    if (mode == SfbMode::kOn)
      return InvalidArgumentError("--sfb=on cannot resume a job from a checkpoint (use --sfb=off or auto)");
    if (rank == 0) LOG(INFO) << "worker 0: resumed job: every tensor goes through the servers (--sfb=off)";
    mode = SfbMode::kOff;
  } else if (node_->job().checkpoint_every() > 0) {
    // The servers checkpoint what they hold; SFB replicas would be missing from it.
    if (mode == SfbMode::kOn)
      return InvalidArgumentError("--sfb=on cannot be used while the servers checkpoint (--checkpoint_every=" +
                                  std::to_string(node_->job().checkpoint_every()) +
                                  "): SFB replicas are not in the checkpoints (use --sfb=off or auto)");
    if (rank == 0) LOG(INFO) << "worker 0: servers checkpoint: every tensor goes through the servers (--sfb=off)";
    mode = SfbMode::kOff;
  }
  const pb::Consistency consistency = node_->job().consistency();
  const bool bsp = consistency == pb::BSP || consistency == pb::CONSISTENCY_UNSPECIFIED;
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
  uint64_t digest = 1469598103934665603ull;  // FNV-1a's offset basis: never 0 (0 = no check).
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!choices[i].sfb) continue;
    const int t = eligible[i];
    const TensorSpec& s = tensors_->spec(t);
    plan.tensors.push_back(t);
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
    digest = (digest ^ (static_cast<uint64_t>(t) + 0x5fb)) * 1099511628211ull;
  }
  if (!plan.tensors.empty()) {
    // Each worker applies the SFB updates itself: with the same solver
    // settings, and by the same code, so that the replicas stay equal bit for
    // bit (a CPU rebuild and a cuBLAS one, or two GPUs whose cuBLAS sums
    // differently, would drift apart by rounding).
    const FactorApplier* applier = Applier();
    plan.engine =
        applier != nullptr ? applier->rebuild_engine() : "the client on the CPU (common/update/sfb, OpenBLAS)";
    for (unsigned char c : sgd.SerializeAsString()) digest = (digest ^ c) * 1099511628211ull;
    for (unsigned char c : plan.engine) digest = (digest ^ c) * 1099511628211ull;
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

// SfbChoice: HybComm's per-layer choice for a client (docs/ARCHITECTURE.md,
// "HybComm"): which tensors registered with factors (TensorSpec::factor_rows)
// travel as sufficient factors among the workers, and which through the
// servers. The pricing itself is common/update/hybcomm.h (pure); this part
// gathers what it needs in a job: this worker's rates (given in
// ClientOptions, or timed here), the job-wide rates every worker agrees on
// through the "nereus.hybcomm" barrier (each the slowest worker's), the
// solver and the job's consistency and checkpointing, which rule factors
// out.
//
// Not thread-safe: the facade calls it once, from Init's thread, after the
// "nereus.model" barrier (every worker registered the same tensors).
#ifndef NEREUS_WORKER_CLIENT_SFB_CHOICE_H_
#define NEREUS_WORKER_CLIENT_SFB_CHOICE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/net/node.h"
#include "common/update/hybcomm.h"
#include "nereus/options.h"
#include "worker/client/factor_exchange.h"
#include "worker/client/merge_plan.h"
#include "worker/client/sfb_paths.h"
#include "worker/client/sfb_trials.h"
#include "worker/client/tensor_registry.h"

namespace nereus {

// What the client configures once the layers are chosen.
struct SfbPlan {
  std::vector<int> tensors;  // Sent as factors from the job's first clock, in id order.
  // The FactorExchange's entries: those above and, when paths may change,
  // every other tensor with factors.
  std::vector<FactorExchange::TensorInfo> infos;
  std::vector<bool> start_sfb;  // Per tensor id: its path at the first clock.
  uint64_t digest = 0;  // Of the choice, the solver, the engine and the switching: for the "nereus.sfb" barrier.
  std::string engine;   // What rebuilds the updates (FactorApplier::rebuild_engine).
  // HybComm's measured switching (BSP): the layers that can go either way
  // with their start-up prices (`trials`: measured, auto), and the forced
  // schedule's switches (tensor, entry) in clock order.
  bool trials = false;
  std::vector<TrialLayer> trial_layers;
  std::vector<std::pair<int, SfbScheduleEntry>> forced;
  // What re-prices the layers with their overlaps (the trials' prior).
  HybCommRates rates;
  std::vector<FcLayerShape> shapes;  // Of trial_layers, in the same order.
  SfbMode mode = SfbMode::kAuto;
  bool switching() const { return trials || !forced.empty(); }
};

class SfbChoice {
 public:
  // The link's PING fit (shared with merging, which times it once per Init).
  using MeasureLink = std::function<StatusOr<LinkFit>()>;
  // None owned; all outlive this object.
  SfbChoice(const ClientOptions& options, Node* node, const TensorRegistry* tensors, MeasureLink measure_link)
      : options_(options), node_(node), tensors_(tensors), measure_link_(std::move(measure_link)) {}

  // Chooses per eligible tensor (worker 0 logs the table), and whether and
  // how paths may change later (measured trials, a forced schedule). Where
  // some tensor has factors, every worker passes the "nereus.hybcomm"
  // barrier (an error names a worker given a different --sfb). `layered`:
  // every tensor has its data and diff buffers (the layer-wise API), which
  // factors need. An empty plan (digest 0) when no tensor has factors.
  StatusOr<SfbPlan> Choose(const pb::SgdConfig& sgd, bool layered);

 private:
  // This worker's rates for HybComm's cost model: those given in the
  // options, the others timed here. `origin` says which.
  StatusOr<HybCommRates> OwnRates();
  // The applier of the tensors with factors (TensorSpec::factor_applier;
  // RegisterTensor checks that they share one), or null.
  const FactorApplier* Applier() const;

  const ClientOptions& options_;
  Node* const node_;
  const TensorRegistry* const tensors_;
  const MeasureLink measure_link_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_SFB_CHOICE_H_

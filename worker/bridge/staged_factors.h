// StagedFactors: sufficient factors (common/update/sfb.h) of a net behind a device
// staging (a GPU worker; docs/GPU.md, "Sufficient factors from a GPU
// worker"). The client exchanges factors in host memory, as for a CPU
// worker; what differs is where they come from and where the update goes:
//   off the device   at the layer's hand-over (ClientParameterSync::
//                    GradientsReady) the staging copies the factors (the
//                    layer's top diff and bottom data, K rows each) into
//                    pinned mirrors, which the client reads, instead of the
//                    weight's gradient (K x (rows + cols) floats instead of
//                    rows x cols: VGG-19's fc6 at K = 32, 3.6 MiB instead of
//                    392 MiB);
//   stacked          the client hands every worker's factors of a clock to
//                    ApplyFactors (FactorApplier, on a client thread), which
//                    stacks them in rank order in pinned buffers and returns;
//   rebuilt there    before the layer's next forward, Rebuild (the thread
//                    that drives the net) enqueues on the compute stream the
//                    copy of the stacks to the device, ONE GEMM (cuBLAS, the
//                    workers' average: the same inputs in the same order on
//                    every worker) and the solver step the servers would make
//                    (gpu::SolverStepGpu: the per-element rules of
//                    common/update/sgd_rules.h) into the net's weights and a
//                    device-resident momentum history. Nothing waits for the
//                    device. A CPU net (behind HostStaging, as the tests run
//                    it) gets common/update/sfb.h's FactorGradient and common/update/sgd.h's
//                    SgdStep on its weights, the client's own rebuild: the
//                    same bits.
// Ordering: the stacks of clock c are rewritten only by ApplyFactors of c + 1,
// which needs this worker's own factors of c + 1, handed over after the
// layer's backward of c + 1 finished on the device: after the forward that
// Rebuild(c + 1) precedes. Likewise the factor mirrors are read by the client
// at the hand-over, before the staging copies the next clock's.
//
// Solver types: SGD only, as the client's own SFB update (the client keeps
// the servers for the others).
//
// Thread-safety: Add, MeasureRates, Choose, FactorCopies, Rebuild and Export
// on the thread that drives the net; ApplyFactors and BeginFactors on the
// client's applier thread (one call at a time per tensor; the client's
// WaitWeights orders them before the Rebuild that reads them); EndFactors
// on the thread that hands the layer to the client (after the Export of
// its clock, which the net's thread made before staging that clock's
// backward); the rate getters anywhere after MeasureRates.
#ifndef NEREUS_WORKER_BRIDGE_STAGED_FACTORS_H_
#define NEREUS_WORKER_BRIDGE_STAGED_FACTORS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/update/sfb.h"
#include "nereus/client.h"
#include "proto/nereus.pb.h"
#include "worker/bridge/device_staging.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/gpu/host_buffer.h"
#include "worker/trainer/layer.h"

namespace nereus {

class StagedFactors final : public FactorApplier {
 public:
  // `device`: the net's (null: a CPU net behind a staging of host memory).
  // `workers`: the job's worker count (the update averages that many).
  StagedFactors(gpu::Device* device, const pb::SgdConfig& sgd, int workers);
  ~StagedFactors() override;
  StagedFactors(const StagedFactors&) = delete;
  StagedFactors& operator=(const StagedFactors&) = delete;

  // Init, for learnable parameter `param` whose gradient is `f`'s product:
  // its weight (rows x cols, the net's blob), solver multipliers and name.
  // Makes the pinned factor mirrors, K x rows and K x cols.
  void Add(int param, const std::string& name, const Layer::GradientFactors& f, Blob* weights, float lr_mult,
           float decay_mult);
  bool Has(int param) const { return entries_.count(param) > 0; }
  // The mirrors the client reads (TensorSpec::factor_left, factor_right).
  const float* left(int param) const { return entries_.at(param)->left_mirror.data(); }
  const float* right(int param) const { return entries_.at(param)->right_mirror.data(); }

  // Before the client's Init: times the rebuild's GEMM and the solver step
  // on the device, at the largest added weight's shape (at most 4096 x 4096,
  // K = workers x its K, at most 1024), for HybComm. Nothing for a CPU net.
  Status MeasureRates();

  // After the client's Init: `sfb_tensors` the tensors that may travel as
  // factors (every one registered with them, when HybComm may switch paths;
  // Client::sfb_tensors() otherwise) as the client numbers them,
  // `tensor_of_param` the tensor id of each learnable parameter. Allocates,
  // for each chosen one, the device's stacks, gradient and momentum history
  // (zero). Which clocks a chosen one travels as factors the bridge asks
  // the client (Client::SfbAt).
  Status Choose(const std::vector<int>& sfb_tensors, const std::vector<int>& tensor_of_param);
  bool chosen(int param) const;

  // HybComm's switches (FactorApplier::BeginFactors, EndFactors). Export:
  // the thread that drives the net, on worker 0, right after Rebuild(param,
  // clock) where the tensor goes back through the servers at `clock`:
  // copies its weights and history (the device's) to the host, for
  // EndFactors to hand to the client.
  Status Export(int param, int64_t clock);

  // The staging's copies of `param`'s factors of this clock off the net into
  // the mirrors, for the layer's StageGradients. Fails naming the layer when
  // the factors changed shape or moved since Add (a reshaped net).
  StatusOr<std::vector<StagingCopy>> FactorCopies(int param, const Layer::GradientFactors& now) const;

  // The thread that drives the net, before param's layer's forward of
  // `clock` (after the client's WaitWeights(layer, clock)): applies the
  // update of clock - 1 to the weights. Errors name the layer's tensor.
  Status Rebuild(int param, int64_t clock);
  // Updates applied by Rebuild so far.
  int64_t rebuilds() const { return rebuilds_; }

  // FactorApplier.
  Status ApplyFactors(int tensor, int64_t clock, const std::vector<RankFactors>& by_rank) override;
  std::string rebuild_on() const override;
  std::string rebuild_engine() const override;
  double rebuild_gflops() const override { return gemm_gflops_; }
  double update_gbytes() const override { return step_gbytes_; }
  // Paths may switch: BeginFactors keeps the servers' history for the
  // Rebuild of the segment's first update, which puts it in place first;
  // EndFactors hands over what Export copied.
  bool switchable() const override { return true; }
  Status BeginFactors(int tensor, int64_t clock, const float* history) override;
  Status EndFactors(int tensor, int64_t clock, float* weights, float* history) override;

 private:
  struct Entry {
    std::string name;
    Layer::GradientFactors factors;  // As Add saw them.
    const float* left_at = nullptr;  // Where they were on the net's side then.
    const float* right_at = nullptr;
    FactorShape shape;  // The weight, rows x cols.
    Blob* weights = nullptr;
    float lr_mult = 1.0f, decay_mult = 1.0f;
    bool chosen = false;
    gpu::HostBuffer left_mirror, right_mirror;  // This worker's, K x rows and K x cols.
    // Every worker's factors of the last clock ApplyFactors got, rank order.
    gpu::HostBuffer left_stack, right_stack;
    int64_t stack_rows = 0;                     // Their K in all (written by ApplyFactors).
    std::atomic<int64_t> stacked_clock{-1};     // The clock in the stacks.
    int64_t rebuilt_clock = -1;                 // The last update Rebuild applied.
    std::unique_ptr<Blob> left_dev, right_dev;  // The stacks on the device (a GPU net).
    std::unique_ptr<Blob> history;              // rows x cols (the update goes to the weight's diff).
    FactorScratch scratch;                      // A CPU net's.
    // BeginFactors: the servers' history for the update of clock
    // history_from, put in place by that update's Rebuild (published by
    // stacked_clock, which ApplyFactors stores after BeginFactors returned).
    std::vector<float> pending_history;
    int64_t history_from = -1;
    // Export: the weights and history of exported_clock, for EndFactors.
    std::vector<float> export_weights, export_history;
    std::atomic<int64_t> exported_clock{-1};
  };
  // The pointers of `f` on the net's side (device or host memory).
  void NetSide(const Layer::GradientFactors& f, const float** left, const float** right) const;

  gpu::Device* const device_;
  const pb::SgdConfig sgd_;
  const int workers_;
  std::map<int, std::unique_ptr<Entry>> entries_;  // By learnable parameter.
  std::map<int, int> param_of_tensor_;             // Set by Choose.
  double gemm_gflops_ = 0, step_gbytes_ = 0;
  int64_t rebuilds_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_BRIDGE_STAGED_FACTORS_H_

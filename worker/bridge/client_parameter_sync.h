// ClientParameterSync: the ParameterSync of a data-parallel worker, over the
// worker client's layer-wise API (nereus/client.h). Each layer's gradients
// leave as soon as its backward ends, and its weights of the next iteration
// come back in the same round trip; the client's schedule (ClientOptions::
// schedule) orders what is on the wire.
//   Init             registers one tensor per learnable parameter of the train
//                    net, named "<owner layer>/<blob index>" (a parameter
//                    shared by name is registered once, by its owner layer),
//                    with its layer, its data and diff buffers and, for a
//                    fully connected weight, its sufficient factors;
//                    initializes the servers (worker 0's values win) and
//                    waits for every layer's weights of the job's start
//                    clock, so every worker starts from worker 0's weights
//                    (or from the servers' checkpoint in a resumed job). A
//                    layer's local state (Layer::IsLocalState: BatchNorm's
//                    mean, variance and count) is not registered: like
//                    Caffe's multi-GPU training, each worker keeps its own,
//                    updated by its forward passes; it is never pushed as a
//                    gradient nor overwritten by a pull (worker 0's is the
//                    one tested and snapshotted);
//   GradientsReady   hands the layer's parameter diffs of iteration `iter` to
//                    the client (Client::GradientsReady), which pushes them
//                    without copying and asks for the layer's weights of
//                    iter + 1 with them; returns at once. The diffs must stay
//                    unchanged until that layer's WaitWeights(iter + 1): the
//                    Solver clears a diff only at the backward of the next
//                    iteration;
//   FinishIteration  checks that every registered parameter was handed over
//                    in `iter` and moves on to iter + 1; it waits for nothing;
//   WaitWeights      waits for that layer's weights of `iter` only, which the
//                    client writes straight into the parameters' data;
//                    repeated calls for the same (layer, iter) return at once.
//
// Errors (a dead server, an aborted job, a refused request) come back as the
// Status of the call that waits on them; once a call failed every later call
// returns the same error.
//
// Staging (set_staging; a net on a GPU, docs/GPU.md "Staging"): the client
// reads and writes pinned host mirrors of every registered parameter's
// weights and gradients instead of the blobs, and a DeviceStaging moves them:
// GradientsReady stages the layer's gradients off the device and hands the
// layer to the client from the staging's thread once they are on the host;
// WaitWeights, once the client wrote the layer's weights into the mirrors,
// stages them onto the device before the layer's forward (the compute stream
// waits for them; the calling thread does not). A failed copy is the Status
// of the next call (naming the layer and the call), and nothing of that
// layer or a later one is handed to the client. Sufficient factors travel
// through the staging too (StagedFactors, staged_factors.h): a layer's factors
// are copied off the net instead of its weight gradient, and every worker's
// factors of a clock are rebuilt into the weights where the net keeps them
// (cuBLAS on a GPU), before the layer's next forward, instead of uploaded
// from a mirror. With a staging of device memory nothing here touches the
// blobs' host copies: Init
// copies the initial weights from the device into the data mirrors (once,
// blocking), and the blobs are told when the device copy is the fresh one
// (SyncedMemory::MarkGpuWritten).
//
// Not thread-safe: like every ParameterSync, it is called from the thread that
// drives the Solver. The Client does the communication on its own threads.
#ifndef NEREUS_WORKER_BRIDGE_CLIENT_PARAMETER_SYNC_H_
#define NEREUS_WORKER_BRIDGE_CLIENT_PARAMETER_SYNC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "nereus/client.h"
#include "worker/bridge/device_staging.h"
#include "worker/bridge/staged_factors.h"
#include "worker/trainer/gpu/host_buffer.h"
#include "worker/trainer/net.h"
#include "worker/trainer/parameter_sync.h"

namespace nereus {

class ClientParameterSync : public ParameterSync {
 public:
  // `client` is not owned; nothing may have been registered with it yet. It
  // must outlive every call of this object and, with a staging, every
  // hand-over: drain the staging (DeviceStaging::Drain) before the client
  // goes. Once the client is gone this object may still be destroyed (the
  // mirrors the client's pulls write into live here, so destroying it after
  // the client is the safe order) if its staging was drained.
  explicit ClientParameterSync(Client* client) : client_(client) {}
  // With staging: waits for the staging's pending hand-overs (so destroy
  // this before the client).
  ~ClientParameterSync() override;
  ClientParameterSync(const ClientParameterSync&) = delete;
  ClientParameterSync& operator=(const ClientParameterSync&) = delete;

  // The train net whose layers map to parameters (Solver::net()). Required
  // before Init; `net` must outlive this object. The Solver is created with
  // this ParameterSync first, so the net is attached afterwards.
  void set_net(Net* net) { net_ = net; }

  // Whether a layer's weight gradient may be handed over as sufficient
  // factors (Layer::WeightGradientFactors; ClientOptions::sfb decides which
  // go that way). Only true when the diff equals the factor product: the
  // caller turns it off for iter_size > 1 and gradient clipping. Before Init.
  void set_factors_allowed(bool allowed) { factors_allowed_ = allowed; }
  // With staging and factors: whether to time the rebuilding device's GEMM
  // and solver step for HybComm's pricing (StagedFactors::MeasureRates; only
  // --sfb=auto under BSP prices). Before Init; default true.
  void set_time_factor_rates(bool time) { time_factor_rates_ = time; }

  // Moves the weights and gradients between the net's buffers and the host
  // mirrors the client uses (see the header comment); not owned, must
  // outlive this object. Required for a net on a device (Net::device()):
  // a DeviceStaging whose device_memory() is true there, false for a CPU
  // net. Before Init.
  void set_staging(DeviceStaging* staging) { staging_ = staging; }

  Status Init(const std::vector<Blob*>& params, const std::vector<float>& lr_mult, const std::vector<float>& decay_mult,
              const pb::SgdConfig& sgd) override;
  Status WaitWeights(int layer, int64_t iter) override;
  Status GradientsReady(int layer, int64_t iter) override;
  Status FinishIteration(int64_t iter) override;

  // Waits for every outstanding push and pull, so that the parameters hold
  // the weights of the last clock pulled (after FinishIteration(n - 1): the
  // weights after n updates). Call before reading the final weights and
  // before Client::Finish.
  Status Drain();

  // "<owner layer>/<blob index>" of every learnable parameter, in
  // learnable-parameter order (local state included; is_local says which
  // were not registered).
  std::vector<std::string> tensor_names() const;
  bool is_local(int param_id) const { return params_[param_id].local; }
  // With staging: updates rebuilt from sufficient factors so far (0 without).
  int64_t sfb_rebuilds() const { return staged_factors_ != nullptr ? staged_factors_->rebuilds() : 0; }

 private:
  // One learnable parameter of the train net, and what the bridge keeps for
  // it.
  struct SyncedParam {
    Blob* blob = nullptr;
    std::string name;     // "<owner layer>/<blob index>" (Caffe's naming).
    int layer = -1;       // The owner layer.
    int blob_index = -1;  // Its index among the owner layer's blobs.
    float lr_mult = 1;
    float decay_mult = 1;
    bool local = false;        // Local state (Layer::IsLocalState): not synced.
    bool shared = false;       // Shared with another layer: no single pair of factors.
    int tensor_id = -1;        // The client's tensor (-1: local state).
    int64_t pushed_iter = -1;  // Last clock handed over.
    // The factors registered with the client (rows 0: none) and, without
    // staging, where they were then.
    Layer::GradientFactors factors;
    const float* factors_left_at = nullptr;
    const float* factors_right_at = nullptr;
    // With staging: the host mirrors the client uses, and the net's own
    // buffers (device memory on a GPU net).
    gpu::HostBuffer data_mirror;
    gpu::HostBuffer diff_mirror;
    float* net_data = nullptr;
    const float* net_diff = nullptr;
  };

  // Records the first error; returns the sticky status.
  Status Fail(Status st);
  // Init's steps, in order.
  Status CheckPlacement() const;  // The net's device and the staging agree.
  void DescribeParams(const std::vector<Blob*>& params, const std::vector<float>& lr_mult,
                      const std::vector<float>& decay_mult);
  void PrepareStaging();
  // Registers parameter `p` with the client (its buffers or mirrors, and its
  // factors where it may go as factors); appends its initial weights.
  Status RegisterParam(int p, const pb::SgdConfig& sgd, std::vector<const float*>* initial);
  // Where the client reads parameter `p`'s factors, with or without staging.
  void AttachFactors(int p, const Layer::GradientFactors& f, const pb::SgdConfig& sgd, TensorSpec* spec);
  Status PullInitialWeights();
  // With staging: the error a copy or a hand-over on the staging's thread
  // met, recorded as this object's error.
  Status CheckStaging() NEREUS_LOCKS_EXCLUDED(staging_mu_);
  // Stages layer `layer`'s weights (the mirrors) onto the net's buffers,
  // once per clock.
  Status UploadWeights(int layer, int64_t iter);
  // With staging: waits until the staging's thread has handed layer
  // `layer`'s gradients of the clock before `clock` to the client (or
  // failed), so that the client's WaitWeights never waits for a hand-over
  // that will not come.
  Status WaitHandedOver(int layer, int64_t clock) NEREUS_LOCKS_EXCLUDED(staging_mu_);
  // This clock's factors of parameter `id` (checked against where they were
  // registered when the client reads them in the blobs).
  Status CurrentFactors(int id, Layer::GradientFactors* f) const;

  Client* const client_;
  Net* net_ = nullptr;
  Status status_;
  bool initialized_ = false;
  std::vector<SyncedParam> params_;  // Per learnable parameter, in learnable-parameter order.
  int64_t pull_clock_ = -1;          // Clock of the weights last requested.
  bool factors_allowed_ = true;
  bool time_factor_rates_ = true;
  // With staging and factors: their mirrors, stacks and rebuild.
  std::unique_ptr<StagedFactors> staged_factors_;

  DeviceStaging* staging_ = nullptr;
  // Per layer: clock of the weights last staged onto the net, and of the
  // gradients last staged off it (written here, read by the span sink on the
  // staging's thread).
  std::vector<std::atomic<int64_t>> uploaded_clock_;
  std::vector<std::atomic<int64_t>> staged_clock_;
  Mutex staging_mu_;
  CondVar staging_cv_;
  // Per layer: last clock handed to the client.
  std::vector<int64_t> handed_clock_ NEREUS_GUARDED_BY(staging_mu_);
  // The first failure of a copy or a hand-over; set on the staging's thread
  // (or here, when StageGradients itself fails).
  Status staging_error_ NEREUS_GUARDED_BY(staging_mu_);
};

}  // namespace nereus

#endif  // NEREUS_WORKER_BRIDGE_CLIENT_PARAMETER_SYNC_H_

// Solver: Caffe's SGD solvers (SGD, Nesterov, AdaGrad, RMSProp, AdaDelta,
// Adam; `type` or the old `solver_type`) on a train net and its test nets.
// Per iteration: zero the diffs; forward/backward iter_size times; then
// Caffe's ApplyUpdate order: clip the global L2 norm of the accumulated
// gradient (clip_gradients), normalize by 1/iter_size, and per learnable
// parameter regularize and apply the solver's update through
// nereus::SolverStep with nereus::LearningRate (common/update/sgd.h, the same code
// the servers run).
// Tests at test_interval, displays at display (smoothed over average_loss),
// snapshots weights (<prefix>_iter_N.caffemodel) and state
// (<prefix>_iter_N.solverstate) and restores from a .solverstate.
//
// With a ParameterSync, the update is not applied locally: see
// parameter_sync.h for when each method is called.
//
// GPU (SolverOptions::gpu, solver_mode): the Solver owns the device its nets
// compute on; the histories live there and the update runs there
// (gpu/solver_step.h, the same per-element rules as common/update/sgd). Snapshots
// and Restore read and write the device-resident weights and histories
// through their blobs. With a ParameterSync (a job's worker) the device is
// chosen as standalone; the Solver then clears each parameter's diff on the
// device before the backward that first adds to it, and never reads the
// weights or gradients through the host while training: the ParameterSync
// moves them (worker/bridge's device staging).
//
// Not thread-safe: one thread drives a Solver.
#ifndef NEREUS_WORKER_TRAINER_SOLVER_H_
#define NEREUS_WORKER_TRAINER_SOLVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "proto/nereus.pb.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/parameter_sync.h"

namespace nereus {

// The solver type a SolverParameter names: `type`, or the deprecated
// `solver_type` enum (as Caffe's UpgradeSolverType; giving both is an error).
StatusOr<pb::SolverType> SolverTypeOf(const caffe::SolverParameter& param);

// Caffe's solver fields of a SolverParameter as the servers' pb::SgdConfig
// (type SGD when SolverTypeOf fails; Solver::Create reports that).
pb::SgdConfig SgdConfigFromSolverParameter(const caffe::SolverParameter& param);

// Reported every `display` iterations (before that iteration's update, as
// Caffe prints "Iteration N, loss = ...").
struct TrainProgress {
  int64_t iter = 0;         // The iteration being displayed (0-based).
  float loss = 0;           // Loss smoothed over average_loss iterations.
  float lr = 0;             // Learning rate of this iteration.
  double images_per_s = 0;  // Over the iterations since the last display.
  double compute_s = 0;     // Wall time minus communication wait since the last display.
  double wait_s = 0;        // Time inside ParameterSync calls since the last display.
  double iters_per_s = 0;
  // The train net's outputs of this iteration: name, value, loss weight.
  std::vector<std::string> output_names;
  std::vector<float> output_values;
};

// Result of one test pass (Caffe's Solver::Test).
struct TestResult {
  int test_net_id = 0;
  int64_t iter = 0;
  // Mean over test_iter batches of every scalar of every output blob, in
  // Caffe's order; names repeat for multi-element outputs.
  std::vector<std::string> names;
  std::vector<float> mean_scores;
  std::vector<float> loss_weights;
  // Mean forward loss when test_compute_loss, else 0.
  float loss = 0;
  // The mean score of the first output named `name`; NaN when absent.
  float Score(const std::string& name) const;
};

struct SolverOptions {
  // Called at each display iteration / after each test pass. When unset, the
  // Solver LOGs Caffe-like lines.
  std::function<void(const TrainProgress&)> on_display;
  std::function<void(const TestResult&)> on_test;

  // Where the nets compute (nereus_worker --gpu):
  //   kGpuFromSolver  as the solver says: solver_mode GPU on device_id, but
  //                   where that device cannot be used (no GPU, a CPU-only
  //                   build) a warning, then the CPU, as Caffe's published
  //                   solver files say GPU; solver_mode CPU: the CPU;
  //   kCpu            the CPU, whatever the solver says;
  //   N >= 0          GPU N; an error naming N and why when it cannot be.
  static constexpr int kGpuFromSolver = -2;
  static constexpr int kCpu = -1;
  int gpu = kGpuFromSolver;
  // With a GPU: its options (memory limit, TF32, cuDNN, the convolutions'
  // workspace); the Solver sets device_id and seed.
  gpu::DeviceOptions device;
};

class Solver {
 public:
  // Builds the train net and test nets named by `param` (net/net_param/
  // train_net/train_net_param and test_net/test_net_param, resolved as Caffe
  // does; net file paths are relative to the working directory). `sync` may
  // be null (standalone); otherwise it must outlive the Solver. The registry
  // is used during Create only.
  static StatusOr<std::unique_ptr<Solver>> Create(const caffe::SolverParameter& param, const LayerRegistry& registry,
                                                  ParameterSync* sync = nullptr,
                                                  SolverOptions options = SolverOptions());
  // Reads the solver prototxt at `path`, then Create.
  static StatusOr<std::unique_ptr<Solver>> CreateFromFile(const std::string& path, const LayerRegistry& registry,
                                                          ParameterSync* sync = nullptr,
                                                          SolverOptions options = SolverOptions());
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // Caffe's Solve: optional Restore, Step(max_iter - iter), the final
  // snapshot (snapshot_after_train), a final display forward and test.
  Status Solve(const std::string& resume_file = "");
  // Runs `iters` iterations (tests, displays and snapshots as configured).
  Status Step(int iters);
  // Runs test net `test_net_id` for test_iter batches with the train net's
  // current weights.
  StatusOr<TestResult> Test(int test_net_id);
  Status TestAll();

  // Writes <prefix>_iter_<iter>.caffemodel and .solverstate (binary protos),
  // or with snapshot_format HDF5 .caffemodel.h5 and .solverstate.h5 in
  // Caffe's HDF5 layout (hdf5_snapshot.h). `model_path`
  // and `state_path` (may be null) receive the file names. With a
  // ParameterSync, first waits for the weights of iter() (WaitWeights for
  // every layer); the history written is then the local one (zeros: the
  // servers hold the momentum).
  Status Snapshot(std::string* model_path = nullptr, std::string* state_path = nullptr);
  // Restores iter, history and (from the learned_net it names) the weights;
  // a file name ending in .h5 is read as HDF5 (both the state and its net).
  Status Restore(const std::string& state_file);
  // A distributed job resumed from the servers' checkpoint: the next
  // iteration is `iter`; the weights and the history are the servers'. Only
  // before the first Step.
  void StartAt(int64_t iter);

  Net* net() const { return net_.get(); }
  // The GPU the nets compute on; nullptr: the CPU.
  gpu::Device* device() const { return device_.get(); }
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  const caffe::SolverParameter& param() const { return param_; }
  const pb::SgdConfig& sgd_config() const { return sgd_; }
  int64_t iter() const { return iter_; }
  float smoothed_loss() const { return smoothed_loss_; }
  // Caffe's history_: one blob per learnable parameter, then (AdaDelta,
  // Adam) a second one per parameter, in that order; .solverstate holds them
  // in this order.
  const std::vector<std::unique_ptr<Blob>>& history() const { return history_; }
  // Images per iteration (batch of the first layer's first top x iter_size).
  int images_per_iter() const { return images_per_iter_; }
  // Total time spent inside ParameterSync calls.
  double total_wait_s() const { return total_wait_s_; }

  // The local update of one iteration, public for tests: clip, normalize,
  // regularize and SGD on the accumulated diffs with LearningRate(iter()).
  void ApplyUpdate();

 private:
  Solver(const caffe::SolverParameter& param, ParameterSync* sync, SolverOptions options);
  Status Init(const LayerRegistry& registry);
  void ClipGradients();
  void Normalize(int param_id);
  void UpdateSmoothedLoss(float loss, int64_t start_iter, int average_loss);
  Status SyncCall(const std::function<Status()>& call);
  // Creates device_ as SolverOptions::gpu and solver_mode say (or leaves it
  // null for the CPU).
  Status ChooseDevice(uint64_t seed);
  Status WaitAllWeights();

  caffe::SolverParameter param_;
  pb::SgdConfig sgd_;
  ParameterSync* sync_;
  SolverOptions options_;
  bool sync_initialized_ = false;
  // True while the last sub-iteration's backward of iter_size runs and the
  // hooks hand gradients to sync_ layer by layer.
  bool per_layer_gradients_ = false;
  // With a ParameterSync: the learnable parameters whose diffs are cleared
  // right before layer l's backward.
  std::vector<std::vector<int>> clear_before_backward_;
  bool first_sub_iter_ = true;

  // Declared before the nets: destroyed after them.
  std::unique_ptr<gpu::Device> device_;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  std::vector<std::unique_ptr<Blob>> history_;
  int64_t iter_ = 0;
  int current_step_ = 0;
  std::vector<float> losses_;
  float smoothed_loss_ = 0;
  int images_per_iter_ = 0;
  double total_wait_s_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_SOLVER_H_

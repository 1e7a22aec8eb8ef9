// Trains a Caffe solver prototxt, standalone or as one data-parallel worker of
// a Nereus job: what `nereus_worker --solver=FILE` runs.
//
// Standalone, it is Caffe's `train` on the CPU or (TrainRunOptions::gpu,
// solver_mode GPU) a GPU. Distributed, the worker joins
// the job through the client, its train Data layers read shard rank of
// num_workers (record i goes to worker i mod P; the prototxt batch size is
// per worker) and a ClientParameterSync keeps the weights on the servers;
// on a GPU through a device staging (StagingForDevice: CudaStaging), which
// moves each layer's gradients off the device and its weights back on.
// With P workers, worker 0 runs the test nets on their whole test sets at each
// test_interval and the other workers skip testing; only worker 0 writes
// snapshots (the others would write the same files: under BSP every worker
// holds the same weights).
//
// Not thread-safe; one call at a time. Logs progress through glog.
#ifndef NEREUS_WORKER_BRIDGE_TRAINER_RUNNER_H_
#define NEREUS_WORKER_BRIDGE_TRAINER_RUNNER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "nereus/client.h"
#include "worker/bridge/device_staging.h"
#include "worker/trainer/gpu/device.h"

namespace nereus {

struct TrainRunOptions {
  std::string solver_file;  // Solver prototxt (paths in it relative to the working directory).
  bool standalone = true;   // false: join the job described by `client`.
  ClientOptions client;
  // Resume from a .solverstate. Standalone: as Caffe. In a job (started
  // with --resume): its iteration must be the clock the servers resumed
  // from; the weights and the momentum history are the servers'.
  std::string resume_file;
  // Start from the weights of a .caffemodel (both modes; in a job, worker 0's
  // weights become everyone's).
  std::vector<std::string> weights_files;  // Copied in order (Caffe's comma-separated --weights).
  // After training, write the final weights as a .caffemodel here.
  std::string weights_out;
  // The GPU to train on (standalone or a job's worker); -1: as the solver
  // file says (SolverOptions::gpu's kGpuFromSolver).
  int gpu = -1;
  // The GPU's options (TF32, cuDNN, workspace; device_id and seed are the
  // solver's).
  gpu::DeviceOptions device;
};

// Makes the staging of a net that computes on `device` (NewCudaStaging).
using StagingFactory = std::function<StatusOr<std::unique_ptr<DeviceStaging>>(gpu::Device* device)>;

// The staging a job's worker hands its bridge (ClientParameterSync::
// set_staging), as RunTraining chooses it: none (nullptr) for a net on the
// CPU (`device` null): the client reads and writes the blobs themselves, the
// plain path; for a net on a device, `factory(device)` (NewCudaStaging when
// `factory` is empty). Errors: the factory's, naming the device; a staging
// that does not copy device memory.
StatusOr<std::unique_ptr<DeviceStaging>> StagingForDevice(gpu::Device* device, const StagingFactory& factory = nullptr);

// What a run reports at the end (and --summary_json writes).
struct TrainSummary {
  int rank = 0;            // 0 standalone.
  int num_workers = 1;     // 1 standalone.
  int64_t iterations = 0;  // Solver iterations done in this run.
  float train_loss = 0;    // Final smoothed train loss (Caffe's last displayed loss).
  // The result: the last test of test net 0 when it ran after training (at
  // an iteration past the run's first, or at its last: a run with nothing to
  // train). A test that ran only before training (Caffe's iteration-0 test
  // with test_interval past max_iter) is no result: then test_iter is empty
  // and test_note says so, as it does when this process did not test (no
  // test net; a worker other than 0).
  std::optional<int64_t> test_iter;  // The iteration the reported test ran at.
  // Every output of the test net, in Caffe's order, "name" or for a blob of
  // several values "name[i]".
  std::vector<std::pair<std::string, float>> test_outputs;
  std::optional<float> test_accuracy;  // The output named "accuracy", when there is one.
  std::optional<float> test_loss;      // Sum of the weighted loss outputs, when there are any.
  std::string test_note;               // Why no test is reported; empty when one is.
  double images_per_s = 0;             // Training images of the whole job (all workers) per second of wall_s.
  double wall_s = 0;                   // Wall time of training: from the first iteration to the end, tests included.
  double wait_s = 0;                   // Part of wall_s spent waiting for the parameter servers.
  int batch_size = 0;                  // Images per iteration of this worker.
};

// Runs the whole training. Errors (a bad solver or net file, a missing
// database, a dead server, an aborted job) name their cause. When the job
// rolls back (a node rejoined it, IsRollback), the run starts again as with
// --resume: same rank, from the clock the job rolled back to; the summary
// then covers the run since the last rollback.
StatusOr<TrainSummary> RunTraining(const TrainRunOptions& options);

// {"iterations", "train_loss", "test_iteration", "test_accuracy",
// "test_loss", "test_outputs" (an object, name -> value), "test_note",
// "images_per_s", "wall_s", "wait_s", "rank", "workers", "batch_size"};
// absent values are null.
std::string TrainSummaryJson(const TrainSummary& summary);

// The final line nereus_worker --solver prints, e.g.
//   standalone: 100 iterations in 5.2 s, train loss 0.1200, test at iteration
//   100: accuracy 0.9730, loss 0.0912, 1234 images/s
// (for "standalone" `who` may be "worker 0" ...), with every output of the
// test net by name, or the test_note.
std::string TrainSummaryLine(const TrainSummary& summary, const std::string& who);

}  // namespace nereus

#endif  // NEREUS_WORKER_BRIDGE_TRAINER_RUNNER_H_

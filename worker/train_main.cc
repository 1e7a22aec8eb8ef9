// nereus_worker --solver=FILE: the Caffe-style trainer mode of nereus_worker
// (flags and reporting; the training itself is worker/bridge/trainer_runner.h).
#include "worker/train_main.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <fstream>

#include "common/net/node_flags.h"
#include "worker/bridge/trainer_runner.h"
#include "worker/client/client_flags.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/gpu/device_flags.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net_timer.h"
#include "worker/trainer/prototxt.h"

DEFINE_string(
    solver, "",
    "Trainer mode: a Caffe solver prototxt (e.g. worker/trainer/models/lenet_solver_quick.prototxt); the net and "
    "data paths in it are relative to the working directory. Without --standalone the worker joins the "
    "job at --coordinator and trains data-parallel: its train Data layers read records i with i mod "
    "num_workers == rank, the prototxt batch size is per worker, and the weights live on the servers "
    "(BSP: the same as one worker with num_workers times the batch). Worker 0 runs the test nets on the "
    "whole test set at each test_interval and writes the snapshots; the other workers neither test nor "
    "snapshot. Solver fields honoured: net, net_param, train_net, train_net_param, test_net, "
    "test_net_param, train_state, test_state, test_iter, test_interval, test_compute_loss, "
    "test_initialization, display, average_loss, max_iter, iter_size, base_lr, lr_policy, gamma, power, "
    "stepsize, stepvalue, momentum, momentum2, weight_decay, regularization_type, clip_gradients, type "
    "(SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) or the old solver_type, delta, rms_decay, "
    "random_seed, snapshot, snapshot_prefix, snapshot_diff, snapshot_format (BINARYPROTO or HDF5), "
    "snapshot_after_train, solver_mode and device_id (GPU training: see --gpu). Accepted "
    "without effect: debug_info, layer_wise_reduce (communication is always layer-wise). Any other field is an "
    "error naming it.");
DEFINE_int32(gpu, -1,
             "Trainer mode: train on this GPU (a CUDA device id, as Caffe's `train --gpu`). -1: as the solver file "
             "says: solver_mode GPU trains on device_id when that GPU is there, and warns and trains on the CPU "
             "when it is not (Caffe's published solver files say GPU); solver_mode CPU trains on the CPU. A GPU "
             "asked for here that cannot be had (no CUDA device, a build without CUDA, an id out of range) is an "
             "error naming it, before the worker joins a job. In a job each worker trains on its own GPU (or "
             "shares one), its gradients and weights staged between the device and the servers through pinned "
             "host memory.");
DEFINE_bool(standalone, false,
            "Trainer mode: train alone, without coordinator or servers (Caffe's CPU training; the solver applies "
            "SGD itself).");
DEFINE_string(snapshot, "",
              "Trainer mode: resume training from this .solverstate or .solverstate.h5 (HDF5, by the .h5 ending; as "
              "Caffe's --snapshot). In a job, with --resume given to every process: worker 0's snapshot of "
              "iteration N plus the servers' checkpoint of clock N (the servers hold the weights and the solver's "
              "history) resume the job at N.");
DEFINE_string(weights, "",
              "Trainer mode: initialize the net from this .caffemodel or .caffemodel.h5 (HDF5, by the .h5 ending; "
              "layers matched by name, as Caffe's --weights). In a job, worker 0's weights become every worker's.");
DEFINE_string(time, "",
              "Time mode (Caffe's `caffe time`): a net prototxt (current or V1, e.g. "
              "worker/trainer/models/lenet_train_test.prototxt); its TRAIN phase is built (Data layers read their "
              "sources; Input layers get their shapes' zeros), run forward and backward once untimed, then "
              "--iterations times (default 50 here), and each layer's average forward and backward time is printed "
              "with the totals (the sums of the layers'). On the CPU, or on --gpu=N (CUDA events on the compute "
              "stream; the peak device memory too). With --summary_json the same as JSON. Changes no weight.");
DECLARE_string(model);
DECLARE_int32(iterations);
DECLARE_string(summary_json);
DECLARE_string(weights_out);

namespace nereus {
namespace {

bool FlagIsSet(const char* name) { return !gflags::GetCommandLineFlagInfoOrDie(name).is_default; }

std::string Percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

}  // namespace

int RunTimeMode() {
  if (!FLAGS_solver.empty() || FlagIsSet("model")) {
    LOG(ERROR) << "--time times a net alone: give neither --solver nor --model with it";
    return 2;
  }
  const int iterations = FlagIsSet("iterations") ? FLAGS_iterations : 50;
  if (iterations <= 0) {
    LOG(ERROR) << "--iterations must be > 0 with --time, got " << iterations;
    return 2;
  }
  if (FLAGS_gpu < -1) {
    LOG(ERROR) << "--gpu=" << FLAGS_gpu << ": expected a CUDA device id (0, 1, ...) or -1 (the CPU)";
    return 2;
  }
  caffe::NetParameter param;
  PrototxtLocations locations;
  Status st = ReadNetParameterFromTextFile(FLAGS_time, &param, &locations);
  if (!st.ok()) {
    LOG(ERROR) << "--time=" << FLAGS_time << ": " << st.message();
    return 2;
  }
  caffe::NetState state;
  state.set_phase(caffe::TRAIN);
  state.MergeFrom(param.state());
  *param.mutable_state() = state;
  std::unique_ptr<gpu::Device> device;
  if (FLAGS_gpu >= 0) {
    gpu::DeviceOptions options;
    options.device_id = FLAGS_gpu;
    auto made = gpu::Device::Create(gpu::DeviceOptionsFromFlags(options));
    if (!made.ok()) {
      LOG(ERROR) << "--gpu=" << FLAGS_gpu << ": " << made.status().message();
      return 2;
    }
    device = std::move(made).value();
  }
  NetOptions net_options;
  net_options.device = device.get();
  net_options.locations = &locations;
  auto net = Net::Create(param, DefaultLayerRegistry(), net_options);
  if (!net.ok()) {
    LOG(ERROR) << "--time=" << FLAGS_time << ": " << net.status().message();
    return 1;
  }
  auto timing = TimeNet(net->get(), iterations);
  if (!timing.ok()) {
    LOG(ERROR) << "--time=" << FLAGS_time << ": " << timing.status().message();
    return 1;
  }
  std::printf("%s", FormatNetTiming(*timing).c_str());
  if (!FLAGS_summary_json.empty()) {
    std::ofstream out(FLAGS_summary_json);
    out << NetTimingJson(*timing) << "\n";
    if (!out) {
      LOG(ERROR) << "cannot write --summary_json=" << FLAGS_summary_json;
      return 1;
    }
  }
  return 0;
}

int RunTrainerMode() {
  if (FlagIsSet("model")) {
    LOG(ERROR) << "--model and --solver exclude each other: --model selects the synthetic worker, --solver the "
                  "Caffe-style trainer";
    return 2;
  }
  if (FLAGS_standalone && FlagIsSet("coordinator")) {
    LOG(ERROR) << "--standalone trains without a job; do not give --coordinator with it";
    return 2;
  }
  if (!FLAGS_standalone && !FLAGS_snapshot.empty() && !FLAGS_resume) {
    LOG(ERROR) << "--snapshot in a job needs --resume (for every process of the job): the servers hold the "
                  "momentum history and load it from their checkpoint of the snapshot's iteration";
    return 2;
  }
  if (FLAGS_gpu < -1) {
    LOG(ERROR) << "--gpu=" << FLAGS_gpu << ": expected a CUDA device id (0, 1, ...) or -1 (as the solver file says)";
    return 2;
  }
  if (FLAGS_gpu >= 0) {
    const Status usable = gpu::CheckDeviceId(FLAGS_gpu);
    if (!usable.ok()) {
      LOG(ERROR) << "--gpu=" << FLAGS_gpu << ": " << usable.message();
      return 2;
    }
  }
  TrainRunOptions options;
  options.solver_file = FLAGS_solver;
  options.gpu = FLAGS_gpu;
  options.device = gpu::DeviceOptionsFromFlags();
  options.standalone = FLAGS_standalone;
  options.resume_file = FLAGS_snapshot;
  options.weights_file = FLAGS_weights;
  options.weights_out = FLAGS_weights_out;
  if (!FLAGS_standalone) {
    auto client = ClientOptionsFromFlags();  // The shared node and scheduling flags.
    if (!client.ok()) {
      LOG(ERROR) << "worker: " << client.status().message();
      return 2;
    }
    options.client = *client;
  }

  auto result = RunTraining(options);
  if (!result.ok()) {
    LOG(ERROR) << "worker: training with --solver=" << FLAGS_solver << " failed: " << result.status().message();
    return 1;
  }
  const TrainSummary& s = *result;
  if (!FLAGS_summary_json.empty()) {
    std::ofstream out(FLAGS_summary_json);
    out << TrainSummaryJson(s);
    out.close();
    if (!out) {
      LOG(ERROR) << "worker: cannot write --summary_json=" << FLAGS_summary_json;
      return 1;
    }
  }
  const std::string who = FLAGS_standalone ? "standalone" : "worker " + std::to_string(s.rank);
  const std::string waiting =
      FLAGS_standalone ? "" : ", waiting for servers " + Percent(s.wait_s, s.wall_s) + " of the time";
  std::printf("%s%s\n", TrainSummaryLine(s, who).c_str(), waiting.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace nereus

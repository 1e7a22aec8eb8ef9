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
#include "worker/trainer/hdf5_snapshot.h"
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
              "Trainer and test modes: initialize the net from these .caffemodel or .caffemodel.h5 files (HDF5, by the "
              ".h5 ending; comma-separated, copied in order, layers matched by name, as Caffe's --weights). In a "
              "job, worker 0's weights become every worker's.");
DEFINE_string(time, "",
              "Time mode (Caffe's `caffe time`): a net prototxt (current or V1, e.g. "
              "worker/trainer/models/lenet_train_test.prototxt); its TRAIN phase is built (Data layers read their "
              "sources; Input layers get their shapes' zeros), run forward and backward once untimed, then "
              "--iterations times (default 50 here), and each layer's average forward and backward time is printed "
              "with the totals (the sums of the layers'). On the CPU, or on --gpu=N (CUDA events on the compute "
              "stream; the peak device memory too). With --summary_json the same as JSON. Changes no weight.");
DEFINE_string(test, "",
              "Test mode (Caffe's `caffe test`): a net prototxt whose TEST phase is built (its Data layers read "
              "their sources), initialised from --weights, and run forward --iterations times (default 50 here); "
              "each batch's outputs are printed, then their means (a loss output also times its loss weight). On "
              "the CPU or --gpu=N. With --summary_json: {\"iterations\", \"outputs\": {name: mean}}.");
DEFINE_bool(device_query, false,
            "List the CUDA devices and their properties (Caffe's `caffe device_query`): every device, or --gpu=N's "
            "alone.");
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

std::vector<std::string> SplitWeights(const std::string& list) {
  std::vector<std::string> files;
  std::string file;
  for (char c : list + ",") {
    if (c != ',') {
      file += c;
    } else if (!file.empty()) {
      files.push_back(file);
      file.clear();
    }
  }
  return files;
}

// The net of `flag`=`path` in `phase`, on --gpu's device (made into
// `*device`) or the CPU; logs the error and sets `*rc` (2: bad flags or
// file, 1: the net failed to build) on failure.
std::unique_ptr<Net> BuildNet(const char* flag, const std::string& path, caffe::Phase phase,
                              std::unique_ptr<gpu::Device>* device, int* rc) {
  *rc = 2;
  if (FLAGS_gpu < -1) {
    LOG(ERROR) << "--gpu=" << FLAGS_gpu << ": expected a CUDA device id (0, 1, ...) or -1 (the CPU)";
    return nullptr;
  }
  caffe::NetParameter param;
  PrototxtLocations locations;  // Read by Net::Create only (its errors name the line).
  Status st = ReadNetParameterFromTextFile(path, &param, &locations);
  if (!st.ok()) {
    LOG(ERROR) << "--" << flag << "=" << path << ": " << st.message();
    return nullptr;
  }
  caffe::NetState state;
  state.set_phase(phase);
  state.MergeFrom(param.state());
  state.set_phase(phase);
  *param.mutable_state() = state;
  if (FLAGS_gpu >= 0) {
    gpu::DeviceOptions options;
    options.device_id = FLAGS_gpu;
    auto made = gpu::Device::Create(gpu::DeviceOptionsFromFlags(options));
    if (!made.ok()) {
      LOG(ERROR) << "--gpu=" << FLAGS_gpu << ": " << made.status().message();
      return nullptr;
    }
    *device = std::move(made).value();
  }
  NetOptions net_options;
  net_options.device = device->get();
  net_options.locations = &locations;
  auto net = Net::Create(param, DefaultLayerRegistry(), net_options);
  *rc = 1;
  if (!net.ok()) {
    LOG(ERROR) << "--" << flag << "=" << path << ": " << net.status().message();
    return nullptr;
  }
  *rc = 0;
  return std::move(net).value();
}

bool WriteSummary(const std::string& json) {
  if (FLAGS_summary_json.empty()) return true;
  std::ofstream out(FLAGS_summary_json);
  out << json << "\n";
  if (!out) LOG(ERROR) << "cannot write --summary_json=" << FLAGS_summary_json;
  return static_cast<bool>(out);
}

// --iterations of --time or --test (`mode`), 50 unless given; says why when
// it is not positive.
int ModeIterations(const std::string& mode) {
  const int iterations = FlagIsSet("iterations") ? FLAGS_iterations : 50;
  if (iterations <= 0) LOG(ERROR) << "--iterations must be > 0 with --" << mode << ", got " << iterations;
  return iterations;
}

}  // namespace

int RunTimeMode() {
  if (!FLAGS_solver.empty() || FlagIsSet("model")) {
    LOG(ERROR) << "--time times a net alone: give neither --solver nor --model with it";
    return 2;
  }
  const int iterations = ModeIterations("time");
  if (iterations <= 0) return 2;
  std::unique_ptr<gpu::Device> device;
  int rc = 0;
  std::unique_ptr<Net> net = BuildNet("time", FLAGS_time, caffe::TRAIN, &device, &rc);
  if (net == nullptr) return rc;
  auto timing = TimeNet(net.get(), iterations);
  if (!timing.ok()) {
    LOG(ERROR) << "--time=" << FLAGS_time << ": " << timing.status().message();
    return 1;
  }
  std::printf("%s", FormatNetTiming(*timing).c_str());
  return WriteSummary(NetTimingJson(*timing)) ? 0 : 1;
}

int RunTestMode() {
  if (!FLAGS_solver.empty() || FlagIsSet("model") || !FLAGS_time.empty()) {
    LOG(ERROR) << "--test scores a net alone: give neither --solver, --model nor --time with it";
    return 2;
  }
  const int iterations = ModeIterations("test");
  if (iterations <= 0) return 2;
  if (FLAGS_weights.empty()) LOG(WARNING) << "--test without --weights scores the net's initial (filled) weights";
  std::unique_ptr<gpu::Device> device;
  int rc = 0;
  std::unique_ptr<Net> net = BuildNet("test", FLAGS_test, caffe::TEST, &device, &rc);
  if (net == nullptr) return rc;
  for (const std::string& file : SplitWeights(FLAGS_weights)) {
    Status st = CopyTrainedLayersFromFile(file, net.get());
    if (!st.ok()) {
      LOG(ERROR) << "--weights=" << file << ": " << st.message();
      return 1;
    }
  }
  gpu::ScopedDevice scope(device.get());
  // Caffe's test: every output value of every batch, then the means.
  std::vector<std::string> names;
  std::vector<float> weights;
  std::vector<double> sums;
  for (int i = 0; i < iterations; ++i) {
    auto loss = net->Forward();
    if (!loss.ok()) {
      LOG(ERROR) << "--test=" << FLAGS_test << ": batch " << i << ": " << loss.status().message();
      return 1;
    }
    size_t k = 0;
    for (size_t j = 0; j < net->output_blobs().size(); ++j) {
      const Blob* out = net->output_blobs()[j];
      const std::string& name = net->blob_names()[net->output_blob_indices()[j]];
      for (int e = 0; e < out->count(); ++e, ++k) {
        if (i == 0) {
          names.push_back(out->count() == 1 ? name : name + "[" + std::to_string(e) + "]");
          weights.push_back(net->blob_loss_weights()[net->output_blob_indices()[j]]);
          sums.push_back(0);
        }
        sums[k] += out->cpu_data()[e];
        std::printf("Batch %d, %s = %g\n", i, names[k].c_str(), out->cpu_data()[e]);
      }
    }
  }
  std::string json = "{\"iterations\": " + std::to_string(iterations) + ", \"outputs\": {";
  for (size_t k = 0; k < names.size(); ++k) {
    const double mean = sums[k] / iterations;
    std::printf("%s = %g", names[k].c_str(), mean);
    if (weights[k] != 0) std::printf(" (* %g = %g loss)", weights[k], weights[k] * mean);
    std::printf("\n");
    char value[64];
    std::snprintf(value, sizeof(value), "%.9g", mean);
    json += (k ? ", \"" : "\"") + names[k] + "\": " + value;
  }
  json += "}}";
  return WriteSummary(json) ? 0 : 1;
}

int RunDeviceQuery() {
  auto devices = gpu::DescribeDevices();
  if (!devices.ok()) {
    LOG(ERROR) << "--device_query: " << devices.status().message();
    return 1;
  }
  if (FLAGS_gpu >= static_cast<int>(devices->size())) {
    LOG(ERROR) << "--device_query --gpu=" << FLAGS_gpu << ": " << gpu::CheckDeviceId(FLAGS_gpu).message();
    return 2;
  }
  for (size_t d = 0; d < devices->size(); ++d) {
    if (FLAGS_gpu >= 0 && static_cast<int>(d) != FLAGS_gpu) continue;
    for (const std::string& line : (*devices)[d]) std::printf("%s\n", line.c_str());
    std::printf("\n");
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
  options.weights_files = SplitWeights(FLAGS_weights);
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

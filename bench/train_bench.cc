// nereus_bench train: the trainer's own speed, standalone, on the CPU or a
// GPU: images per second of one model's training iterations (forward,
// backward and the solver's update) at a given batch, on synthetic data.
//
// The model's train net (worker/trainer/models/, as published) with each
// Data layer replaced by an Input layer of the model's image shape at
// --batch, filled once with N(0, 1) pixels and labels i mod 10, so no data
// loading is timed (as `caffe time` and the PyTorch baseline of
// scripts/gpu_bench_torch.py). SGD with momentum 0.9, base_lr 0.001.
// --warmup iterations are not timed (allocation, cuBLAS's first calls); then
// --iterations of Solver::Step are, and as many forward and backward passes
// apart (each waited for on the device) for the split. One JSON row per
// model (--json): model, device, batch, params, iteration_ms, images_per_s,
// forward_ms, backward_ms.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <google/protobuf/text_format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/harness/watchdog.h"
#include "common/base/clock.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/gpu/device_flags.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/net_timer.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

DEFINE_string(model_dir, "worker/trainer/models",
              "train: where the models' prototxt files are (relative to the working directory).");
DEFINE_int32(gpu, -1, "train: the CUDA device to train on; -1: the CPU.");
DEFINE_bool(layers, false,
            "train: also print each layer's average forward and backward time (nereus_worker --time's report); "
            "the JSON has them whatever this says.");
DEFINE_string(net_dir, "",
              "train: write each --model's synthetic train net (its Data layers as Input layers at --batch) to "
              "DIR/<model>.prototxt and exit without training (scripts/gpu_job_bench.py trains them in jobs).");
DECLARE_string(model);
DECLARE_int32(batch);
DECLARE_int32(iterations);
DECLARE_int32(warmup);
DECLARE_string(json);

namespace nereus {
namespace bench {
namespace {

using Clock = SteadyClock;

struct TrainModel {
  const char* file;
  std::vector<int> image;  // C, H, W of one input
};

// The models `train` knows: --model names one or several (comma separated).
const std::map<std::string, TrainModel>& TrainModels() {
  static const std::map<std::string, TrainModel> models = {
      {"lenet", {"lenet_train_test.prototxt", {1, 28, 28}}},
      {"cifar10_full", {"cifar10_full_train_test.prototxt", {3, 32, 32}}},
      {"caffenet", {"caffenet_train_val.prototxt", {3, 227, 227}}},
      {"vgg19", {"vgg19_train_val.prototxt", {3, 224, 224}}},
      {"resnet50", {"resnet50_train_val.prototxt", {3, 224, 224}}},
  };
  return models;
}

// The model's net with its TRAIN Data layers as Input layers of the given
// batch (TEST-only layers dropped).
StatusOr<caffe::NetParameter> SyntheticNet(const TrainModel& model, int batch) {
  caffe::NetParameter in;
  RETURN_IF_ERROR(ReadNetParameterFromTextFile(FLAGS_model_dir + "/" + model.file, &in));
  caffe::NetParameter out = in;
  out.clear_layer();
  int inputs = 0;
  for (const caffe::LayerParameter& layer : in.layer()) {
    bool test_only = false;
    for (const auto& rule : layer.include()) test_only |= rule.has_phase() && rule.phase() == caffe::TEST;
    if (test_only) continue;
    if (layer.type() != "Data") {
      *out.add_layer() = layer;
      continue;
    }
    caffe::LayerParameter input;
    input.set_name(layer.name());
    input.set_type("Input");
    for (const std::string& top : layer.top()) input.add_top(top);
    caffe::BlobShape* data = input.mutable_input_param()->add_shape();
    data->add_dim(batch);
    for (int d : model.image) data->add_dim(d);
    if (layer.top_size() > 1) input.mutable_input_param()->add_shape()->add_dim(batch);
    *out.add_layer() = input;
    ++inputs;
  }
  if (inputs == 0) return InvalidArgumentError(std::string(model.file) + " has no Data layer to replace");
  return out;
}

// --net_dir: each model's synthetic net as a prototxt, for training elsewhere.
int WriteNets(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    auto net = SyntheticNet(TrainModels().at(name), FLAGS_batch);
    if (!net.ok()) {
      LOG(ERROR) << "train: " << name << ": " << net.status().message();
      return 1;
    }
    std::string text;
    CHECK(google::protobuf::TextFormat::PrintToString(*net, &text));
    const std::string path = FLAGS_net_dir + "/" + name + ".prototxt";
    std::ofstream out(path);
    out << text;
    if (!out) {
      LOG(ERROR) << "train: cannot write --net_dir file " << path;
      return 1;
    }
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

int RunOne(const std::string& name, const TrainModel& model, JsonRows* rows) {
  auto net = SyntheticNet(model, FLAGS_batch);
  if (!net.ok()) {
    LOG(ERROR) << "train: " << name << ": " << net.status().message();
    return 1;
  }
  caffe::SolverParameter param;
  *param.mutable_net_param() = *net;
  param.set_base_lr(0.001f);
  param.set_momentum(0.9f);
  param.set_weight_decay(0.0005f);
  param.set_lr_policy("fixed");
  param.set_max_iter(1 << 30);
  param.set_display(0);
  param.set_random_seed(1);
  SolverOptions options;
  options.gpu = FLAGS_gpu >= 0 ? FLAGS_gpu : SolverOptions::kCpu;
  options.device = gpu::DeviceOptionsFromFlags();
  const auto build_start = Clock::now();
  auto solver = Solver::Create(param, DefaultLayerRegistry(), nullptr, options);
  if (!solver.ok()) {
    LOG(ERROR) << "train: " << name << ": " << solver.status().message();
    return 1;
  }
  Net* train = (*solver)->net();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t l = 0; l < train->layers().size(); ++l) {
    if (std::string(train->layers()[l]->type()) != "Input") continue;
    const auto& tops = train->top_vecs()[l];
    float* data = tops[0]->mutable_cpu_data();
    for (int i = 0; i < tops[0]->count(); ++i) data[i] = normal(rng);
    if (tops.size() > 1) {
      float* label = tops[1]->mutable_cpu_data();
      for (int i = 0; i < tops[1]->count(); ++i) label[i] = static_cast<float>(i % 10);
    }
  }
  const double build_s = SecondsSince(build_start);
  gpu::Device* device = (*solver)->device();
  auto wait = [device]() { return device != nullptr ? device->Synchronize() : Status::OK(); };

  Status s = (*solver)->Step(FLAGS_warmup);
  if (s.ok()) s = wait();
  if (!s.ok()) {
    LOG(ERROR) << "train: " << name << ": warm-up: " << s.message();
    return 1;
  }
  const auto start = Clock::now();
  s = (*solver)->Step(FLAGS_iterations);
  if (s.ok()) s = wait();
  const double step_s = SecondsSince(start);
  if (!s.ok()) {
    LOG(ERROR) << "train: " << name << ": " << s.message();
    return 1;
  }
  // Where the time goes, layer by layer (nereus_worker --time's report).
  auto timing = TimeNet(train, FLAGS_iterations);
  if (!timing.ok()) {
    LOG(ERROR) << "train: " << name << ": " << timing.status().message();
    return 1;
  }
  const int n = FLAGS_iterations;
  const double iteration_ms = 1e3 * step_s / n;
  const double images_per_s = static_cast<double>(n) * FLAGS_batch / step_s;
  const std::string where = device != nullptr ? device->description() : "CPU";
  std::printf("%-13s batch %3d  %9.2f ms/iteration  %9.1f images/s  (forward %.2f ms, backward %.2f ms; %s)\n",
              name.c_str(), FLAGS_batch, iteration_ms, images_per_s, timing->forward_ms, timing->backward_ms,
              where.c_str());
  if (FLAGS_layers) std::printf("%s", FormatNetTiming(*timing).c_str());
  std::fflush(stdout);
  Record r;
  r.Set("model", name)
      .Set("device", where)
      .Set("gpu", FLAGS_gpu)
      .Set("batch", FLAGS_batch)
      .Set("params", static_cast<long long>(train->num_learnable_scalars()))
      .Set("warmup", FLAGS_warmup)
      .Set("iterations", n)
      .Set("iteration_ms", iteration_ms)
      .Set("images_per_s", images_per_s)
      .Set("forward_ms", timing->forward_ms)
      .Set("backward_ms", timing->backward_ms)
      .Set("peak_device_bytes", static_cast<unsigned long long>(timing->peak_device_bytes))
      .Set("build_s", build_s)
      .Raw("timing", NetTimingJson(*timing));
  return rows->Add(r) ? 0 : 1;
}

}  // namespace

int RunTrain(BenchContext& ctx) {
  if (FLAGS_batch <= 0 || FLAGS_iterations <= 0 || FLAGS_warmup < 0) {
    LOG(ERROR) << "train: --batch and --iterations must be positive, --warmup at least 0";
    return 2;
  }
  std::vector<std::string> names = SplitCsv(FLAGS_model);
  for (const std::string& name : names) {
    if (TrainModels().count(name) == 0) {
      std::string known;
      for (const auto& [k, v] : TrainModels()) known += (known.empty() ? "" : ", ") + k;
      LOG(ERROR) << "train: unknown --model=" << name << " (expected one or more of: " << known << ")";
      return 2;
    }
  }
  if (!FLAGS_net_dir.empty()) return WriteNets(names);
  if (FLAGS_gpu >= 0) {
    const Status usable = gpu::CheckDeviceId(FLAGS_gpu);
    if (!usable.ok()) {
      LOG(ERROR) << "train: --gpu=" << FLAGS_gpu << ": " << usable.message();
      return 2;
    }
  }
  JsonRows rows(FLAGS_json);
  for (const std::string& name : names) {
    ctx.watchdog->Phase("train " + name);
    if (int rc = RunOne(name, TrainModels().at(name), &rows)) return rc;
  }
  ctx.watchdog->Idle();
  return 0;
}

}  // namespace bench
}  // namespace nereus

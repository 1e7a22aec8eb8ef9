#include "worker/bridge/trainer_runner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>
#include <utility>

#include "common/base/clock.h"
#include "worker/bridge/client_parameter_sync.h"
#include "worker/bridge/cuda_staging.h"
#include "worker/trainer/data/register_data_layers.h"
#include "worker/trainer/hdf5_snapshot.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace {

using Clock = std::chrono::steady_clock;

// The shipped layers, with the train phase's data layers reading `shard`;
// test data layers read their whole source.
LayerRegistry ShardedLayerRegistry(const data::DataLayerOptions& shard) {
  LayerRegistry registry;
  RegisterComputeLayers(&registry);
  RegisterDataLayers(&registry, shard);
  return registry;
}

// Workers other than 0 neither test nor snapshot.
void KeepTrainingOnly(caffe::SolverParameter* p) {
  p->clear_test_net();
  p->clear_test_net_param();
  p->clear_test_iter();
  p->clear_test_state();
  p->set_test_interval(0);
  p->set_test_initialization(false);
  p->set_snapshot(0);
  p->set_snapshot_after_train(false);
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string JsonNumber(const std::optional<float>& v) { return v ? JsonNumber(*v) : "null"; }

// A JSON string: quotes, backslashes and control characters escaped.
std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// "%.4f", as the summary line prints losses and accuracies.
std::string Fixed4(float v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4f", v);
  return buf;
}

}  // namespace

std::string TrainSummaryJson(const TrainSummary& s) {
  std::ostringstream os;
  os << "{\"iterations\": " << s.iterations << ", \"train_loss\": " << JsonNumber(s.train_loss)
     << ", \"test_iteration\": " << (s.test_iter ? std::to_string(*s.test_iter) : "null")
     << ", \"test_accuracy\": " << JsonNumber(s.test_accuracy) << ", \"test_loss\": " << JsonNumber(s.test_loss)
     << ", \"test_outputs\": ";
  if (s.test_iter) {
    os << "{";
    for (size_t i = 0; i < s.test_outputs.size(); ++i) {
      os << (i > 0 ? ", " : "") << JsonString(s.test_outputs[i].first) << ": " << JsonNumber(s.test_outputs[i].second);
    }
    os << "}";
  } else {
    os << "null";
  }
  os << ", \"test_note\": " << (s.test_note.empty() ? "null" : JsonString(s.test_note))
     << ", \"images_per_s\": " << JsonNumber(s.images_per_s) << ", \"wall_s\": " << JsonNumber(s.wall_s)
     << ", \"wait_s\": " << JsonNumber(s.wait_s) << ", \"rank\": " << s.rank << ", \"workers\": " << s.num_workers
     << ", \"batch_size\": " << s.batch_size << "}\n";
  return os.str();
}

std::string TrainSummaryLine(const TrainSummary& s, const std::string& who) {
  std::string test = s.test_note;
  if (s.test_iter) {
    test = "test at iteration " + std::to_string(*s.test_iter) + ":";
    for (size_t i = 0; i < s.test_outputs.size(); ++i) {
      test += (i > 0 ? ", " : " ") + s.test_outputs[i].first + " " + Fixed4(s.test_outputs[i].second);
    }
    if (s.test_outputs.empty()) test += " no outputs";
  }
  char tail[160];
  std::snprintf(tail, sizeof(tail), ", %.0f images/s%s", s.images_per_s, s.num_workers > 1 ? " (all workers)" : "");
  char head[160];
  std::snprintf(head, sizeof(head), "%s: %lld iterations in %.1f s, train loss %s, ", who.c_str(),
                static_cast<long long>(s.iterations), s.wall_s, Fixed4(s.train_loss).c_str());
  return head + test + tail;
}

StatusOr<std::unique_ptr<DeviceStaging>> StagingForDevice(gpu::Device* device, const StagingFactory& factory) {
  if (device == nullptr) return std::unique_ptr<DeviceStaging>();
#ifdef NEREUS_HAVE_CUDA
  auto made = factory ? factory(device) : NewCudaStaging(device);
#else
  if (!factory) return FailedPreconditionError("a device staging needs CUDA: Nereus was built without it");
  auto made = factory(device);
#endif
  if (!made.ok()) return made.status().Annotate("staging the parameters of " + device->description());
  if (*made == nullptr || !(*made)->device_memory()) {
    return InternalError("the staging made for " + device->description() + " does not copy device memory");
  }
  return made;
}

namespace {

// What one formation of the job holds, in the order it must go: the
// members are destroyed client first, then the sync, the staging and the
// solver, so that on an error the client's outstanding pulls write into the
// solver's parameters (or the bridge's mirrors, with a staging) until the
// client is gone; the staging (a GPU net's) goes before the solver, which
// owns its device. On the way out the staging's pending hand-overs (which
// call the client) finish first, while the client still exists.
struct Formation {
  std::unique_ptr<Solver> solver;
  std::unique_ptr<DeviceStaging> staging;
  std::unique_ptr<ClientParameterSync> sync;
  std::unique_ptr<Client> client;
  Formation() = default;
  Formation(const Formation&) = delete;
  Formation& operator=(const Formation&) = delete;
  ~Formation() {
    if (staging != nullptr) staging->Drain().IgnoreError();
  }
};

// Fills the summary's test fields from the last test of test net 0.
void ReportTest(const std::optional<TestResult>& test, int64_t start_iter, int64_t end_iter, bool has_test_nets,
                TrainSummary* s) {
  if (!test) {
    s->test_note = s->rank != 0 ? "worker 0 runs the tests" : has_test_nets ? "no test ran" : "no test net";
    return;
  }
  if (test->iter == start_iter && end_iter > start_iter) {
    s->test_note =
        "no test after training (the last test ran at iteration " + std::to_string(test->iter) + ", before it)";
    return;
  }
  s->test_iter = test->iter;
  std::map<std::string, int> size;
  for (const std::string& name : test->names) ++size[name];
  std::map<std::string, int> seen;
  for (size_t i = 0; i < test->names.size(); ++i) {
    const std::string& name = test->names[i];
    const std::string key = size[name] == 1 ? name : name + "[" + std::to_string(seen[name]++) + "]";
    s->test_outputs.emplace_back(key, test->mean_scores[i]);
    if (test->loss_weights[i] != 0.0f)
      s->test_loss = s->test_loss.value_or(0.0f) + test->loss_weights[i] * test->mean_scores[i];
  }
  const float accuracy = test->Score("accuracy");
  if (!std::isnan(accuracy)) s->test_accuracy = accuracy;
}

// One formation of the job (or the standalone run), its objects in `f`.
// `rank` receives this worker's rank once it has joined.
StatusOr<TrainSummary> TrainFormation(const TrainRunOptions& options, int* rank, Formation* f) {
  caffe::SolverParameter param;
  RETURN_IF_ERROR(ReadSolverParameterFromTextFile(options.solver_file, &param));

  TrainSummary summary;
  std::unique_ptr<Solver>& solver = f->solver;
  std::unique_ptr<DeviceStaging>& staging = f->staging;
  std::unique_ptr<ClientParameterSync>& sync = f->sync;
  std::unique_ptr<Client>& client = f->client;
  data::DataLayerOptions shard;
  if (!options.standalone) {
    auto connected = Client::Connect(options.client);
    if (!connected.ok()) return connected.status().Annotate("joining the job at " + options.client.coordinator);
    client = std::move(connected).value();
    summary.rank = client->rank();
    *rank = summary.rank;
    summary.num_workers = client->num_workers();
    shard.shard_index = summary.rank;
    shard.num_shards = summary.num_workers;
    const JobInfo& job = client->job();
    if (!options.resume_file.empty()) {
      // A distributed snapshot: this .solverstate names the iteration, the
      // servers' checkpoint of that clock holds the weights and the history.
      caffe::SolverState state;
      RETURN_IF_ERROR(IsHdf5Path(options.resume_file) ? ReadSolverStateFromHdf5(options.resume_file, &state)
                                                      : ReadProtoFromBinaryFile(options.resume_file, &state));
      if (!job.resume || job.start_clock != state.iter()) {
        return InvalidArgumentError(
            "--snapshot=" + options.resume_file + " is at iteration " + std::to_string(state.iter()) + " but " +
            (job.resume ? "the servers resumed from their checkpoint of clock " + std::to_string(job.start_clock)
                        : std::string("the job was not started with --resume")) +
            ": in a job the servers hold the weights and the momentum, so a distributed snapshot is worker 0's "
            ".solverstate plus the servers' checkpoint of the same clock (start every process with --resume and "
            "servers whose --checkpoint_dir holds that clock)");
      }
    }
    if (job.resume) {
      shard.skip_batches = static_cast<uint64_t>(job.start_clock) * std::max(1, param.iter_size());
      LOG(INFO) << "worker " << summary.rank << ": resuming at iteration " << job.start_clock
                << " from the servers' checkpoint";
    }
    sync = std::make_unique<ClientParameterSync>(client.get());
    // Sufficient factors carry the gradient of one forward/backward, unclipped.
    sync->set_factors_allowed(param.iter_size() == 1 && param.clip_gradients() < 0 &&
                              (options.client.sfb != SfbMode::kOff || !options.client.sfb_schedule.empty()));
    // Only HybComm's pricing reads the rebuilding device's rates.
    sync->set_time_factor_rates(options.client.sfb == SfbMode::kAuto);
    if (summary.rank != 0) KeepTrainingOnly(&param);
    LOG(INFO) << "worker " << summary.rank << " of " << summary.num_workers << ": training data shard "
              << shard.shard_index << "/" << shard.num_shards
              << (summary.rank == 0 ? "; this worker runs the tests" : "; worker 0 runs the tests");
  }
  const std::string who = options.standalone ? "standalone" : "worker " + std::to_string(summary.rank);
  const int workers = summary.num_workers;

  SolverOptions solver_options;
  solver_options.gpu = options.gpu >= 0 ? options.gpu : SolverOptions::kGpuFromSolver;
  solver_options.device = options.device;
  const bool distributed = !options.standalone;
  solver_options.on_display = [&who, workers, distributed](const TrainProgress& p) {
    std::ostringstream line;
    line << who << ": Iteration " << p.iter << ", loss = " << p.loss << ", lr = " << p.lr << ", "
         << static_cast<int64_t>(p.images_per_s) << " images/s";
    if (workers > 1) line << " (job " << static_cast<int64_t>(p.images_per_s * workers) << ")";
    const double total = p.compute_s + p.wait_s;
    line.precision(3);
    line << ", compute " << p.compute_s << " s";
    if (distributed) {
      line << ", waiting for servers " << p.wait_s << " s";
      if (total > 0) line << " (" << static_cast<int>(std::lround(100.0 * p.wait_s / total)) << "%)";
    }
    LOG(INFO) << line.str();
  };
  // The last test of test net 0, reported in the summary once training is over.
  std::optional<TestResult> last_test;
  solver_options.on_test = [&who, &last_test](const TestResult& r) {
    std::ostringstream line;
    line << who << ": Iteration " << r.iter << ", test net #" << r.test_net_id << ":";
    for (size_t i = 0; i < r.names.size(); ++i) line << " " << r.names[i] << " = " << r.mean_scores[i];
    LOG(INFO) << line.str();
    if (r.test_net_id == 0) last_test = r;
  };

  const LayerRegistry registry = ShardedLayerRegistry(shard);
  auto created = Solver::Create(param, registry, sync.get(), std::move(solver_options));
  if (!created.ok()) return created.status().Annotate(options.solver_file);
  solver = std::move(created).value();
  if (sync) {
    sync->set_net(solver->net());
    // A net on a GPU: its gradients and weights cross between the device and
    // the client's host mirrors through the staging (docs/GPU.md, "Staging").
    auto made = StagingForDevice(solver->device());
    if (!made.ok()) return made.status();
    staging = std::move(made).value();
    sync->set_staging(staging.get());
    if (staging != nullptr) {
      LOG(INFO) << who << ": the gradients and weights of " << solver->device()->description()
                << " are staged through pinned host memory";
    }
  }
  if (client && !options.client.timeline.empty()) {
    // Per-layer forward and backward on the timeline, next to the client's
    // communication spans. Registered after the solver's own hooks, so a span
    // starts once the layer's weights are in (compute, not waiting).
    Net* net = solver->net();
    Solver* s = solver.get();
    auto begin = std::make_shared<int64_t>(0);
    auto mark = [begin](int) {
      *begin = MonotonicMicros();
      return Status::OK();
    };
    auto span = [net, s, begin, c = client.get()](const char* what) {
      return [net, s, begin, c, what](int layer) {
        c->TraceSpan(std::string(what) + " " + net->UniqueLayerName(layer), s->iter(), *begin, MonotonicMicros());
        return Status::OK();
      };
    };
    net->add_before_forward(mark);
    net->add_after_forward(span("forward"));
    net->add_before_backward(mark);
    net->add_after_backward(span("backward"));
  }
  for (const std::string& file : options.weights_files) {
    RETURN_IF_ERROR(CopyTrainedLayersFromFile(file, solver->net()));
    LOG(INFO) << who << ": initial weights from " << file;
  }
  if (options.standalone && !options.resume_file.empty()) RETURN_IF_ERROR(solver->Restore(options.resume_file));
  if (client && client->job().resume) solver->StartAt(client->job().start_clock);
  const int64_t start_iter = solver->iter();

  const auto start = Clock::now();
  RETURN_IF_ERROR(solver->Solve());
  gpu::ScopedDevice scope(solver->device());  // The last weights' upload and their read below.
  if (sync) RETURN_IF_ERROR(sync->Drain());
  summary.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  summary.iterations = solver->iter() - start_iter;
  summary.train_loss = solver->smoothed_loss();
  ReportTest(last_test, start_iter, solver->iter(), !param.test_iter().empty(), &summary);
  summary.wait_s = solver->total_wait_s();
  summary.batch_size = solver->images_per_iter();
  if (summary.wall_s > 0) {
    summary.images_per_s =
        static_cast<double>(summary.iterations) * summary.batch_size * summary.num_workers / summary.wall_s;
  }
  if (!options.weights_out.empty()) {
    caffe::NetParameter weights;
    solver->net()->ToProto(&weights);
    RETURN_IF_ERROR(WriteProtoToBinaryFile(weights, options.weights_out));
  }
  if (client) RETURN_IF_ERROR(client->Finish().Annotate("finishing the job"));
  return summary;
}

// TrainFormation, and a failure of this worker's own (not the job's abort,
// not a rollback) told to the job, which ends at once naming it.
StatusOr<TrainSummary> RunTrainingOnce(const TrainRunOptions& options, int* rank) {
  Formation f;
  StatusOr<TrainSummary> result = TrainFormation(options, rank, &f);
  if (!result.ok() && f.client != nullptr && !IsRollback(result.status())) f.client->Fail(result.status());
  return result;
}

}  // namespace

StatusOr<TrainSummary> RunTraining(const TrainRunOptions& options) {
  TrainRunOptions run = options;
  int rank = options.client.rank;
  while (true) {
    auto result = RunTrainingOnce(run, &rank);
    if (result.ok() || !IsRollback(result.status())) return result;
    // The job rolled back (a node rejoined it): join it again with this rank
    // and go on from the clock it rolled back to, as --resume does.
    LOG(WARNING) << "worker " << rank << ": " << result.status().message()
                 << "; joining the job again to roll back to its checkpoint";
    run.client.rank = rank;
    run.client.resume = true;
    run.resume_file.clear();  // Its iteration is not the one the job rolls back to.
  }
}

}  // namespace nereus

// nereus_worker: a data-parallel worker. With --model=synthetic|quadratic it
// trains a synthetic model through the parameter servers; with --solver=FILE
// it is the Caffe-style trainer (worker/train_main.cc), alone (--standalone)
// or as a worker of a job.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/base/init_binary.h"
#include "common/launch/subprocess.h"
#include "common/net/node_flags.h"
#include "common/update/sfb.h"
#include "common/update/sgd.h"
#include "nereus/client.h"
#include "worker/client/client_flags.h"
#include "worker/client/client_internal.h"
#include "worker/client/options_proto.h"
#include "worker/synthetic/synthetic_model.h"
#ifdef NEREUS_HAVE_TRAINER
#include "worker/train_main.h"
#endif

DEFINE_string(model, "synthetic",
              "Synthetic mode (without --solver). synthetic: gradients are coupling*w + deterministic noise from "
              "(--seed, rank, clock); quadratic: "
              "gradients of 0.5*|w - target|^2 (converges; used to check async/SSP).");
DEFINE_string(tensors, "1000,250x10,64x3x3x3",
              "Synthetic model: comma-separated tensor shapes, dimensions joined by 'x'.");
DEFINE_int32(iterations, 20, "Synthetic mode: training iterations (clocks). (--solver: max_iter of the solver.)");
DEFINE_uint64(seed, 1, "Seed of the synthetic model's initial weights and gradients.");
DEFINE_double(coupling, 0.01, "Synthetic model: weight term of the gradient.");
DEFINE_int32(fc_batch, 0,
             "Synthetic model: if > 0, every 2-D tensor (rows x cols) is a fully connected weight whose gradient is "
             "left^T * right, two factors of this many rows (noise from --seed, rank, clock), and the worker uses "
             "the layer-wise API (one layer per tensor) so that --sfb can send those factors to the other workers.");
DEFINE_int32(compute_ms, 0, "Emulated compute time per iteration, in milliseconds.");
DEFINE_int32(slow_rank, -1, "This worker rank sleeps --slow_ms extra per iteration (to test SSP).");
DEFINE_int32(slow_ms, 0, "Extra emulated compute time of --slow_rank, in milliseconds.");
DEFINE_int32(display, 10,
             "Synthetic mode: print a progress line every this many iterations (0: never). (--solver: the "
             "solver's display.)");
DEFINE_string(weights_out, "",
              "After training, write the final weights here: synthetic mode, every tensor's float32 values in "
              "order; trainer mode (--solver), a .caffemodel of the train net.");
DEFINE_string(summary_json, "",
              "After training, write a JSON summary here. Synthetic mode: loss, pull versions, timing. Trainer mode: "
              "{\"iterations\", \"train_loss\" (final smoothed loss), \"test_iteration\" (the iteration of the last "
              "test of test net 0, when it ran after training), \"test_accuracy\" (its \"accuracy\" output), "
              "\"test_loss\" (its weighted loss outputs summed), \"test_outputs\" (every output by name), "
              "\"test_note\" (why no test is reported: none after training, no test net, a worker other than 0), "
              "\"images_per_s\" (training images of all workers per second of wall_s), \"wall_s\" (training wall "
              "time, tests included), \"wait_s\", \"rank\", \"workers\", \"batch_size\"}; absent values are "
              "null.");
// Solver settings for the synthetic model (the prototxt solver supplies them otherwise).
DEFINE_double(base_lr, 0.01, "Base learning rate.");
DEFINE_string(lr_policy, "fixed", "Learning-rate policy: fixed, step, exp, inv, multistep, poly or sigmoid.");
DEFINE_double(gamma, 0.1, "gamma of the step/exp/inv/multistep/sigmoid policies.");
DEFINE_double(power, 0.75, "power of the inv/poly policies.");
DEFINE_int32(stepsize, 10, "stepsize of the step/sigmoid policies.");
DEFINE_double(momentum, 0.9, "Momentum.");
DEFINE_double(weight_decay, 0.0005, "Weight decay.");
DEFINE_string(regularization_type, "L2", "L2 or L1.");
DEFINE_string(solver_type, "SGD",
              "Synthetic mode: the servers' solver, as Caffe's type: SGD, Nesterov, AdaGrad, RMSProp, AdaDelta or "
              "Adam (--solver: the prototxt's type).");
DEFINE_double(delta, 1e-8, "Synthetic mode: Caffe's delta (AdaGrad, RMSProp, AdaDelta, Adam).");
DEFINE_double(momentum2, 0.999, "Synthetic mode: Caffe's momentum2 (Adam's beta2).");
DEFINE_double(rms_decay, 0.99, "Synthetic mode: Caffe's rms_decay (RMSProp).");

DEFINE_string(sfb_inject_costs, "",
              "Synthetic mode, tests of HybComm's measured choice: NAME:PS_MS:SFB_MS[,...]: the clock's period the "
              "trials read is the sum, over these tensors, of the cost of each one's path in that clock (ms per "
              "clock through the servers, as factors) instead of the time measured, so the choice does not depend "
              "on the machine's speed.");
DEFINE_int32(sfb_rebuild_delay_ms, 0,
             "Synthetic mode with --fc_batch: the worker rebuilds sufficient-factor updates itself (a FactorApplier "
             "doing the client's CPU arithmetic), this many milliseconds slower each: a slow rebuilding device, for "
             "tests of HybComm's measured choice. 0: the client rebuilds.");
DEFINE_int64(exec_at_clock, -1,
             "Synthetic mode, tests: at the start of this clock (before its compute) worker --exec_rank runs "
             "--exec_command and waits for it (e.g. tc reshaping the link of the network namespace it runs in).");
DEFINE_string(exec_command, "",
              "Synthetic mode, tests: the command of --exec_at_clock, its words separated by spaces.");
DEFINE_int32(exec_rank, 0, "Synthetic mode, tests: the worker that runs --exec_command.");
DEFINE_int32(pause_ms, 0,
             "Synthetic mode with --fc_batch, tests: after the backward of each clock in --pause_clocks, every "
             "worker pauses this many milliseconds before waiting for the next clock's weights, as a trainer's test "
             "phase or snapshot between iterations would.");
DEFINE_string(pause_clocks, "", "Synthetic mode: the clocks of --pause_ms, comma-separated (e.g. 9,10,11).");

namespace nereus {
namespace {

// A rebuilding device that is slower than this CPU by a fixed time per
// update (--sfb_rebuild_delay_ms): the client's own arithmetic
// (ApplySufficientFactors, the same bits), after a sleep that stands for the
// slower device, not for synchronisation.
class DelayedRebuild final : public FactorApplier {
 public:
  DelayedRebuild(const pb::SgdConfig& sgd, int delay_ms) : sgd_(sgd), delay_ms_(delay_ms) {}
  // Before Init: tensor `tensor`'s weights (rows x cols) at `data`.
  void Add(int tensor, float* data, int64_t rows, int64_t cols) {
    Entry& e = entries_[tensor];
    e.data = data;
    e.shape = {rows, cols};
    e.history.assign(static_cast<size_t>(rows * cols), 0.0f);
  }
  Status ApplyFactors(int tensor, int64_t clock, const std::vector<RankFactors>& by_rank) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    Entry& e = entries_.at(tensor);
    std::vector<Factors> factors;
    for (const RankFactors& r : by_rank) {
      factors.push_back({r.k, Buffer(nullptr, r.left, static_cast<size_t>(r.k * e.shape.rows) * sizeof(float)),
                         Buffer(nullptr, r.right, static_cast<size_t>(r.k * e.shape.cols) * sizeof(float))});
    }
    std::vector<const Factors*> views;
    for (const Factors& f : factors) views.push_back(&f);
    ApplySufficientFactors(sgd_, clock, 1.0f, 1.0f, views, e.shape, e.data, e.history.data(), &e.scratch);
    return Status::OK();
  }
  std::string rebuild_on() const override {
    return "this worker's CPU, " + std::to_string(delay_ms_) + " ms slower (--sfb_rebuild_delay_ms)";
  }
  std::string rebuild_engine() const override { return "the client's CPU arithmetic (common/update/sfb)"; }
  double rebuild_gflops() const override { return 0; }
  double update_gbytes() const override { return 0; }
  bool switchable() const override { return true; }
  Status BeginFactors(int tensor, int64_t, const float* history) override {
    Entry& e = entries_.at(tensor);
    std::copy(history, history + e.history.size(), e.history.begin());
    return Status::OK();
  }
  Status EndFactors(int tensor, int64_t, float* weights, float* history) override {
    Entry& e = entries_.at(tensor);
    std::copy(e.data, e.data + e.history.size(), weights);
    std::copy(e.history.begin(), e.history.end(), history);
    return Status::OK();
  }

 private:
  struct Entry {
    float* data = nullptr;
    FactorShape shape;
    std::vector<float> history;
    FactorScratch scratch;
  };
  const pb::SgdConfig sgd_;
  const int delay_ms_;
  std::map<int, Entry> entries_;  // Filled before Init, then only the entries change.
};

// --pause_clocks: "9,10,11" as clocks. Errors name the bad entry.
StatusOr<std::set<int64_t>> ParseClocks(const std::string& spec) {
  std::set<int64_t> clocks;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0)
      return InvalidArgumentError("bad clock \"" + item + "\" in \"" + spec + "\": expected clocks >= 0, e.g. 9,10,11");
    clocks.insert(v);
  }
  return clocks;
}

// Runs --exec_command (see --exec_at_clock).
Status RunExecCommand() {
  std::vector<std::string> argv;
  std::istringstream words(FLAGS_exec_command);
  for (std::string w; words >> w;) argv.push_back(w);
  if (argv.empty()) return InvalidArgumentError("--exec_at_clock without --exec_command");
  std::string out;
  auto code = RunCommand(argv, &out, std::chrono::seconds(30));
  if (!code.ok()) return code.status().Annotate("--exec_command");
  if (*code != 0) return UnavailableError("--exec_command \"" + FLAGS_exec_command + "\" failed: " + out);
  LOG(INFO) << "ran --exec_command \"" << FLAGS_exec_command << "\"";
  return Status::OK();
}

// RunSyntheticJob's result when the job rolled back (IsRollback).
constexpr int kRolledBack = -1;

int Fail(const Status& st, const char* what) {
  if (IsRollback(st)) {
    LOG(WARNING) << "worker: " << what << ": " << st.message();
    return kRolledBack;
  }
  LOG(ERROR) << "worker: " << what << ": " << st.message();
  return 1;
}

int RunSyntheticJob(const ClientOptions& options, SyntheticKind kind, const pb::SgdConfig& sgd,
                    const std::vector<std::vector<int64_t>>& shapes, int* rank_out);

// Fail, once the job is told (Client::Fail: it ends at once, naming this
// worker and why); nothing is told when the job itself aborted or rolled
// back.
int FailJob(Client* client, const Status& st, const char* what) {
  if (!IsRollback(st)) client->Fail(st.Annotate(what));
  return Fail(st, what);
}

int RunSynthetic() {
  SyntheticKind kind;
  if (FLAGS_model == "synthetic") {
    kind = SyntheticKind::kNoise;
  } else if (FLAGS_model == "quadratic") {
    kind = SyntheticKind::kQuadratic;
  } else {
    LOG(ERROR) << "--model must be synthetic or quadratic, got \"" << FLAGS_model << "\"";
    return 2;
  }
  auto shapes = ParseTensorShapes(FLAGS_tensors);
  if (!shapes.ok()) return Fail(shapes.status(), "--tensors");
  if (FLAGS_iterations < 0) {
    LOG(ERROR) << "--iterations must be >= 0";
    return 2;
  }
  pb::SgdConfig sgd;
  sgd.set_base_lr(FLAGS_base_lr);
  sgd.set_lr_policy(FLAGS_lr_policy);
  sgd.set_gamma(FLAGS_gamma);
  sgd.set_power(FLAGS_power);
  sgd.set_stepsize(FLAGS_stepsize);
  sgd.set_max_iter(FLAGS_iterations);
  sgd.set_momentum(FLAGS_momentum);
  sgd.set_weight_decay(FLAGS_weight_decay);
  sgd.set_regularization_type(FLAGS_regularization_type);
  auto type = SolverTypeFromName(FLAGS_solver_type);
  if (!type.ok()) return Fail(type.status(), "--solver_type");
  sgd.set_type(*type);
  sgd.set_delta(FLAGS_delta);
  sgd.set_momentum2(FLAGS_momentum2);
  sgd.set_rms_decay(FLAGS_rms_decay);
  Status st = ValidateSgdConfig(sgd);
  if (!st.ok()) return Fail(st, "solver flags");

  // The shared node and scheduling flags (--schedule, --credit_bytes, ...):
  // the synthetic model uses whole-tensor Push/Pull, ordered by the same
  // scheduler.
  auto co = ClientOptionsFromFlags();
  if (!co.ok()) return Fail(co.status(), "flags");
  // Each time the job rolls back (a node rejoined it), this worker joins it
  // again with the same rank and resumes at the clock it rolled back to.
  ClientOptions options = *co;
  int code, rank = options.rank;
  while ((code = RunSyntheticJob(options, kind, sgd, *shapes, &rank)) == kRolledBack) {
    options.rank = rank;
    options.resume = true;
    LOG(WARNING) << "worker " << options.rank << ": joining the job again to roll back to its checkpoint";
  }
  return code;
}

int RunSyntheticJob(const ClientOptions& options, SyntheticKind kind, const pb::SgdConfig& sgd,
                    const std::vector<std::vector<int64_t>>& shapes, int* rank_out) {
  ClientInternals internals;
  auto injected = ParseInjectedCosts(FLAGS_sfb_inject_costs);
  if (!injected.ok()) return Fail(injected.status(), "--sfb_inject_costs");
  internals.sfb_injected_costs = *injected;
  auto pauses_or = ParseClocks(FLAGS_pause_clocks);
  if (!pauses_or.ok()) return Fail(pauses_or.status(), "--pause_clocks");
  const std::set<int64_t> pauses = FLAGS_pause_ms > 0 ? *pauses_or : std::set<int64_t>();
  // The buffers the client reads and writes, and the factor applier, before
  // the client: they must outlive it (nereus/client.h). Declared after it,
  // they were freed first when this function returned, while the client's
  // threads still ran: the TSan stage caught the host's aggregating worker
  // copying its own gradients out of a freed buffer after a rollback.
  const size_t T = shapes.size();
  std::vector<std::vector<float>> w(T), g(T), left(T), right(T);
  std::vector<const float*> init(T);
  std::unique_ptr<DelayedRebuild> delayed;
  if (FLAGS_sfb_rebuild_delay_ms > 0) delayed = std::make_unique<DelayedRebuild>(sgd, FLAGS_sfb_rebuild_delay_ms);
  auto client_or = ConnectClient(options, internals);
  if (!client_or.ok()) return Fail(client_or.status(), "joining the job");
  std::unique_ptr<Client> client = std::move(client_or).value();
  const int rank = client->rank();
  *rank_out = rank;
  Status st;

  SyntheticModel model(kind, FLAGS_seed, static_cast<float>(FLAGS_coupling));
  const bool layered = FLAGS_fc_batch > 0;
  const int64_t K = FLAGS_fc_batch;
  uint64_t total = 0;
  for (size_t t = 0; t < T; ++t) {
    const std::vector<int64_t>& shape = shapes[t];
    const uint64_t n = ElementCount(shape);
    total += n;
    w[t].resize(n);
    g[t].resize(n);
    model.InitialWeights(static_cast<int>(t), w[t].data(), n);
    init[t] = w[t].data();
    TensorSpec spec{"t" + std::to_string(t), shape, 1.0f, 1.0f};
    if (layered) {
      // Layer t holds tensor t; 2-D tensors are fully connected weights.
      spec.layer = static_cast<int>(t);
      spec.data = w[t].data();
      spec.diff = g[t].data();
      if (shape.size() == 2) {
        left[t].resize(K * shape[0]);
        right[t].resize(K * shape[1]);
        spec.factor_rows = K;
        spec.factor_left = left[t].data();
        spec.factor_right = right[t].data();
        if (delayed != nullptr) {
          delayed->Add(static_cast<int>(t), w[t].data(), shape[0], shape[1]);
          spec.factor_applier = delayed.get();
        }
      }
    }
    auto id = client->RegisterTensor(spec);
    if (!id.ok()) return FailJob(client.get(), id.status(), "registering tensors");
  }
  st = client->Init(SgdConfigFromProto(sgd), init);
  if (!st.ok()) return FailJob(client.get(), st, "Init");
  LOG(INFO) << "worker " << rank << ": " << T << " tensors, " << total << " parameters, " << FLAGS_iterations
            << " iterations, consistency " << ConsistencyName(client->job().consistency);

  auto pull_all = [&](int64_t clock, int64_t* version) -> Status {
    std::vector<Handle> hs;
    for (size_t t = 0; t < T; ++t) hs.push_back(client->Pull(static_cast<int>(t), w[t].data(), clock));
    *version = std::numeric_limits<int64_t>::max();
    for (auto& h : hs) {
      RETURN_IF_ERROR(h.Wait());
      *version = std::min(*version, h.version());
    }
    return Status::OK();
  };
  auto loss = [&] {
    double l = 0;
    for (size_t t = 0; t < T; ++t) l += model.Loss(static_cast<int>(t), w[t].data(), w[t].size());
    return l;
  };

  std::vector<std::pair<int64_t, int64_t>> pulls;  // (clock asked, version received)
  // A resumed job (--resume) continues from the servers' checkpoint: its
  // weights are those of start_clock, and the gradients of clock c depend only
  // on (seed, rank, c) and those weights, so the run goes on as if never stopped.
  const int64_t start_clock = client->job().start_clock;
  if (start_clock > FLAGS_iterations) {
    return FailJob(client.get(),
                   InvalidArgumentError("the job resumes at clock " + std::to_string(start_clock) +
                                        ", after --iterations=" + std::to_string(FLAGS_iterations)),
                   "--resume");
  }
  if (client->job().resume) LOG(INFO) << "worker " << rank << ": resuming at clock " << start_clock;
  int64_t version = 0;
  // The layer-wise API: GradientsReady from the last tensor to the first
  // after "backward", then WaitWeights(t, clock + 1) for every tensor.
  auto wait_all = [&](int64_t clock) -> Status {
    for (size_t t = 0; t < T; ++t) RETURN_IF_ERROR(client->WaitWeights(static_cast<int>(t), clock));
    return Status::OK();
  };
  if (layered && start_clock > 0)
    return FailJob(client.get(), InvalidArgumentError("--fc_batch (the layer-wise API) cannot resume a job yet"),
                   "--resume");
  st = layered ? wait_all(0) : pull_all(start_clock, &version);
  if (!st.ok()) return FailJob(client.get(), st, "pulling initial weights");
  pulls.emplace_back(start_clock, version);
  const double initial_loss = loss();
  const auto start = std::chrono::steady_clock::now();
  double comm_s = 0;
  for (int64_t clock = start_clock; clock < FLAGS_iterations; ++clock) {
    if (clock == FLAGS_exec_at_clock && rank == FLAGS_exec_rank) {
      st = RunExecCommand();
      if (!st.ok()) return FailJob(client.get(), st, "--exec_at_clock");
    }
    int ms = FLAGS_compute_ms + (rank == FLAGS_slow_rank ? FLAGS_slow_ms : 0);
    // Emulated compute, not synchronisation.
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    for (size_t t = 0; t < T; ++t) {
      const std::vector<int64_t>& shape = shapes[t];
      if (layered && shape.size() == 2) {
        model.Factors(rank, clock, static_cast<int>(t), K, shape[0], shape[1], left[t].data(), right[t].data());
        SyntheticModel::FactorProduct(K, shape[0], shape[1], left[t].data(), right[t].data(), g[t].data());
      } else {
        model.Gradient(rank, clock, static_cast<int>(t), w[t].data(), g[t].data(), g[t].size());
      }
    }
    if (layered) {
      for (size_t t = T; t-- > 0;) {
        st = client->GradientsReady(static_cast<int>(t), clock);
        if (!st.ok()) return FailJob(client.get(), st, "handing over gradients");
      }
      // Between iterations, outside the client (not synchronisation).
      if (pauses.count(clock) > 0) std::this_thread::sleep_for(std::chrono::milliseconds(FLAGS_pause_ms));
      // The weights of the next clock (an SFB tensor's are updated in place
      // until then: nothing may read them before).
      const auto c0 = std::chrono::steady_clock::now();
      st = wait_all(clock + 1);
      if (!st.ok()) return FailJob(client.get(), st, "waiting for weights");
      comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
      version = clock + 1;
    } else {
      const auto c0 = std::chrono::steady_clock::now();
      std::vector<Handle> hs;
      for (size_t t = 0; t < T; ++t) hs.push_back(client->Push(static_cast<int>(t), g[t].data(), clock));
      for (auto& h : hs) {
        st = h.Wait();
        if (!st.ok()) return FailJob(client.get(), st, "push");
      }
      st = pull_all(clock + 1, &version);
      if (!st.ok()) return FailJob(client.get(), st, "pull");
      comm_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    }
    pulls.emplace_back(clock + 1, version);
    if (FLAGS_display > 0 && (clock + 1) % FLAGS_display == 0) {
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      LOG(INFO) << "worker " << rank << " iteration " << clock + 1 << ", loss " << loss() << ", weights version "
                << version << ", " << (clock + 1 - start_clock) / el << " it/s, communication " << 100.0 * comm_s / el
                << "%";
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double final_loss = loss();
  st = client->Finish();
  if (!st.ok()) return FailJob(client.get(), st, "finishing");

  if (!FLAGS_weights_out.empty()) {
    std::ofstream out(FLAGS_weights_out, std::ios::binary);
    for (auto& v : w) out.write(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    if (!out) return Fail(UnavailableError("cannot write " + FLAGS_weights_out), "--weights_out");
  }
  if (!FLAGS_summary_json.empty()) {
    std::ofstream out(FLAGS_summary_json);
    out << "{\"rank\": " << rank << ", \"iterations\": " << FLAGS_iterations << ", \"initial_loss\": " << initial_loss
        << ", \"final_loss\": " << final_loss << ", \"wall_s\": " << wall << ", \"comm_s\": " << comm_s
        << ", \"pulls\": [";
    for (size_t i = 0; i < pulls.size(); ++i)
      out << (i ? ", " : "") << "[" << pulls[i].first << ", " << pulls[i].second << "]";
    const ClientStats stats = client->stats();
    out << "], \"sfb_tensors\": [";
    const std::vector<int> sfb = client->sfb_tensors();
    for (size_t i = 0; i < sfb.size(); ++i) out << (i ? ", " : "") << sfb[i];
    out << "], \"push_bytes\": " << stats.push_bytes << ", \"factor_messages\": " << stats.factor_messages
        << ", \"factor_bytes\": " << stats.factor_bytes << ", \"sfb_switches\": " << stats.sfb_switches
        << ", \"sfb_trial_clocks\": " << stats.sfb_trial_clocks << ", \"host_push_bytes\": " << stats.host_push_bytes
        << ", \"host_summed_bytes\": " << stats.host_summed_bytes
        << ", \"host_relayed_bytes\": " << stats.host_relayed_bytes << "}\n";
    if (!out) return Fail(UnavailableError("cannot write " + FLAGS_summary_json), "--summary_json");
  }
  std::printf("worker %d: %d iterations in %.3f s, loss %.6g -> %.6g, communication %.1f%% of the time\n", rank,
              FLAGS_iterations, wall, initial_loss, final_loss, wall > 0 ? 100.0 * comm_s / wall : 0.0);
  return 0;
}

}  // namespace
}  // namespace nereus

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Nereus worker.\n"
      "  nereus_worker --solver=SOLVER.prototxt --standalone      train a Caffe net alone\n"
      "  nereus_worker --solver=SOLVER.prototxt --coordinator=HOST:PORT [--rank=R]\n"
      "                                                         train it as one worker of a job\n"
      "  nereus_worker --test=NET.prototxt --weights=W.caffemodel[,...] [--gpu=N] [--iterations=50]\n"
      "                                                         score a trained net (Caffe's `test`)\n"
      "  nereus_worker --time=NET.prototxt [--gpu=N] [--iterations=50]\n"
      "                                                         time each layer of a net (Caffe's `time`)\n"
      "  nereus_worker --device_query [--gpu=N]                 list the GPUs (Caffe's `device_query`)\n"
      "  nereus_worker --coordinator=HOST:PORT [--rank=R] --model=synthetic|quadratic [--tensors=...]",
      &argc, &argv);
  if (argc > 1) {
    LOG(ERROR) << "unexpected argument \"" << argv[1] << "\" (flags are --name=value; see --help)";
    return 2;
  }
#ifdef NEREUS_HAVE_TRAINER
  if (FLAGS_device_query) return nereus::RunDeviceQuery();
  if (!FLAGS_test.empty()) return nereus::RunTestMode();
  if (!FLAGS_time.empty()) return nereus::RunTimeMode();
  if (!FLAGS_solver.empty()) return nereus::RunTrainerMode();
#endif
  return nereus::RunSynthetic();
}

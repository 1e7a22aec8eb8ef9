// nereus_bench cluster: an emulated multi-host cluster on one machine. Every
// host is a network namespace with its own shaped veth into one bridge
// (bench/harness/netns.h); on each runs one nereus_server shard and
// --workers_per_host workers (this binary as `cluster_worker`, emulating the
// model's per-layer compute as the pipeline bench does), real processes; host
// 0 also runs the coordinator. The bytes each host's link carried are read
// from the kernel's counters.
// Everything made (processes, namespaces, veths, bridge) is removed at the
// end, also on SIGINT, SIGTERM or SIGHUP.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/harness/emulated_worker.h"
#include "bench/harness/netns.h"
#include "bench/sim/models.h"
#include "common/launch/subprocess.h"
#include "common/net/node_flags.h"
#include "server/server_flags.h"
#include "worker/client/client_flags.h"
#include "worker/client/client_internal.h"

DEFINE_int32(hosts, 2,
             "cluster: emulated hosts (network namespaces), each running one server and --workers_per_host "
             "workers.");
DEFINE_int32(workers_per_host, 1,
             "cluster: workers on each emulated host (worker r on host r mod --hosts, as the launcher's round "
             "robin places them); they share the host's link.");
DEFINE_string(host_aggregation, "auto",
              "cluster: the coordinator's --host_aggregation (auto, on or off): with several workers on a host, "
              "whether the host's first worker sums their gradients and pushes once for them (docs/HOSTAGG.md).");
DEFINE_double(latency_us, 0, "cluster: one-way latency added between two hosts (tc netem), microseconds.");
DEFINE_double(model_scale, 1,
              "cluster, simulate: shrink the model by this factor F in bytes and FLOPs alike, so that a big model "
              "fits a small machine: every layer's FLOPs / F, every tensor to 1/F of its elements; a fully connected "
              "weight stays a matrix (rows and columns / sqrt(F)) whose sufficient factors have batch / sqrt(F) "
              "rows, so that both of HybComm's paths move 1/F of the bytes and it chooses as at full size "
              "(bench/sim/models.h). --partition_bytes and --credit_bytes are divided by F too.");
DEFINE_int32(timeout_s, 900, "cluster: stop everything and fail if the job has not finished after this long.");
DEFINE_string(cluster_logs, "",
              "cluster: keep each process's log here (default: a temporary directory, removed on success).");
DEFINE_string(cluster_result, "", "cluster_worker: internal; where this worker writes its timings.");
DEFINE_string(host_command, "",
              "cluster: instead of Nereus's own server and emulated worker, run this shell command (/bin/sh -c) on "
              "every host, with NEREUS_BENCH_HOST (0..N-1), NEREUS_BENCH_HOSTS (N) and NEREUS_BENCH_ADDRESSES (the "
              "hosts' addresses, comma-separated) in its environment, so that another system (e.g. PyTorch's "
              "DistributedDataParallel, bench/torch/cluster_compare.py) runs on the same shaped links. The job ends "
              "when every host's command has exited 0; host 0's output is then printed.");

DECLARE_string(model);
DECLARE_double(link_mbit);
DECLARE_double(device_gflops);
DECLARE_int32(batch);
DECLARE_int32(iterations);
DECLARE_int32(warmup);
DECLARE_uint64(partition_bytes);
DECLARE_string(sfb_rebuild);
DECLARE_double(device_update_gbytes);

namespace nereus {
namespace bench {
namespace {

constexpr int kNoNamespaces = 77;  // Exit status: this machine cannot make the namespaces (as ctest's SKIP).
constexpr int kCoordinatorPort = 7000;

std::string Self() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  CHECK_GT(n, 0) << "cannot read /proc/self/exe";
  self[n] = '\0';
  return self;
}

std::string Dir(const std::string& path) { return path.substr(0, path.rfind('/')); }

uint64_t Scaled(uint64_t bytes) {
  return std::max<uint64_t>(4, static_cast<uint64_t>(bytes / std::max(1.0, FLAGS_model_scale)));
}

std::string Tail(const std::string& path, size_t bytes = 1500) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > bytes ? "..." + s.substr(s.size() - bytes) : s;
}

// The job's processes (common/launch/subprocess.h), each with its log.
class ClusterJob {
 public:
  explicit ClusterJob(SignalPipe* signals) : jobs_(Options(signals)) {}

  // own_group: the process leads a process group of its own, and stopping it
  // stops the whole group (a shell command's children too).
  Status Start(const std::string& what, const std::vector<std::string>& argv, const std::string& log,
               bool own_group = false) {
    SubprocessOptions o;
    o.argv = argv;
    o.own_process_group = own_group;
    o.output = SubprocessOptions::Output::kFile;
    o.output_file = log;
    ASSIGN_OR_RETURN(size_t index, jobs_.Start(what, o));
    if (own_group) groups_.push_back(jobs_.child(index).pid());
    logs_.resize(index + 1);
    logs_[index] = log;
    return Status::OK();
  }

  // Waits until every process has exited 0. Fails at the first that does
  // not (with the end of its log), at a signal (`*interrupted`) or at the
  // deadline, after stopping the others: SIGTERM, SIGKILL after 5 s.
  Status Wait(std::chrono::steady_clock::time_point deadline, int* interrupted) {
    *interrupted = 0;
    const Supervisor::Event e = jobs_.Wait(deadline);
    Status st;
    switch (e.kind) {
      case Supervisor::Event::kAllExited:
        return Status::OK();
      case Supervisor::Event::kFailed:
        st = AbortedError(jobs_.name(e.index) + " " + jobs_.child(e.index).DescribeExit() + "; the end of its log (" +
                          logs_[e.index] + "):\n" + Tail(logs_[e.index]));
        break;
      case Supervisor::Event::kSignal:
        *interrupted = e.signal;
        LOG(WARNING) << "cluster: " << strsignal(e.signal) << ", stopping every process and removing the namespaces";
        st = AbortedError(std::string("interrupted by ") + strsignal(e.signal));
        break;
      case Supervisor::Event::kDeadline:
        st = DeadlineExceededError("the job did not finish within --timeout_s=" + std::to_string(FLAGS_timeout_s));
        break;
    }
    Status stopped = jobs_.Stop(nullptr, std::chrono::seconds(5));
    if (!stopped.ok()) LOG(WARNING) << "cluster: " << stopped.message();
    KillGroups();
    return st;
  }

  ~ClusterJob() { KillGroups(); }

 private:
  static Supervisor::Options Options(SignalPipe* signals) {
    Supervisor::Options o;
    o.signals = signals;
    return o;
  }

  // What is left of each own group once its leader is gone (`ip netns exec`
  // may exit on SIGTERM before the shell it started, and the shell's children
  // may ignore SIGTERM): nothing of a host's command outlives the run.
  void KillGroups() {
    for (pid_t g : groups_) kill(-g, SIGKILL);
  }

  Supervisor jobs_;  // Its destructor kills and reaps what still runs.
  std::vector<std::string> logs_;
  std::vector<pid_t> groups_;
};

struct Timings {
  std::vector<double> iteration_s, compute_s, wait_s;
  // Per worker, per timed iteration: bytes sent (pushes and factors),
  // received (weights and peers' factors), of which factors sent, and the
  // client's time rebuilding and applying factor updates.
  std::vector<double> sent_bytes, received_bytes, factor_bytes, factor_apply_s;
};

// Reads the lines "RESULT <iteration_s> <compute_s> <wait_s>" a worker wrote,
// and its line "TRAFFIC <sent> <received> <factors sent> <factor apply s>".
Status ReadResults(const std::string& path, Timings* t) {
  std::ifstream in(path);
  if (!in) return NotFoundError("worker wrote no results to " + path);
  std::string word;
  while (in >> word) {
    double a, b, c, d;
    if (word == "RESULT" && in >> a >> b >> c) {
      t->iteration_s.push_back(a);
      t->compute_s.push_back(b);
      t->wait_s.push_back(c);
    } else if (word == "TRAFFIC" && in >> a >> b >> c >> d) {
      t->sent_bytes.push_back(a);
      t->received_bytes.push_back(b);
      t->factor_bytes.push_back(c);
      t->factor_apply_s.push_back(d);
    } else {
      return DataLossError("bad line in " + path);
    }
  }
  return Status::OK();
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

}  // namespace

int RunClusterWorker() {
  auto model = ValueOrLog(ModelByName(FLAGS_model));
  if (!model) return 2;
  const ModelSpec shrunk = Shrink(*model, FLAGS_model_scale);
  auto options = ClientOptionsFromFlags();
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 2;
  }
  options->merge_profile_iterations = std::max(1, FLAGS_warmup - 2);
  const EmulatedRun run = EmulatedRunFromFlags(FLAGS_sfb_rebuild == "device");
  ClientInternals internals;
  SetRebuildOptions(run, shrunk, &*options, &internals);
  auto client = ConnectClient(*options, internals);
  if (!client.ok()) {
    LOG(ERROR) << "cluster worker: " << client.status();
    return 1;
  }
  WorkerTimes times;
  Status st = RunEmulatedWorker(**client, shrunk, run, &times);
  Status fin = (*client)->Finish();
  if (st.ok()) st = fin;
  if (!st.ok()) {
    LOG(ERROR) << "cluster worker: " << st;
    return 1;
  }
  std::ofstream out(FLAGS_cluster_result);
  for (size_t i = 0; i < times.iteration_s.size(); ++i)
    out << "RESULT " << times.iteration_s[i] << " " << times.compute_s[i] << " " << times.wait_s[i] << "\n";
  // Per timed iteration; own factor messages the scheduler sent late may
  // move a few from one window to the next (emulated_worker.h).
  const ClientStats &a = times.timed_begin, &b = times.timed_end;
  const double n = std::max(1, FLAGS_iterations);
  out << "TRAFFIC " << (b.push_bytes + b.factor_bytes - a.push_bytes - a.factor_bytes) / n << " "
      << (b.pull_bytes + b.factor_bytes_received - a.pull_bytes - a.factor_bytes_received) / n << " "
      << (b.factor_bytes - a.factor_bytes) / n << " " << (b.factor_apply_us - a.factor_apply_us) * 1e-6 / n << "\n";
  return out ? 0 : 1;
}

int RunCluster(BenchContext& ctx) {
  (void)ctx;
  if (geteuid() != 0) {
    LOG(ERROR) << "nereus_bench cluster must run as root: it creates network namespaces, veth pairs, a bridge and tc "
                  "qdiscs, which need CAP_NET_ADMIN (try sudo)";
    return kNoNamespaces;
  }
  auto model = ValueOrLog(ModelByName(FLAGS_model));
  auto schedule = ValueOrLog(ParseSchedule(FLAGS_schedule));
  auto threads = ValueOrLog(ApplyThreadsFromFlags());
  if (!model || !schedule || !threads) return 2;
  if (FLAGS_hosts < 1 || FLAGS_hosts > 250) {
    LOG(ERROR) << "--hosts must be 1..250, got " << FLAGS_hosts;
    return 2;
  }
  if (FLAGS_workers_per_host < 1 || FLAGS_workers_per_host > 64) {
    LOG(ERROR) << "--workers_per_host must be 1..64, got " << FLAGS_workers_per_host;
    return 2;
  }
  if (FLAGS_sfb_rebuild != "cpu" && FLAGS_sfb_rebuild != "device") {
    LOG(ERROR) << "cluster: --sfb_rebuild must be cpu or device, got \"" << FLAGS_sfb_rebuild << "\"";
    return 2;
  }
  if (FLAGS_link_mbit < 0 || FLAGS_latency_us < 0 || FLAGS_model_scale < 1 || FLAGS_device_gflops <= 0) {
    LOG(ERROR) << "need --link_mbit >= 0, --latency_us >= 0, --model_scale >= 1 and --device_gflops > 0";
    return 2;
  }
  // From here every signal that would end us arrives on the pipe, so the
  // cleanup below always runs.
  auto signals = SignalPipe::Create({SIGINT, SIGTERM, SIGHUP});
  if (!signals.ok()) {
    LOG(ERROR) << "cluster: " << signals.status().message();
    return 1;
  }
  RemoveStaleNamespaces("nrc");
  const std::string prefix = "nrc" + std::to_string(getpid()) + "_";
  const int H = FLAGS_hosts, L = FLAGS_workers_per_host, W = H * L;
  auto net = EmulatedNetwork::Create(prefix, H, FLAGS_link_mbit, FLAGS_latency_us);
  if (!net.ok()) {
    LOG(ERROR) << "cluster: cannot make the emulated network: " << net.status().message();
    return net.status().code() == StatusCode::kInvalidArgument ? 2 : kNoNamespaces;
  }
  std::string logs = FLAGS_cluster_logs;
  bool own_logs = false;
  if (!logs.empty() && mkdir(logs.c_str(), 0755) != 0 && errno != EEXIST) {
    PLOG(ERROR) << "cannot make --cluster_logs=" << logs;
    return 1;
  }
  if (logs.empty()) {
    char tmpl[] = "/tmp/nereus_cluster_XXXXXX";
    if (!mkdtemp(tmpl)) {
      PLOG(ERROR) << "mkdtemp";
      return 1;
    }
    logs = tmpl;
    own_logs = true;
  }
  const std::string bin = Dir(Self()), self = Self();
  const std::string coordinator = EmulatedNetwork::Address(0) + ":" + std::to_string(kCoordinatorPort);
  const int streams = *schedule == Schedule::kFull ? FLAGS_streams : 1;
  const std::string common_flags = "--coordinator=" + coordinator;
  std::vector<std::string> worker_results;
  int interrupted = 0;
  Status st;
  if (!FLAGS_host_command.empty()) {
    std::string addresses;
    for (int h = 0; h < H; ++h) addresses += (h ? "," : "") + EmulatedNetwork::Address(h);
    {
      ClusterJob jobs(signals->get());
      for (int h = 0; st.ok() && h < H; ++h)
        st = jobs.Start("host " + std::to_string(h) + "'s command",
                        (*net)->Wrap(h, {"/usr/bin/env", "NEREUS_BENCH_HOST=" + std::to_string(h),
                                         "NEREUS_BENCH_HOSTS=" + std::to_string(H),
                                         "NEREUS_BENCH_ADDRESSES=" + addresses, "/bin/sh", "-c", FLAGS_host_command}),
                        logs + "/host" + std::to_string(h) + ".log", /*own_group=*/true);
      if (st.ok())
        st = jobs.Wait(std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_timeout_s), &interrupted);
    }
    net->reset();
    if (!st.ok()) {
      LOG(ERROR) << "cluster: " << st.message() << " (logs in " << logs << ")";
      return interrupted ? 128 + interrupted : 1;
    }
    std::ifstream out0(logs + "/host0.log");
    std::cout << out0.rdbuf() << std::flush;
    if (own_logs) RunCommand({"rm", "-rf", logs}, nullptr);
    return 0;
  }
  {
    ClusterJob jobs(signals->get());
    st = jobs.Start("coordinator",
                    (*net)->Wrap(0, {bin + "/nereus_server", "--role=coordinator", common_flags,
                                     "--num_servers=" + std::to_string(H), "--num_workers=" + std::to_string(W),
                                     "--partition_bytes=" + std::to_string(Scaled(FLAGS_partition_bytes)),
                                     "--heartbeat_timeout_ms=60000", "--host_aggregation=" + FLAGS_host_aggregation}),
                    logs + "/coordinator.log");
    for (int h = 0; st.ok() && h < H; ++h) {
      st = jobs.Start("server " + std::to_string(h),
                      (*net)->Wrap(h, {bin + "/nereus_server", "--role=server", common_flags,
                                       "--bind_host=" + EmulatedNetwork::Address(h), "--rank=" + std::to_string(h),
                                       "--streams=" + std::to_string(streams),
                                       "--apply_threads=" + std::to_string(FLAGS_apply_threads)}),
                      logs + "/server" + std::to_string(h) + ".log");
    }
    // Worker w on host w mod H (the launcher's round robin).
    for (int w = 0; st.ok() && w < W; ++w) {
      const int h = w % H;
      const std::string host = "--bind_host=" + EmulatedNetwork::Address(h), rank = "--rank=" + std::to_string(w);
      worker_results.push_back(logs + "/worker" + std::to_string(w) + ".result");
      std::vector<std::string> argv = {self,
                                       "cluster_worker",
                                       common_flags,
                                       host,
                                       rank,
                                       "--streams=" + std::to_string(streams),
                                       "--model=" + FLAGS_model,
                                       "--model_scale=" + std::to_string(FLAGS_model_scale),
                                       "--device_gflops=" + std::to_string(FLAGS_device_gflops),
                                       "--batch=" + std::to_string(FLAGS_batch),
                                       "--warmup=" + std::to_string(FLAGS_warmup),
                                       "--iterations=" + std::to_string(FLAGS_iterations),
                                       "--schedule=" + FLAGS_schedule,
                                       "--credit_bytes=" + std::to_string(Scaled(FLAGS_credit_bytes)),
                                       "--merge=" + FLAGS_merge,
                                       "--sfb=" + FLAGS_sfb,
                                       "--sfb_rebuild=" + FLAGS_sfb_rebuild,
                                       "--device_update_gbytes=" + std::to_string(FLAGS_device_update_gbytes),
                                       "--cluster_result=" + worker_results.back()};
      if (!FLAGS_timeline.empty()) argv.push_back("--timeline=" + FLAGS_timeline);
      st = jobs.Start("worker " + std::to_string(w), (*net)->Wrap(h, argv),
                      logs + "/worker" + std::to_string(w) + ".log");
    }
    if (st.ok()) st = jobs.Wait(std::chrono::steady_clock::now() + std::chrono::seconds(FLAGS_timeout_s), &interrupted);
    // ~ClusterJob stops and reaps whatever still runs before the network goes.
  }
  Timings t;
  for (const std::string& r : worker_results)
    if (st.ok()) st = ReadResults(r, &t);
  // What crossed each host's link over the whole job (start-up, warm-up and
  // timed iterations), from the kernel's counters.
  std::vector<double> link_tx, link_rx;
  for (int h = 0; st.ok() && h < H; ++h) {
    uint64_t tx = 0, rx = 0;
    st = (*net)->LinkBytes(h, &tx, &rx);
    link_tx.push_back(static_cast<double>(tx));
    link_rx.push_back(static_cast<double>(rx));
  }
  net->reset();  // Namespaces, veths and bridge.
  if (!st.ok()) {
    LOG(ERROR) << "cluster: " << st.message() << " (logs in " << logs << ")";
    return interrupted ? 128 + interrupted : 1;
  }
  if (own_logs) RunCommand({"rm", "-rf", logs}, nullptr);
  const ModelSpec shrunk = Shrink(*model, FLAGS_model_scale);
  const EmulatedRun run = EmulatedRunFromFlags();
  std::vector<double> fwd, bwd;
  LayerTimes(shrunk, run, &fwd, &bwd);
  double compute = 0;
  for (size_t l = 0; l < fwd.size(); ++l) compute += fwd[l] + bwd[l];
  const double iteration = Median(t.iteration_s);
  const double samples = W * FLAGS_batch / iteration;
  // Medians over every worker's timed iterations (sleeps overshoot on a
  // loaded machine: the measured compute is what the workers really did).
  const double measured = Median(t.compute_s), wait = Median(t.wait_s);
  std::printf(
      "%-12s hosts %d x %d workers schedule %-10s link %g Mbit/s scale %g: iteration %.4f s (compute %.4f s, "
      "measured compute %.4f s, waiting %.4f s), %.2f samples/s; each host's link carried %.0f bytes out, %.0f in "
      "(mean over hosts, whole job)\n",
      FLAGS_model.c_str(), H, L, FLAGS_schedule.c_str(), FLAGS_link_mbit, FLAGS_model_scale, iteration, compute,
      measured, wait, samples, Mean(link_tx), Mean(link_rx));
  Record r;
  r.Set("model", FLAGS_model).Set("hosts", H).Set("schedule", FLAGS_schedule).Set("link_mbit", FLAGS_link_mbit);
  r.Set("workers_per_host", L).Set("host_aggregation", FLAGS_host_aggregation);
  r.Set("link_tx_bytes_per_host", Mean(link_tx)).Set("link_rx_bytes_per_host", Mean(link_rx));
  r.Set("warmup", FLAGS_warmup);
  r.Set("latency_us", FLAGS_latency_us).Set("model_scale", FLAGS_model_scale);
  r.Set("device_gflops", FLAGS_device_gflops).Set("batch", FLAGS_batch).Set("iterations", FLAGS_iterations);
  r.Set("iteration_s", iteration).Set("mean_iteration_s", Mean(t.iteration_s)).Set("compute_s", compute);
  r.Set("measured_compute_s", measured).Set("wait_s", wait).Set("samples_per_s", samples);
  r.Set("layers", static_cast<int>(shrunk.layers.size())).Set("sfb", FLAGS_sfb);
  // Means over the workers, per timed iteration.
  r.Set("sent_bytes", Mean(t.sent_bytes)).Set("received_bytes", Mean(t.received_bytes));
  r.Set("factor_bytes", Mean(t.factor_bytes)).Set("factor_apply_s", Mean(t.factor_apply_s));
  // What --apply_threads made of each server (the servers share this machine's cores).
  auto apply_threads = ApplyThreadsFromFlags();
  r.Set("streams", streams).Set("apply_threads", apply_threads.ok() ? *apply_threads : -1);
  return WriteJson({r}) ? 0 : 1;
}

int RunModel(BenchContext& ctx) {
  (void)ctx;
  auto model = ValueOrLog(ModelByName(FLAGS_model));
  if (!model) return 2;
  if (FLAGS_model_scale < 1 || FLAGS_device_gflops <= 0 || FLAGS_batch < 1) {
    LOG(ERROR) << "model: need --model_scale >= 1, --device_gflops > 0 and --batch >= 1";
    return 2;
  }
  const ModelSpec shrunk = Shrink(*model, FLAGS_model_scale);
  std::vector<double> fwd, bwd;
  LayerTimes(shrunk, EmulatedRunFromFlags(), &fwd, &bwd);
  std::vector<Record> rows;
  for (size_t l = 0; l < shrunk.layers.size(); ++l) {
    const ModelLayer& layer = shrunk.layers[l];
    std::string params;
    for (const auto& shape : layer.params) {
      std::string dims;
      for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      params += (params.empty() ? "[" : ", [") + dims + "]";
    }
    const long long rows_per_worker = layer.fully_connected ? FactorRows(layer, FLAGS_batch) : 0;
    std::printf("%-12s %-28s %s forward %.6f s backward %.6f s\n", layer.name.c_str(), params.c_str(),
                layer.fully_connected ? ("factors of " + std::to_string(rows_per_worker) + " rows").c_str() : "",
                fwd[l], bwd[l]);
    Record r;
    r.Set("model", FLAGS_model).Set("model_scale", FLAGS_model_scale).Set("batch", FLAGS_batch);
    r.Set("device_gflops", FLAGS_device_gflops).Set("layer", layer.name).Raw("params", "[" + params + "]");
    r.Raw("fully_connected", layer.fully_connected ? "true" : "false").Set("factor_rows", rows_per_worker);
    r.Set("forward_s", fwd[l]).Set("backward_s", bwd[l]);
    rows.push_back(std::move(r));
  }
  return WriteJson(rows) ? 0 : 1;
}

}  // namespace bench
}  // namespace nereus

// nereus_bench cluster: an emulated multi-host cluster on one machine. Every
// host is a network namespace with its own shaped veth into one bridge
// (bench/harness/netns.h); on each runs one nereus_server shard and one worker (this
// binary as `cluster_worker`, emulating the model's per-layer compute as the
// pipeline bench does), real processes; host 0 also runs the coordinator.
// Everything made (processes, namespaces, veths, bridge) is removed at the
// end, also on SIGINT, SIGTERM or SIGHUP.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/harness/emulated_worker.h"
#include "bench/harness/netns.h"
#include "bench/sim/models.h"
#include "common/node_flags.h"
#include "server/server_flags.h"
#include "worker/client/client_flags.h"

DEFINE_int32(hosts, 2, "cluster: emulated hosts (network namespaces), each running one server and one worker.");
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

struct Child {
  std::string what;  // "coordinator", "server 3", "worker 3".
  std::string log;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

// Starts argv with stdout and stderr to `log`, every signal unblocked.
StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("cannot write " + log + ": " + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    return UnavailableError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // exec resets the caught signals to their defaults; nothing is blocked.
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fd);
  return pid;
}

std::string Tail(const std::string& path, size_t bytes = 1500) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string s = ss.str();
  return s.size() > bytes ? "..." + s.substr(s.size() - bytes) : s;
}

// SIGINT, SIGTERM, SIGHUP and SIGCHLD, as bytes on a pipe. The handlers are
// the process's, so whichever thread a signal lands on (OpenBLAS starts its
// threads at load, before main could block anything) it is neither lost nor
// fatal. A handler can only reach the pipe through these globals, which hold
// nothing while no SignalPipe exists. Lock-free atomics and sem_post are
// async-signal-safe; a mutex is not.
std::atomic<int> g_signal_pipe_write{-1};
std::atomic<int> g_signal_handlers_running{0};  // Handlers between entry and return.
std::atomic<bool> g_signal_pipe_closing{false};
sem_t g_signal_handlers_done;  // Posted by the last handler out once closing.

extern "C" void OnSignal(int sig) {
  const int saved = errno;
  g_signal_handlers_running.fetch_add(1);
  const int fd = g_signal_pipe_write.load();
  const unsigned char b = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!write(fd, &b, 1);  // Full pipe: a byte is already there.
  if (g_signal_handlers_running.fetch_sub(1) == 1 && g_signal_pipe_closing.load()) sem_post(&g_signal_handlers_done);
  errno = saved;
}

class SignalPipe {
 public:
  static StatusOr<std::unique_ptr<SignalPipe>> Create() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return UnavailableError(std::string("pipe2: ") + std::strerror(errno));
    std::unique_ptr<SignalPipe> p(new SignalPipe(fds[0], fds[1]));
    sem_init(&g_signal_handlers_done, 0, 0);
    g_signal_pipe_closing.store(false);
    g_signal_pipe_write.store(fds[1]);
    struct sigaction sa {};
    sa.sa_handler = OnSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(s, &sa, nullptr);
    return p;
  }
  // A handler may be running on another thread right now (a last SIGCHLD):
  // the write end is closed only once no handler can still write to it, else
  // its byte could land in whatever file reuses the descriptor.
  ~SignalPipe() {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaction(s, &sa, nullptr);
    g_signal_pipe_closing.store(true);
    g_signal_pipe_write.store(-1);
    // A handler that enters after this sees -1 (the stores and loads are
    // sequentially consistent); one inside posts when the last one leaves.
    // (Not destroyed: a handler dispatched just before the restore may still
    // post to it, harmlessly, after this returns.)
    while (g_signal_handlers_running.load() != 0) sem_wait(&g_signal_handlers_done);
    close(read_);
    close(write_);
  }
  // Waits up to `timeout_ms` (-1: no bound) for signals; returns the first
  // that is not SIGCHLD, SIGCHLD if only children changed, 0 on timeout.
  int Wait(int timeout_ms) {
    pollfd p{read_, POLLIN, 0};
    const int n = poll(&p, 1, timeout_ms);
    if (n <= 0) return 0;
    int got = 0;
    unsigned char buf[64];
    ssize_t r;
    while ((r = read(read_, buf, sizeof(buf))) > 0)
      for (ssize_t i = 0; i < r; ++i)
        if (got == 0 || got == SIGCHLD) got = buf[i];
    return got;
  }

 private:
  SignalPipe(int r, int w) : read_(r), write_(w) {}
  const int read_, write_;
};

// The job's processes; owns them until each has been reaped.
class Supervisor {
 public:
  explicit Supervisor(SignalPipe* signals) : signals_(signals) {}
  ~Supervisor() { StopAll(); }

  Status Start(const std::string& what, const std::vector<std::string>& argv, const std::string& log) {
    Child c;
    c.what = what;
    c.log = log;
    ASSIGN_OR_RETURN(c.pid, Spawn(argv, log));
    c.running = true;
    children_.push_back(c);
    return Status::OK();
  }

  // Waits until every child has exited; returns the signal that interrupted
  // (0 if none). Fails at the first child that exits non-zero, or at the
  // deadline, after stopping the others.
  Status Wait(time_t deadline, int* interrupted) {
    *interrupted = 0;
    while (Running() > 0) {
      const time_t left = deadline - time(nullptr);
      if (left <= 0) {
        StopAll();
        return DeadlineExceededError("the job did not finish within --timeout_s=" + std::to_string(FLAGS_timeout_s));
      }
      // A child that exited before its SIGCHLD's byte was read is reaped on
      // that byte; the deadline ends the wait otherwise.
      const int sig = signals_->Wait(static_cast<int>(std::min<time_t>(left, 1 << 20) * 1000));
      if (sig != 0 && sig != SIGCHLD) {
        *interrupted = sig;
        LOG(WARNING) << "cluster: " << strsignal(sig) << ", stopping every process and removing the namespaces";
        StopAll();
        return AbortedError(std::string("interrupted by ") + strsignal(sig));
      }
      Status st = Reap();
      if (!st.ok()) {
        StopAll();
        return st;
      }
    }
    return Status::OK();
  }

  // SIGTERM to every live child, SIGKILL after 5 s, all reaped.
  void StopAll() {
    if (Running() == 0) return;
    for (Child& c : children_)
      if (c.running) kill(c.pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    Status ignored = Reap();
    while (Running() > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      signals_->Wait(static_cast<int>(left.count()));  // Another SIGINT here changes nothing: they are being stopped.
      ignored = Reap();
    }
    (void)ignored;
    for (Child& c : children_) {
      if (!c.running) continue;
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &c.status, 0);
      c.running = false;
    }
  }

  const std::vector<Child>& children() const { return children_; }

 private:
  int Running() const {
    int n = 0;
    for (const Child& c : children_) n += c.running;
    return n;
  }

  // Reaps every child that has exited; the first failure is returned.
  Status Reap() {
    Status first;
    for (Child& c : children_) {
      if (!c.running) continue;
      const pid_t r = waitpid(c.pid, &c.status, WNOHANG);
      if (r != c.pid) continue;
      c.running = false;
      const bool ok = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0;
      if (!ok && first.ok()) {
        const std::string how = WIFEXITED(c.status) ? "exited with status " + std::to_string(WEXITSTATUS(c.status))
                                                    : std::string("was killed by ") + strsignal(WTERMSIG(c.status));
        first = AbortedError(c.what + " " + how + "; the end of its log (" + c.log + "):\n" + Tail(c.log));
      }
    }
    return first;
  }

  SignalPipe* const signals_;
  std::vector<Child> children_;
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

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

}  // namespace

int RunClusterWorker() {
  auto model = ModelByName(FLAGS_model);
  if (!model.ok()) {
    LOG(ERROR) << model.status().message();
    return 2;
  }
  const ModelSpec shrunk = Shrink(*model, FLAGS_model_scale);
  auto options = ClientOptionsFromFlags();
  if (!options.ok()) {
    LOG(ERROR) << options.status().message();
    return 2;
  }
  options->merge_profile_iterations = std::max(1, FLAGS_warmup - 2);
  EmulatedRun run;
  run.device_gflops = FLAGS_device_gflops;
  run.batch = FLAGS_batch;
  run.warmup = FLAGS_warmup;
  run.iterations = FLAGS_iterations;
  run.rebuild_on_device = FLAGS_sfb_rebuild == "device";
  run.device_update_gbytes = FLAGS_device_update_gbytes;
  SetRebuildOptions(run, &*options);
  auto client = Client::Connect(*options);
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
  auto model = ModelByName(FLAGS_model);
  if (!model.ok()) {
    LOG(ERROR) << model.status().message();
    return 2;
  }
  auto schedule = ParseSchedule(FLAGS_schedule);
  if (!schedule.ok()) {
    LOG(ERROR) << schedule.status().message();
    return 2;
  }
  if (auto threads = ApplyThreadsFromFlags(); !threads.ok()) {
    LOG(ERROR) << threads.status().message();
    return 2;
  }
  if (FLAGS_hosts < 1 || FLAGS_hosts > 250) {
    LOG(ERROR) << "--hosts must be 1..250, got " << FLAGS_hosts;
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
  // From here every signal that would end us arrives on the pipe, in order,
  // so the cleanup below always runs.
  auto signals = SignalPipe::Create();
  if (!signals.ok()) {
    LOG(ERROR) << "cluster: " << signals.status().message();
    return 1;
  }
  RemoveStaleNamespaces("nrc");
  const std::string prefix = "nrc" + std::to_string(getpid()) + "_";
  const int H = FLAGS_hosts;
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
  {
    Supervisor jobs(signals->get());
    st = jobs.Start("coordinator",
                    (*net)->Wrap(0, {bin + "/nereus_server", "--role=coordinator", common_flags,
                                     "--num_servers=" + std::to_string(H), "--num_workers=" + std::to_string(H),
                                     "--partition_bytes=" + std::to_string(Scaled(FLAGS_partition_bytes)),
                                     "--heartbeat_timeout_ms=60000"}),
                    logs + "/coordinator.log");
    for (int h = 0; st.ok() && h < H; ++h) {
      const std::string host = "--bind_host=" + EmulatedNetwork::Address(h), rank = "--rank=" + std::to_string(h);
      st = jobs.Start("server " + std::to_string(h),
                      (*net)->Wrap(h, {bin + "/nereus_server", "--role=server", common_flags, host, rank,
                                       "--streams=" + std::to_string(streams),
                                       "--apply_threads=" + std::to_string(FLAGS_apply_threads)}),
                      logs + "/server" + std::to_string(h) + ".log");
      if (!st.ok()) break;
      worker_results.push_back(logs + "/worker" + std::to_string(h) + ".result");
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
      st = jobs.Start("worker " + std::to_string(h), (*net)->Wrap(h, argv),
                      logs + "/worker" + std::to_string(h) + ".log");
    }
    if (st.ok()) st = jobs.Wait(time(nullptr) + FLAGS_timeout_s, &interrupted);
    // ~Supervisor stops and reaps whatever still runs before the network goes.
  }
  Timings t;
  for (const std::string& r : worker_results)
    if (st.ok()) st = ReadResults(r, &t);
  net->reset();  // Namespaces, veths and bridge.
  if (!st.ok()) {
    LOG(ERROR) << "cluster: " << st.message() << " (logs in " << logs << ")";
    return interrupted ? 128 + interrupted : 1;
  }
  if (own_logs) RunCommand({"rm", "-rf", logs}, nullptr);
  const ModelSpec shrunk = Shrink(*model, FLAGS_model_scale);
  EmulatedRun run;
  run.device_gflops = FLAGS_device_gflops;
  run.batch = FLAGS_batch;
  std::vector<double> fwd, bwd;
  LayerTimes(shrunk, run, &fwd, &bwd);
  double compute = 0;
  for (size_t l = 0; l < fwd.size(); ++l) compute += fwd[l] + bwd[l];
  const double iteration = Median(t.iteration_s);
  const double samples = H * FLAGS_batch / iteration;
  // Medians over every worker's timed iterations (sleeps overshoot on a
  // loaded machine: the measured compute is what the workers really did).
  const double measured = Median(t.compute_s), wait = Median(t.wait_s);
  std::printf(
      "%-12s hosts %d schedule %-10s link %g Mbit/s scale %g: iteration %.4f s (compute %.4f s, measured "
      "compute %.4f s, waiting %.4f s), %.2f samples/s\n",
      FLAGS_model.c_str(), H, FLAGS_schedule.c_str(), FLAGS_link_mbit, FLAGS_model_scale, iteration, compute, measured,
      wait, samples);
  Record r;
  r.Set("model", FLAGS_model).Set("hosts", H).Set("schedule", FLAGS_schedule).Set("link_mbit", FLAGS_link_mbit);
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

}  // namespace bench
}  // namespace nereus

// nereus_launch: starts a whole Nereus job from a hostfile and watches it
// (scripts/launch.sh execs it), or becomes one task of a Slurm job
// (--slurm_task, from scripts/slurm/nereus_task.sh). The placement and the
// command lines come from common/launch/launch_plan.h; the processes are watched by
// the tree's one supervisor (common/launch/subprocess.h): a pidfd per process, its
// output on a pipe, signals on a self-pipe, all in one poll. So a process that
// fails at any moment, or a Ctrl-C at any moment, ends the job within a
// bound: there is no job table to lose a child from and no fifo to block on.
//
// The command line is parsed here by hand, not by gflags: every flag the
// launcher does not know is a binary's, routed to the binaries that define it
// (RouteFlags), and --env repeats.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/launch/launch_plan.h"
#include "common/launch/subprocess.h"
#include "common/net/node.h"

namespace nereus {
namespace {

constexpr char kUsage[] =
    R"(Starts a whole Nereus job from a hostfile: the coordinator on the first
host, servers and workers round-robin over the hosts' slots (server i beside
worker i), each host reached over ssh (or run here, or in a network
namespace). Each process's output is streamed with a "[role rank@host]"
prefix; when one process fails, or on Ctrl-C, every process is stopped.

  scripts/launch.sh --hostfile=FILE [--num_servers=S] [--num_workers=W] [options] [--] [flags...]

Hostfile: one host a line, `NAME [slots=N] [addr=ADDRESS]`, `#` comments.
slots: server+worker pairs the host takes per round (default 1); addr: the
address its processes listen on (default: NAME resolved here, IPv4).

Options:
  --num_servers=S, --num_workers=W   job size (default 1 and 1)
  --port=P             coordinator port on the first host (default 7000)
  --ssh=MODE           ssh: `ssh HOST` (default; binaries and working
                       directory at the same paths on every host);
                       none: run every process on this machine;
                       netns: `ip netns exec HOST` (emulated clusters)
  --ssh_opts="..."     extra ssh options, e.g. "-p 2222 -i key"
  --bin_dir=DIR        where the binaries are (default: the build's bin/)
  --workdir=DIR        working directory of every process (default: here)
  --env=NAME=VALUE     environment variable for every process (repeatable)
  --log_dir=DIR        also write each process's output to DIR/ROLE[RANK].log
  --worker_command="CMD"  run CMD (a shell command line, e.g. "python3
                       train.py") as each worker instead of nereus_worker,
                       with NEREUS_COORDINATOR, NEREUS_RANK,
                       NEREUS_NUM_WORKERS, NEREUS_NUM_SERVERS,
                       NEREUS_BIND_HOST, NEREUS_LOCAL_RANK, NEREUS_LOCAL_SIZE
                       and NEREUS_WORKER_FLAGS (the flags of nereus_worker
                       given here) in its environment: nereus.torch.init()
                       reads them (docs/TORCH.md)
  --gpus_per_host=N    one GPU per worker: every host has N GPUs and the
                       k-th worker placed on a host gets --gpu=k (its GPU k);
                       more workers on a host than GPUs is an error. A job's
                       CUDA_VISIBLE_DEVICES (--env=CUDA_VISIBLE_DEVICES=LIST,
                       or with --ssh=none|netns this launcher's own) is passed
                       on unchanged: --gpu=k is then the k-th listed device,
                       and a host has as many GPUs as the list names, at most
                       N. 0 (default): no --gpu from the launcher
  --dry_run            print the command of each process, start nothing
Every other --flag[=value] goes to the binaries that define it: flags of
nereus_server to the coordinator and servers, flags of nereus_worker to the
workers, shared flags (--startup_timeout_s, --streams, ...) to all. A flag
neither defines is an error. --role, --coordinator, --rank, --bind_host are
set here, per process, and with --gpus_per_host a worker's --gpu.
Exit status: 0 when every process exits 0; 1 when one fails (its name and
status are printed); 2 on bad arguments; 130 on Ctrl-C / SIGTERM / SIGHUP.
Stopping: local processes get SIGTERM (their process groups); over ssh the
ssh clients' stdin is closed and each remote shell stops its process. What
has not exited 10 s later, or at a second Ctrl-C, gets SIGKILL.

Slurm (scripts/slurm/nereus_task.sh):
  nereus_launch --slurm_task --num_servers=S --num_workers=W --port=P
                [--gpus_per_host=N] [--bin_dir=DIR] [--worker_command=CMD] [flags...]
becomes the process of task $SLURM_PROCID of the plan for $SLURM_JOB_NODELIST.
With --gpus_per_host, a worker's GPU is its SLURM_LOCALID less the coordinator
and servers on its node (checked against the plan), and the task's
CUDA_VISIBLE_DEVICES, where set, is the host's list of GPUs.
)";

constexpr int kBadArguments = 2;
constexpr int kInterrupted = 130;
constexpr auto kStopGrace = std::chrono::seconds(10);
constexpr auto kHelpTimeout = std::chrono::seconds(30);

// Messages start with this: "launch.sh" when scripts/launch.sh execs us
// (exec -a), so its users and tests see the names they know.
std::string g_name = "nereus_launch";

// Writes all of `data` to `fd`; a reader that has gone (EPIPE: SIGPIPE is
// ignored) loses the rest, the job goes on.
void WriteAll(int fd, const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void Say(const std::string& line) { WriteAll(1, g_name + ": " + line + "\n"); }
void Complain(const std::string& line) { WriteAll(2, g_name + ": " + line + "\n"); }

int BadArguments(const std::string& why) {
  Complain(why);
  return kBadArguments;
}

// A coordinator port in the kernel's ephemeral range can be handed to a node's
// own connection as its source port while the coordinator is not listening
// yet (a TCP self-connection: the node then reaches itself; it notices and
// connects again, but a port below the range avoids it altogether).
void WarnIfEphemeral(int port) {
  const auto range = EphemeralPortRange();
  if (range && port >= range->first && port <= range->second) {
    Complain("warning: --port=" + std::to_string(port) + " is in this host's ephemeral port range (" +
             std::to_string(range->first) + "-" + std::to_string(range->second) + ", " + kPortRangeFile +
             "): a node that starts before the coordinator may connect to itself on it; a port below " +
             std::to_string(range->first) + " avoids that");
  }
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
std::string ValueOf(const std::string& arg) { return arg.substr(arg.find('=') + 1); }

bool ParseCount(const std::string& flag, const std::string& value, int* out, std::string* error) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < INT32_MIN || v > INT32_MAX) {
    *error = flag + " must be a whole number, got \"" + value + "\"";
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

std::string SelfDir() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ".";
  self[n] = '\0';
  std::string s(self);
  return s.substr(0, s.rfind('/'));
}

// The working directory as the shell's pwd says it ($PWD where it names this
// directory, so a path through a symbolic link stays as the user typed it).
std::string WorkingDirectory() {
  const char* pwd = std::getenv("PWD");
  struct stat a {
  }, b{};
  if (pwd != nullptr && pwd[0] == '/' && ::stat(pwd, &a) == 0 && ::stat(".", &b) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino)
    return pwd;
  char buf[4096];
  return ::getcwd(buf, sizeof(buf)) != nullptr ? buf : ".";
}

// The flags nereus_server and nereus_worker define (their --helpxml).
StatusOr<BinaryFlags> ListBinaryFlags(const std::string& bin_dir) {
  BinaryFlags flags;
  for (auto [binary, names] : {std::pair{"nereus_server", &flags.server}, std::pair{"nereus_worker", &flags.worker}}) {
    std::string xml;
    auto code = RunCommand({bin_dir + "/" + binary, "--helpxml"}, &xml, kHelpTimeout);
    if (code.ok()) *names = FlagNamesFromHelpXml(xml);
    if (names->empty()) {
      return UnavailableError("cannot list the flags of " + bin_dir + "/nereus_server and nereus_worker (--helpxml)");
    }
  }
  return flags;
}

// --- One Slurm task ------------------------------------------------------

int RunSlurmTask(const std::vector<std::string>& args) {
  const char* procid_env = std::getenv("SLURM_PROCID");
  g_name += std::string(" (task ") + (procid_env != nullptr && *procid_env ? procid_env : "?") + ")";
  for (const char* v : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_NODELIST"}) {
    const char* value = std::getenv(v);
    if (value == nullptr || *value == '\0')
      return BadArguments(std::string(v) + " is not set; run this under srun (see scripts/slurm/nereus.sbatch)");
  }
  std::string servers, workers, port, gpus = "0", bin_dir = SelfDir(), worker_command;
  std::vector<std::string> pass;
  for (const std::string& a : args) {
    if (StartsWith(a, "--worker_command=")) {
      worker_command = ValueOf(a);
    } else if (StartsWith(a, "--gpus_per_host=")) {
      gpus = ValueOf(a);
    } else if (StartsWith(a, "--num_servers=")) {
      servers = ValueOf(a);
    } else if (StartsWith(a, "--num_workers=")) {
      workers = ValueOf(a);
    } else if (StartsWith(a, "--port=")) {
      port = ValueOf(a);
    } else if (StartsWith(a, "--bin_dir=")) {
      bin_dir = ValueOf(a);
    } else {
      pass.push_back(a);
    }
  }
  if (servers.empty() || workers.empty() || port.empty())
    return BadArguments("--num_servers, --num_workers and --port are required");
  LaunchOptions options;
  int procid = 0, ntasks = 0;
  std::string error;
  if (!ParseCount("--num_servers", servers, &options.num_servers, &error) ||
      !ParseCount("--num_workers", workers, &options.num_workers, &error) ||
      !ParseCount("--port", port, &options.coordinator_port, &error) ||
      !ParseCount("--gpus_per_host", gpus, &options.gpus_per_host, &error) ||
      !ParseCount("SLURM_PROCID", std::getenv("SLURM_PROCID"), &procid, &error) ||
      !ParseCount("SLURM_NTASKS", std::getenv("SLURM_NTASKS"), &ntasks, &error))
    return BadArguments(error);
  auto names = ExpandSlurmHostlist(std::getenv("SLURM_JOB_NODELIST"));
  if (!names.ok()) return BadArguments(names.status().message());
  std::vector<HostSpec> hosts;
  for (const auto& n : *names) hosts.push_back({n, 1, ""});
  if (Status st = ResolveHostAddresses(&hosts); !st.ok()) return BadArguments(st.message());
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr)
    options.cuda_visible_devices = visible;
  auto plan = PlanLaunch(hosts, options);
  if (procid == 0) WarnIfEphemeral(options.coordinator_port);
  if (!plan.ok()) return BadArguments(plan.status().message());
  if (Status st = CheckSlurmTask(*plan, ntasks, procid); !st.ok()) return BadArguments(st.message());
  const PlannedProcess& p = plan->processes[procid];
  const std::string& host = plan->hosts[p.host].name;
  const char* node = std::getenv("SLURMD_NODENAME");
  if (node != nullptr && *node != '\0' && host != node) {
    return BadArguments(std::string("this task runs on ") + node + " but the plan puts " + LaunchRoleName(p.role) +
                        " " + std::to_string(p.rank) + " on " + host +
                        "; start the tasks with srun --distribution=arbitrary and SLURM_HOSTFILE from "
                        "nereus_launch_plan --format=slurm_hostfile (nereus.sbatch does)");
  }
  const char* localid_env = std::getenv("SLURM_LOCALID");
  if (options.gpus_per_host > 0 && localid_env != nullptr && *localid_env != '\0') {
    int localid = 0;
    if (!ParseCount("SLURM_LOCALID", localid_env, &localid, &error)) return BadArguments(error);
    if (Status st = CheckSlurmLocalId(*plan, procid, localid); !st.ok()) return BadArguments(st.message());
  }
  auto known = ListBinaryFlags(bin_dir);
  if (!known.ok()) return BadArguments(known.status().message());
  auto routed = RouteFlags(pass, *known, options.gpus_per_host > 0);
  if (!routed.ok()) return BadArguments(routed.status().message());
  const std::vector<std::string> argv = ProcessArgs(*plan, p, bin_dir, *routed, worker_command);
  Say(std::string(LaunchRoleName(p.role)) + " " + std::to_string(p.rank) + " on " + host + " (" + plan->AddressOf(p) +
      ")" + (p.gpu >= 0 ? ", GPU " + std::to_string(p.gpu) : "") + ", coordinator " + plan->coordinator);
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  ::execv(cargv[0], cargv.data());
  Complain("cannot run " + argv[0] + ": " + std::strerror(errno));
  return 127;
}

// --- A whole job ---------------------------------------------------------

// One process of the job: its name in output lines, its log, and the part
// of a line it has not finished yet.
struct Stream {
  std::string label;
  int log_fd = -1;
  std::string partial;
  ~Stream() {
    if (log_fd >= 0) ::close(log_fd);
  }
};

// Output of process `s`: its complete lines, prefixed, to stdout; every byte
// as it came to its log. An empty piece is the end: a last line without a
// newline gets one.
void Forward(Stream& s, const std::string& data) {
  if (s.log_fd >= 0 && !data.empty()) WriteAll(s.log_fd, data);
  s.partial += data;
  if (data.empty() && !s.partial.empty()) s.partial += '\n';
  std::string out;
  size_t start = 0, nl;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    out += "[" + s.label + "] ";
    out.append(s.partial, start, nl + 1 - start);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (!out.empty()) WriteAll(1, out);
}

struct JobArgs {
  std::string hostfile, log_dir, bin_dir, workdir, worker_command;
  int servers = 1, workers = 1, port = 7000, gpus_per_host = 0;
  RemoteOptions remote;
  bool dry_run = false;
  std::vector<std::string> pass;
};

// The CUDA_VISIBLE_DEVICES every process of the job starts with: the last
// --env=CUDA_VISIBLE_DEVICES=...; else, where the processes inherit this
// launcher's environment (--ssh=none, netns), its own; else (over ssh, which
// does not pass it) nullopt, unknown here.
std::optional<std::string> JobCudaVisibleDevices(const RemoteOptions& remote) {
  static constexpr char kName[] = "CUDA_VISIBLE_DEVICES=";
  std::optional<std::string> visible;
  for (const std::string& e : remote.env) {
    if (StartsWith(e, kName)) visible = e.substr(sizeof(kName) - 1);
  }
  if (visible || remote.mode == RemoteMode::kSsh) return visible;
  if (const char* own = std::getenv("CUDA_VISIBLE_DEVICES"); own != nullptr) visible = own;
  return visible;
}

int RunJob(const std::vector<std::string>& args, SignalPipe* signals) {
  JobArgs job;
  job.bin_dir = SelfDir();
  job.workdir = WorkingDirectory();
  std::string mode = "ssh", ssh_opts, error;
  for (const std::string& a : args) {
    bool ok = true;
    if (StartsWith(a, "--hostfile=")) {
      job.hostfile = ValueOf(a);
    } else if (StartsWith(a, "--num_servers=")) {
      ok = ParseCount("--num_servers", ValueOf(a), &job.servers, &error);
    } else if (StartsWith(a, "--num_workers=")) {
      ok = ParseCount("--num_workers", ValueOf(a), &job.workers, &error);
    } else if (StartsWith(a, "--port=")) {
      ok = ParseCount("--port", ValueOf(a), &job.port, &error);
    } else if (StartsWith(a, "--gpus_per_host=")) {
      ok = ParseCount("--gpus_per_host", ValueOf(a), &job.gpus_per_host, &error);
    } else if (StartsWith(a, "--ssh=")) {
      mode = ValueOf(a);
    } else if (StartsWith(a, "--ssh_opts=")) {
      ssh_opts = ValueOf(a);
    } else if (StartsWith(a, "--bin_dir=")) {
      job.bin_dir = ValueOf(a);
    } else if (StartsWith(a, "--workdir=")) {
      job.workdir = ValueOf(a);
    } else if (StartsWith(a, "--env=") && a.find('=', 6) != std::string::npos) {
      job.remote.env.push_back(a.substr(6));
    } else if (StartsWith(a, "--log_dir=")) {
      job.log_dir = ValueOf(a);
    } else if (StartsWith(a, "--worker_command=")) {
      job.worker_command = ValueOf(a);
      if (job.worker_command.empty()) return BadArguments("--worker_command is empty");
    } else if (a == "--dry_run") {
      job.dry_run = true;
    } else if (a == "--help" || a == "-h") {
      WriteAll(1, kUsage);
      return 0;
    } else if (a == "--") {
    } else if (StartsWith(a, "--")) {
      job.pass.push_back(a);
    } else {
      return BadArguments("unexpected argument \"" + a + "\"; binary flags are passed as --name=value");
    }
    if (!ok) return BadArguments(error);
  }
  if (job.hostfile.empty())
    return BadArguments("--hostfile=FILE is required (one host a line, NAME [slots=N] [addr=ADDRESS])");
  auto remote_mode = ParseRemoteMode(mode);
  if (!remote_mode.ok()) return BadArguments(remote_mode.status().message());
  job.remote.mode = *remote_mode;
  job.remote.workdir = job.workdir;
  {
    std::istringstream words(ssh_opts);
    std::string w;
    while (words >> w) job.remote.ssh_options.push_back(w);
  }
  for (const char* b : {"nereus_server", "nereus_worker"}) {
    const std::string path = job.bin_dir + "/" + b;
    if (::access(path.c_str(), X_OK) != 0)
      return BadArguments(path + " not found; build first (scripts/build.sh) or give --bin_dir");
  }
  auto known = ListBinaryFlags(job.bin_dir);
  if (!known.ok()) return BadArguments(known.status().message());
  auto routed = RouteFlags(job.pass, *known, job.gpus_per_host > 0);
  if (!routed.ok()) return BadArguments(routed.status().message());

  std::ifstream in(job.hostfile);
  if (!in) return BadArguments("cannot read --hostfile " + job.hostfile);
  std::stringstream text;
  text << in.rdbuf();
  auto hosts = ParseHostfile(text.str());
  if (!hosts.ok()) return BadArguments(job.hostfile + ": " + hosts.status().message());
  if (Status st = ResolveHostAddresses(&*hosts); !st.ok()) return BadArguments(st.message());
  LaunchOptions options{job.servers, job.workers, job.port, job.gpus_per_host};
  options.cuda_visible_devices = JobCudaVisibleDevices(job.remote);
  auto plan = PlanLaunch(*hosts, options);
  if (!plan.ok()) return BadArguments(plan.status().message());
  WarnIfEphemeral(job.port);

  std::vector<std::string> labels, logs;
  std::vector<std::vector<std::string>> commands;
  for (const PlannedProcess& p : plan->processes) {
    labels.push_back(ProcessLabel(*plan, p));
    logs.push_back(ProcessLogName(p));
    commands.push_back(RemoteCommand(job.remote, plan->hosts[p.host].name,
                                     ProcessArgs(*plan, p, job.bin_dir, *routed, job.worker_command)));
  }
  if (job.dry_run) {
    std::string out;
    for (size_t i = 0; i < commands.size(); ++i) out += "[" + labels[i] + "] " + ShellWords(commands[i]) + "\n";
    WriteAll(1, out);
    return 0;
  }
  if (signals->Take() != 0) {
    Complain("interrupted; nothing was started");
    return kInterrupted;
  }

  std::vector<std::unique_ptr<Stream>> streams;
  for (size_t i = 0; i < labels.size(); ++i) {
    streams.push_back(std::make_unique<Stream>());
    streams.back()->label = labels[i];
  }
  if (!job.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(job.log_dir, ec);
    if (ec) return BadArguments("cannot make --log_dir " + job.log_dir + ": " + ec.message());
    for (size_t i = 0; i < logs.size(); ++i) {
      const std::string path = job.log_dir + "/" + logs[i] + ".log";
      streams[i]->log_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (streams[i]->log_fd < 0) return BadArguments("cannot write " + path + ": " + std::strerror(errno));
    }
  }
  // Over ssh every client reads its stdin from one pipe held here; closing
  // its write end is end-of-file for all, and each remote shell then stops
  // its process (RemoteCommand).
  int stdin_pipe[2] = {-1, -1};
  if (job.remote.mode == RemoteMode::kSsh && ::pipe2(stdin_pipe, O_CLOEXEC) != 0) {
    Complain(std::string("pipe2: ") + std::strerror(errno));
    return 1;
  }
  auto close_stdin = [&] {
    for (int& fd : stdin_pipe) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  };

  Supervisor::Options so;
  so.signals = signals;
  so.on_output = [&](size_t i, const std::string& data) { Forward(*streams[i], data); };
  Supervisor job_processes(so);
  auto stop_all = [&](int code) {
    // ssh: the remote shells stop their processes; here: SIGTERM to each
    // process group. Either way SIGKILL after kStopGrace or a second signal.
    std::function<void()> ask;
    if (job.remote.mode == RemoteMode::kSsh) ask = close_stdin;
    Status st = job_processes.Stop(ask, kStopGrace);
    close_stdin();
    if (!st.ok()) Complain(st.message());
    return code;
  };

  Say("coordinator at " + plan->coordinator + ", " + std::to_string(job.servers) + " server(s), " +
      std::to_string(job.workers) + " worker(s), " + std::to_string(commands.size()) + " processes");
  for (size_t i = 0; i < commands.size(); ++i) {
    SubprocessOptions o;
    o.argv = commands[i];
    o.output = SubprocessOptions::Output::kPipe;
    o.input_fd = stdin_pipe[0];
    o.own_process_group = true;
    auto started = job_processes.Start(labels[i], o);
    if (!started.ok()) {
      Complain(labels[i] + " could not be started: " + started.status().message() + "; stopping every process");
      return stop_all(1);
    }
  }
  if (stdin_pipe[0] >= 0) {
    ::close(stdin_pipe[0]);  // The clients hold it now.
    stdin_pipe[0] = -1;
  }

  const Supervisor::Event e = job_processes.Wait();
  switch (e.kind) {
    case Supervisor::Event::kAllExited:
      close_stdin();
      Say("every process exited cleanly");
      return 0;
    case Supervisor::Event::kFailed:
      Complain(job_processes.name(e.index) + " exited with status " +
               std::to_string(*job_processes.child(e.index).exit_code()) + "; stopping every process");
      return stop_all(1);
    case Supervisor::Event::kSignal:
    case Supervisor::Event::kDeadline:
      break;
  }
  Complain("interrupted; stopping every process");
  return stop_all(kInterrupted);
}

}  // namespace
}  // namespace nereus

int main(int argc, char** argv) {
  using namespace nereus;
  if (argc > 0 && argv[0] != nullptr && argv[0][0] != '\0') {
    const std::string self = argv[0];
    g_name = self.substr(self.rfind('/') + 1);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--slurm_task") {
    args.erase(args.begin());
    return RunSlurmTask(args);  // Execs the task's binary: no handlers to undo.
  }
  // First: a Ctrl-C at any later moment stops whatever has been started.
  ::signal(SIGCHLD, SIG_DFL);
  ::signal(SIGPIPE, SIG_IGN);
  auto signals = SignalPipe::Create({SIGINT, SIGTERM, SIGHUP});
  if (!signals.ok()) {
    Complain(signals.status().message());
    return 1;
  }
  return RunJob(args, signals->get());
}

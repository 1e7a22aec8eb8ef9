#include "common/launch/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace nereus {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// Milliseconds until `deadline` for poll(): rounded up (a wait never ends
// early), clamped to int; -1 without a deadline.
int PollTimeout(std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!deadline) return -1;
  const auto left = *deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

bool Passed(std::optional<std::chrono::steady_clock::time_point> deadline) {
  return deadline && std::chrono::steady_clock::now() >= *deadline;
}

// Closes the descriptors of a spawn attempt on every path.
struct SpawnResources {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int file = -1;
  int pipe_read = -1, pipe_write = -1;
  SpawnResources() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnResources() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    for (int fd : {file, pipe_read, pipe_write})
      if (fd >= 0) ::close(fd);
  }
};

// The signal pipe's write end, for the handler (set before any handler is
// installed, never closed).
std::atomic<int> g_signal_write_fd{-1};
std::atomic<bool> g_signal_pipe_taken{false};

extern "C" void WriteSignalByte(int sig) {
  const int saved = errno;
  const int fd = g_signal_write_fd.load();
  const unsigned char b = static_cast<unsigned char>(sig);
  if (fd >= 0) (void)!::write(fd, &b, 1);  // A full pipe already holds a pending signal.
  errno = saved;
}

// The process's one signal pipe, made on first use; lives until exit (see
// SignalPipe in the header).
struct ProcessSignalPipe {
  int read_fd = -1, write_fd = -1, error = 0;
};
const ProcessSignalPipe& TheSignalPipe() {
  static const ProcessSignalPipe p = [] {
    ProcessSignalPipe made;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      made.error = errno;
    } else {
      made.read_fd = fds[0];
      made.write_fd = fds[1];
    }
    return made;
  }();
  return p;
}

}  // namespace

// --- Subprocess ---------------------------------------------------------

StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) return InvalidArgumentError("no program to run");
  const std::string& program = options.argv[0];
  struct sigaction chld {};
  ::sigaction(SIGCHLD, nullptr, &chld);
  if (chld.sa_handler == SIG_IGN || (chld.sa_flags & SA_NOCLDWAIT) != 0) {
    return FailedPreconditionError("cannot run " + program +
                                   ": SIGCHLD is ignored here, so the kernel would reap the child before its exit "
                                   "status could be read");
  }
  SpawnResources r;
  if (options.output == SubprocessOptions::Output::kFile) {
    r.file = ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (r.file < 0) return UnavailableError("cannot write " + options.output_file + ": " + ErrnoText(errno));
    posix_spawn_file_actions_adddup2(&r.actions, r.file, 1);
    posix_spawn_file_actions_adddup2(&r.actions, r.file, 2);
  } else if (options.output == SubprocessOptions::Output::kPipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return UnavailableError("pipe2: " + ErrnoText(errno));
    r.pipe_read = fds[0];
    r.pipe_write = fds[1];
    posix_spawn_file_actions_adddup2(&r.actions, r.pipe_write, 1);
    posix_spawn_file_actions_adddup2(&r.actions, r.pipe_write, 2);
  }
  if (options.input_fd >= 0) {
    posix_spawn_file_actions_adddup2(&r.actions, options.input_fd, 0);
  } else {
    posix_spawn_file_actions_addopen(&r.actions, 0, "/dev/null", O_RDONLY, 0);
  }
  // Every descriptor of this process is close-on-exec (ours are made so; so
  // are ZeroMQ's): a child holds only 0, 1 and 2, and an output pipe reaches
  // end-of-file when the child and what it started have exited.
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&r.attr, &none);
  // A launcher ignores SIGPIPE to survive a closed stdout; its children get
  // the default back. (Caught signals are reset by exec anyway; ignored ones
  // stay ignored, as nohup intends.)
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&r.attr, &defaults);
  if (options.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&r.attr, 0);
  }
  posix_spawnattr_setflags(&r.attr, flags);

  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  // glibc's posix_spawn reports a failed exec (no such program) here.
  const int err = ::posix_spawnp(&pid, program.c_str(), &r.actions, &r.attr, argv.data(), environ);
  if (err != 0) return UnavailableError("cannot run " + program + ": " + ErrnoText(err));
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int e = errno;
    ::kill(pid, SIGKILL);
    int st;
    ::waitpid(pid, &st, 0);
    return UnavailableError("pidfd_open (Linux >= 5.3) for " + program + ": " + ErrnoText(e));
  }
  int output = -1;
  if (r.pipe_read >= 0) {
    output = r.pipe_read;
    r.pipe_read = -1;
    ::fcntl(output, F_SETFL, ::fcntl(output, F_GETFL) | O_NONBLOCK);
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, pidfd, output, options.own_process_group));
}

Subprocess::~Subprocess() {
  if (!exit_code_) {
    Signal(SIGKILL);
    int st;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  CloseOutput();
  ::close(pidfd_);
}

bool Subprocess::ReadOutput(std::string* out) {
  if (output_fd_ < 0) return false;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(output_fd_, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    CloseOutput();  // End-of-file, or an error that ends it the same way.
    return false;
  }
}

void Subprocess::CloseOutput() {
  if (output_fd_ >= 0) ::close(output_fd_);
  output_fd_ = -1;
}

bool Subprocess::Reap() {
  if (exit_code_) return true;
  int st = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &st, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) return false;
  if (r < 0) {
    // ECHILD: reaped elsewhere (Start refuses an ignored SIGCHLD); the status is lost.
    LOG(ERROR) << "waitpid(" << pid_ << "): " << ErrnoText(errno);
    exit_code_ = 255;
    wait_status_ = 255 << 8;
    return true;
  }
  wait_status_ = st;
  exit_code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

std::optional<int> Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Reap()) {
    pollfd p{pidfd_, POLLIN, 0};
    const int n = ::poll(&p, 1, PollTimeout(deadline));
    if (n == 0 && Passed(deadline)) return std::nullopt;
    if (n < 0 && errno != EINTR) PLOG(FATAL) << "poll";
  }
  return exit_code_;
}

std::string Subprocess::DescribeExit() const {
  if (!exit_code_) return "is running";
  if (WIFSIGNALED(wait_status_)) {
    const int sig = WTERMSIG(wait_status_);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with status " + std::to_string(*exit_code_);
}

void Subprocess::Signal(int sig) {
  if (!exit_code_) ::kill(group_ ? -pid_ : pid_, sig);
}

StatusOr<int> RunCommand(const std::vector<std::string>& argv, std::string* output, std::chrono::milliseconds timeout) {
  SubprocessOptions o;
  o.argv = argv;
  o.output = SubprocessOptions::Output::kPipe;
  ASSIGN_OR_RETURN(auto p, Subprocess::Start(o));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string out;
  // Until it has exited and its output has ended (a grandchild holding the
  // pipe open runs into the deadline too).
  while (!p->Reap() || p->output_fd() >= 0) {
    pollfd fds[2] = {{p->exit_fd(), POLLIN, 0}, {p->output_fd(), POLLIN, 0}};
    const bool running = p->running();
    pollfd* first = running ? &fds[0] : &fds[1];
    const int count = (running ? 1 : 0) + (p->output_fd() >= 0 ? 1 : 0);
    const int n = ::poll(first, count, PollTimeout(deadline));
    if (n < 0 && errno != EINTR) return UnavailableError("poll: " + ErrnoText(errno));
    p->ReadOutput(&out);
    if (n == 0 && Passed(deadline)) {
      if (output) *output = out;
      return DeadlineExceededError(argv[0] + " did not finish within " + std::to_string(timeout.count()) +
                                   " ms; killed");
    }
  }
  if (output) *output = out;
  return *p->exit_code();
}

// --- SignalPipe ----------------------------------------------------------

StatusOr<std::unique_ptr<SignalPipe>> SignalPipe::Create(const std::vector<int>& signals) {
  const ProcessSignalPipe& pipe = TheSignalPipe();
  if (pipe.error != 0) return UnavailableError("pipe2: " + ErrnoText(pipe.error));
  if (g_signal_pipe_taken.exchange(true)) return FailedPreconditionError("a SignalPipe exists already");
  // Bytes a late handler of an earlier SignalPipe wrote are stale.
  char drain[256];
  while (::read(pipe.read_fd, drain, sizeof(drain)) > 0) {
  }
  g_signal_write_fd.store(pipe.write_fd);
  std::vector<std::pair<int, struct sigaction>> saved;
  for (int sig : signals) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = WriteSignalByte;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(sig, &sa, &old);
    saved.emplace_back(sig, old);
  }
  return std::unique_ptr<SignalPipe>(new SignalPipe(pipe.read_fd, std::move(saved)));
}

SignalPipe::~SignalPipe() {
  for (const auto& [sig, old] : saved_) ::sigaction(sig, &old, nullptr);
  g_signal_pipe_taken.store(false);
}

int SignalPipe::Take() {
  int first = 0;
  unsigned char buf[64];
  ssize_t n;
  while ((n = ::read(read_fd_, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i)
      if (first == 0) first = buf[i];
  }
  return first;
}

// --- Supervisor ----------------------------------------------------------

Supervisor::Supervisor(Options options) : options_(std::move(options)) {}

Supervisor::~Supervisor() = default;  // Each Subprocess kills and reaps its child.

StatusOr<size_t> Supervisor::Start(const std::string& name, const SubprocessOptions& options) {
  ASSIGN_OR_RETURN(auto process, Subprocess::Start(options));
  Child c;
  c.name = name;
  c.output_ended = process->output_fd() < 0;
  c.process = std::move(process);
  children_.push_back(std::move(c));
  return children_.size() - 1;
}

void Supervisor::ReadOutput(Child& c, size_t index) {
  if (c.output_ended) return;
  std::string data;
  const bool open = c.process->ReadOutput(&data);
  if (!data.empty() && options_.on_output) options_.on_output(index, data);
  if (!open) {
    c.output_ended = true;
    if (options_.on_output) options_.on_output(index, std::string());
  }
}

bool Supervisor::AnyRunning() const {
  for (const Child& c : children_)
    if (c.process->running()) return true;
  return false;
}

bool Supervisor::AnyOutputOpen() const {
  for (const Child& c : children_)
    if (!c.output_ended) return true;
  return false;
}

void Supervisor::CloseOutputs() {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.output_ended) continue;
    ReadOutput(c, i);  // What is there now.
    if (c.output_ended) continue;
    c.process->CloseOutput();
    c.output_ended = true;
    if (options_.on_output) options_.on_output(i, std::string());
  }
}

int Supervisor::PollOnce(std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, bool>> owner;  // (child, is its exit fd)
  if (options_.signals != nullptr) fds.push_back({options_.signals->fd(), POLLIN, 0});
  for (size_t i = 0; i < children_.size(); ++i) {
    const Child& c = children_[i];
    if (c.process->running()) {
      fds.push_back({c.process->exit_fd(), POLLIN, 0});
      owner.emplace_back(i, true);
    }
    if (!c.output_ended) {
      fds.push_back({c.process->output_fd(), POLLIN, 0});
      owner.emplace_back(i, false);
    }
  }
  if (fds.empty() && !deadline) return 0;
  const int n = ::poll(fds.data(), fds.size(), PollTimeout(deadline));
  if (n < 0) {
    if (errno != EINTR) PLOG(FATAL) << "poll";
    return 0;
  }
  if (n == 0) return 0;
  const size_t base = options_.signals != nullptr ? 1 : 0;
  for (size_t k = 0; k < owner.size(); ++k) {
    if (fds[base + k].revents == 0) continue;
    Child& c = children_[owner[k].first];
    // An exited child's output is read before it is reaped, so that its
    // last words come before the news of its end.
    ReadOutput(c, owner[k].first);
    if (owner[k].second) c.process->Reap();
  }
  if (base == 1 && fds[0].revents != 0) return options_.signals->Take();
  return 0;
}

Supervisor::Event Supervisor::Wait(std::optional<std::chrono::steady_clock::time_point> deadline) {
  std::optional<std::chrono::steady_clock::time_point> drain_until;
  while (true) {
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& c = children_[i];
      if (!c.reported && !c.process->running() && c.process->exit_code() != 0) {
        c.reported = true;
        return Event{Event::kFailed, i, 0};
      }
    }
    if (!AnyRunning()) {
      if (!drain_until) drain_until = std::chrono::steady_clock::now() + options_.output_drain;
      if (!AnyOutputOpen() || Passed(drain_until)) {
        CloseOutputs();
        return Event{Event::kAllExited, 0, 0};
      }
    }
    if (Passed(deadline)) return Event{Event::kDeadline, 0, 0};
    auto until = deadline;
    if (drain_until && (!until || *drain_until < *until)) until = drain_until;
    const int sig = PollOnce(until);
    if (sig != 0) return Event{Event::kSignal, 0, sig};
  }
}

Status Supervisor::Stop(const std::function<void()>& ask, std::chrono::milliseconds grace,
                        std::chrono::milliseconds kill_wait) {
  if (AnyRunning()) {
    if (ask) {
      ask();
    } else {
      for (Child& c : children_) c.process->Signal(SIGTERM);
    }
  }
  const auto now = std::chrono::steady_clock::now;
  const auto grace_end = now() + grace;
  while (AnyRunning() && !Passed(grace_end)) {
    if (PollOnce(grace_end) != 0) break;  // Asked again: no more patience.
  }
  if (AnyRunning()) {
    for (Child& c : children_) c.process->Signal(SIGKILL);
    const auto kill_end = now() + kill_wait;
    while (AnyRunning() && !Passed(kill_end)) PollOnce(kill_end);
  }
  const auto drain_end = now() + options_.output_drain;
  while (AnyOutputOpen() && !Passed(drain_end)) PollOnce(drain_end);
  CloseOutputs();
  std::string stuck;
  for (const Child& c : children_)
    if (c.process->running())
      stuck += (stuck.empty() ? "" : ", ") + c.name + " (pid " + std::to_string(c.process->pid()) + ")";
  if (!stuck.empty())
    return DeadlineExceededError("not reaped " + std::to_string(kill_wait.count()) + " ms after SIGKILL: " + stuck);
  return Status::OK();
}

}  // namespace nereus

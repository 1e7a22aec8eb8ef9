#include "tests/support/process_util.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace nereus {
namespace test {

std::unique_ptr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  PCHECK(fd >= 0) << log_path;
  const pid_t pid = fork();
  PCHECK(pid >= 0);
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fd);
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  PCHECK(pidfd >= 0) << "pidfd_open";
  return std::unique_ptr<Subprocess>(new Subprocess(pid, pidfd, log_path));
}

Subprocess::~Subprocess() {
  if (!status_) {
    kill(pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
  }
  close(pidfd_);
}

std::optional<int> Subprocess::WaitFor(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  pollfd p{pidfd_, POLLIN, 0};
  const int r = poll(&p, 1, static_cast<int>(timeout.count()));
  if (r <= 0) return std::nullopt;
  int st = 0;
  PCHECK(waitpid(pid_, &st, 0) == pid_);
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return status_;
}

void Subprocess::Signal(int sig) {
  if (!status_) kill(pid_, sig);
}

std::string Subprocess::Log() const { return ReadFile(log_path_); }

bool Subprocess::WaitForLog(const std::string& text, std::chrono::milliseconds timeout) {
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  PCHECK(fd >= 0);
  PCHECK(inotify_add_watch(fd, log_path_.c_str(), IN_MODIFY) >= 0) << log_path_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool found = false;
  while (true) {
    // Checked after the watch is in place: a write in between wakes the poll.
    if (Log().find(text) != std::string::npos) {
      found = true;
      break;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    // Wake on a write to the log or on the process's exit.
    pollfd p[2] = {{fd, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    const int r = poll(p, status_ ? 1 : 2, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) break;
    if (p[0].revents & POLLIN) {
      char events[4096];
      while (read(fd, events, sizeof(events)) > 0) {
      }
    }
    if (!status_ && (p[1].revents & POLLIN)) {
      found = Log().find(text) != std::string::npos;
      break;
    }
  }
  close(fd);
  return found;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string BinaryPath(const std::string& name) {
  const char* dir = std::getenv("NEREUS_BIN_DIR");
  CHECK(dir != nullptr) << "NEREUS_BIN_DIR is not set (run the test through ctest)";
  return std::string(dir) + "/" + name;
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp ? tmp : "/tmp") + "/nereus_test_XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  PCHECK(mkdtemp(buf.data()) != nullptr);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int FreePort() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  PCHECK(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  socklen_t len = sizeof(a);
  PCHECK(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  close(s);
  return ntohs(a.sin_port);
}

LocalCluster::LocalCluster(const ClusterSpec& spec, const TempDir& dir) : port_(FreePort()) {
  const std::string coord = "--coordinator=" + coordinator_address();
  std::vector<std::string> c = {BinaryPath("nereus_server"), "--role=coordinator", coord,
                                "--num_servers=" + std::to_string(spec.servers),
                                "--num_workers=" + std::to_string(spec.workers)};
  c.insert(c.end(), spec.coordinator_flags.begin(), spec.coordinator_flags.end());
  coordinator_ = Subprocess::Start(c, dir.File("coordinator.log"));
  for (int s = 0; s < spec.servers; ++s) {
    std::vector<std::string> a = {BinaryPath("nereus_server"), "--role=server", coord, "--rank=" + std::to_string(s)};
    a.insert(a.end(), spec.server_flags.begin(), spec.server_flags.end());
    for (const auto& [rank, flags] : spec.server_rank_flags)
      if (rank == s) a.insert(a.end(), flags.begin(), flags.end());
    servers_.push_back(Subprocess::Start(a, dir.File("server" + std::to_string(s) + ".log")));
  }
  for (int w = 0; w < spec.workers; ++w) {
    if (std::count(spec.external_workers.begin(), spec.external_workers.end(), w)) {
      workers_.push_back(nullptr);
      worker_argv_.emplace_back();
      continue;
    }
    std::vector<std::string> a = {BinaryPath("nereus_worker"), coord, "--rank=" + std::to_string(w)};
    a.insert(a.end(), spec.worker_flags.begin(), spec.worker_flags.end());
    for (const auto& [rank, flags] : spec.worker_rank_flags)
      if (rank == w) a.insert(a.end(), flags.begin(), flags.end());
    workers_.push_back(Subprocess::Start(a, dir.File("worker" + std::to_string(w) + ".log")));
    worker_argv_.push_back(std::move(a));
  }
}

std::string LocalCluster::coordinator_address() const { return "127.0.0.1:" + std::to_string(port_); }

bool LocalCluster::WaitAll(std::chrono::milliseconds timeout, std::string* report) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Subprocess*> all = {coordinator_.get()};
  for (auto& s : servers_) all.push_back(s.get());
  for (auto& w : workers_)
    if (w) all.push_back(w.get());
  codes_.clear();
  bool ok = true;
  std::ostringstream os;
  for (Subprocess* p : all) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto code = p->WaitFor(std::max(left, std::chrono::milliseconds(0)));
    codes_.push_back(code);
    if (!code) ok = false;
    os << "--- " << p->log_path() << " (exit " << (code ? std::to_string(*code) : "none: still running") << ")\n";
    std::string log = p->Log();
    if (log.size() > 3000) log = "..." + log.substr(log.size() - 3000);
    os << log;
  }
  if (report) *report = os.str();
  return ok;
}

}  // namespace test
}  // namespace nereus

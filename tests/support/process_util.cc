#include "tests/support/process_util.h"

#include <glog/logging.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace nereus {
namespace test {

std::unique_ptr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  SubprocessOptions o;
  o.argv = argv;
  o.output = SubprocessOptions::Output::kFile;
  o.output_file = log_path;
  auto process = nereus::Subprocess::Start(o);
  CHECK(process.ok()) << process.status();
  return std::unique_ptr<Subprocess>(new Subprocess(std::move(process).value(), log_path));
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
    if (!process_->running()) break;  // Reaped: its log is final.
    pollfd p[2] = {{fd, POLLIN, 0}, {process_->exit_fd(), POLLIN, 0}};
    const int r = poll(p, 2, static_cast<int>(left.count()));
    if (r < 0 && errno != EINTR) break;
    if (p[0].revents & POLLIN) {
      char events[4096];
      while (read(fd, events, sizeof(events)) > 0) {
      }
    }
    if (p[1].revents & POLLIN) {
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

ToolRun RunTool(const std::string& binary, const std::string& args) {
  ToolRun result;
  FILE* pipe = ::popen((BinaryPath(binary) + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
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

// Below the kernel's ephemeral range (ip_local_port_range): processes
// connect to a coordinator's port before it listens, and a connect() to a
// port the kernel may also hand out as the connection's own source port can
// meet itself (TCP simultaneous open): ZeroMQ then holds a working
// connection to itself, and the node repeats REGISTER to itself until its
// start-up times out (seen in CI: "missing server 0" after 60 s).
int FreePort() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  if (range) range >> low;
  CHECK_GT(low, 11000) << "ephemeral ports start at " << low << ": no room below them for test ports";
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(10000, low - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = pick(rng);
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    PCHECK(s >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(s);
    if (free) return port;
  }
  LOG(FATAL) << "no free port in 10000.." << low - 1 << " after 1000 tries";
  return -1;
}

std::string MakeCurveKeys(const TempDir& dir, const std::string& name, int servers, int workers) {
  const std::string keys = dir.File(name);
  auto p = Subprocess::Start({BinaryPath("nereus_keygen"), keys, "--servers=" + std::to_string(servers),
                              "--workers=" + std::to_string(workers)},
                             dir.File(name + ".log"));
  auto code = p->WaitFor(std::chrono::seconds(20));
  CHECK(code.has_value() && *code == 0) << p->Log();
  return keys;
}

LocalCluster::LocalCluster(const ClusterSpec& spec, const TempDir& dir) : port_(FreePort()) {
  const std::string coord = "--coordinator=" + coordinator_address();
  std::vector<std::string> c = {BinaryPath("nereus_server"), "--role=coordinator", coord,
                                "--num_servers=" + std::to_string(spec.servers),
                                "--num_workers=" + std::to_string(spec.workers)};
  c.insert(c.end(), spec.coordinator_flags.begin(), spec.coordinator_flags.end());
  c.insert(c.begin(), spec.wrap.begin(), spec.wrap.end());
  if (!spec.coordinator_last) coordinator_ = Subprocess::Start(c, dir.File("coordinator.log"));
  coordinator_argv_ = c;
  for (int s = 0; s < spec.servers; ++s) {
    std::vector<std::string> a = {BinaryPath("nereus_server"), "--role=server", coord, "--rank=" + std::to_string(s)};
    a.insert(a.end(), spec.server_flags.begin(), spec.server_flags.end());
    for (const auto& [rank, flags] : spec.server_rank_flags)
      if (rank == s) a.insert(a.end(), flags.begin(), flags.end());
    a.insert(a.begin(), spec.wrap.begin(), spec.wrap.end());
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
    a.insert(a.begin(), spec.wrap.begin(), spec.wrap.end());
    workers_.push_back(Subprocess::Start(a, dir.File("worker" + std::to_string(w) + ".log")));
    worker_argv_.push_back(std::move(a));
  }
  if (spec.coordinator_last) {
    // An event, not a time: each node logs this just before its first
    // REGISTER. A node that never does fails the test through its report.
    std::vector<Subprocess*> nodes;
    for (auto& s : servers_) nodes.push_back(s.get());
    for (auto& w : workers_)
      if (w) nodes.push_back(w.get());
    for (Subprocess* p : nodes) p->WaitForLog("registering with coordinator", std::chrono::seconds(120));
    coordinator_ = Subprocess::Start(c, dir.File("coordinator.log"));
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

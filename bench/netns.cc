#include "bench/netns.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include <glog/logging.h>

namespace nereus {
namespace bench {

int RunCommand(const std::vector<std::string>& argv, std::string* output) {
  int fds[2];
  PCHECK(pipe(fds) == 0);
  const pid_t pid = fork();
  PCHECK(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s\n", args[0]);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

StatusOr<std::unique_ptr<NetNamespace>> NetNamespace::Create(const std::string& name, double rate_mbit) {
  std::string out;
  if (RunCommand({"ip", "netns", "add", name}, &out) != 0)
    return UnavailableError("cannot create network namespace " + name + ": " + out);
  std::unique_ptr<NetNamespace> ns(new NetNamespace(name));  // Deleted on any later failure.
  auto in = [&](std::vector<std::string> argv) -> Status {
    std::vector<std::string> full = ns->Wrap(argv);
    if (RunCommand(full, &out) != 0) {
      std::ostringstream cmd;
      for (const auto& a : argv) cmd << a << " ";
      return UnavailableError("in namespace " + name + ", \"" + cmd.str() + "\" failed: " + out);
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(in({"ip", "link", "set", "lo", "mtu", "1500"}));
  RETURN_IF_ERROR(in({"ip", "link", "set", "lo", "up"}));
  if (rate_mbit > 0) {
    std::ostringstream rate;
    rate << static_cast<long long>(rate_mbit * 1000) << "kbit";
    RETURN_IF_ERROR(in({"tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate.str(), "burst", "256kb",
                        "latency", "500ms"}));
  }
  return ns;
}

NetNamespace::~NetNamespace() {
  std::string out;
  if (RunCommand({"ip", "netns", "del", name_}, &out) != 0) LOG(ERROR) << "cannot delete namespace " << name_ << ": " << out;
}

std::vector<std::string> NetNamespace::Wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> full = {"ip", "netns", "exec", name_};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

}  // namespace bench
}  // namespace nereus

#include "bench/harness/netns.h"

#include <glog/logging.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "common/launch/subprocess.h"

namespace nereus {
namespace bench {

int RunCommand(const std::vector<std::string>& argv, std::string* output) {
  // No bound of its own: ip returns at once; a bench run inside a namespace
  // is bounded by its own watchdog.
  auto code = nereus::RunCommand(argv, output, std::chrono::hours(24));
  if (code.ok()) return *code;
  if (output != nullptr) *output += code.status().message();
  return 127;
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
    RETURN_IF_ERROR(in(
        {"tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate.str(), "burst", "256kb", "latency", "500ms"}));
  }
  return ns;
}

NetNamespace::~NetNamespace() {
  std::string out;
  if (RunCommand({"ip", "netns", "del", name_}, &out) != 0)
    LOG(ERROR) << "cannot delete namespace " << name_ << ": " << out;
}

std::vector<std::string> NetNamespace::Wrap(const std::vector<std::string>& argv) const {
  std::vector<std::string> full = {"ip", "netns", "exec", name_};
  full.insert(full.end(), argv.begin(), argv.end());
  return full;
}

namespace {

Status Run(const std::vector<std::string>& argv) {
  std::string out;
  if (RunCommand(argv, &out) == 0) return Status::OK();
  std::ostringstream cmd;
  for (const auto& a : argv) cmd << a << " ";
  return UnavailableError("\"" + cmd.str() + "\" failed: " + out);
}

std::vector<std::string> In(const std::string& ns, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
  return argv;
}

// tc commands shaping `dev` in `ns` to rate_mbit, after latency_us.
Status Shape(const std::string& ns, const std::string& dev, double rate_mbit, double latency_us) {
  std::string parent = "root";
  if (latency_us > 0) {
    Status st = Run(In(ns, {"tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay",
                            std::to_string(static_cast<long long>(latency_us)) + "us", "limit", "100000"}));
    if (!st.ok()) return st.Annotate("--latency_us needs tc netem (the sch_netem kernel module)");
    parent = "1:";
  }
  if (rate_mbit <= 0) return Status::OK();
  // The bucket holds 2 ms at the rate (at least 64 KB: one GSO segment).
  const long long burst = std::max<long long>(64 << 10, static_cast<long long>(rate_mbit * 1e6 / 8 * 0.002));
  std::vector<std::string> tbf = {"tc", "qdisc", "add", "dev", dev};
  if (parent == "root")
    tbf.push_back("root");
  else
    tbf.insert(tbf.end(), {"parent", parent, "handle", "2:"});
  tbf.insert(tbf.end(), {"tbf", "rate", std::to_string(static_cast<long long>(rate_mbit * 1000)) + "kbit", "burst",
                         std::to_string(burst), "latency", "200ms"});
  return Run(In(ns, tbf));
}

}  // namespace

StatusOr<std::unique_ptr<EmulatedNetwork>> EmulatedNetwork::Create(const std::string& prefix, int hosts,
                                                                   double rate_mbit, double latency_us) {
  if (hosts < 1 || hosts > 250) return InvalidArgumentError("hosts must be 1..250, got " + std::to_string(hosts));
  std::unique_ptr<EmulatedNetwork> net(new EmulatedNetwork());  // Deletes what was made on any failure.
  auto add = [&](const std::string& ns) -> Status {
    RETURN_IF_ERROR(Run({"ip", "netns", "add", ns}).Annotate("cannot create network namespace " + ns));
    if (ns == prefix + "sw")
      net->switch_ = ns;
    else
      net->hosts_.push_back(ns);
    return Run(In(ns, {"ip", "link", "set", "lo", "up"}));
  };
  RETURN_IF_ERROR(add(prefix + "sw"));
  RETURN_IF_ERROR(Run(In(net->switch_, {"ip", "link", "add", "br0", "type", "bridge"})));
  RETURN_IF_ERROR(Run(In(net->switch_, {"ip", "link", "set", "br0", "up"})));
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = prefix + "h" + std::to_string(h), port = "h" + std::to_string(h);
    RETURN_IF_ERROR(add(ns));
    // veths default to MTU 1500, an Ethernet's.
    RETURN_IF_ERROR(
        Run({"ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port, "netns", net->switch_}));
    RETURN_IF_ERROR(Run(In(net->switch_, {"ip", "link", "set", port, "master", "br0"})));
    RETURN_IF_ERROR(Run(In(net->switch_, {"ip", "link", "set", port, "up"})));
    RETURN_IF_ERROR(Run(In(ns, {"ip", "addr", "add", Address(h) + "/24", "dev", "eth0"})));
    RETURN_IF_ERROR(Run(In(ns, {"ip", "link", "set", "eth0", "up"})));
    RETURN_IF_ERROR(Shape(ns, "eth0", rate_mbit, latency_us));                // What the host sends.
    RETURN_IF_ERROR(Shape(net->switch_, port, rate_mbit, /*latency_us=*/0));  // What it receives.
  }
  return net;
}

EmulatedNetwork::~EmulatedNetwork() {
  for (const std::string& ns : namespaces()) {
    std::string out;
    if (RunCommand({"ip", "netns", "del", ns}, &out) != 0)
      LOG(ERROR) << "cannot delete namespace " << ns << ": " << out;
  }
}

std::vector<std::string> EmulatedNetwork::namespaces() const {
  std::vector<std::string> all = hosts_;
  if (!switch_.empty()) all.push_back(switch_);
  return all;
}

Status EmulatedNetwork::LinkBytes(int h, uint64_t* tx, uint64_t* rx) const {
  for (auto [what, out] : {std::pair<const char*, uint64_t*>{"tx_bytes", tx}, {"rx_bytes", rx}}) {
    std::string text;
    const std::string file = std::string("/sys/class/net/eth0/statistics/") + what;
    if (RunCommand(In(hosts_.at(h), {"cat", file}), &text) != 0)
      return UnavailableError("cannot read " + file + " of " + hosts_.at(h) + ": " + text);
    *out = std::strtoull(text.c_str(), nullptr, 10);
  }
  return Status::OK();
}

std::vector<std::string> EmulatedNetwork::Wrap(int h, const std::vector<std::string>& argv) const {
  return In(hosts_.at(h), argv);
}

int RemoveStaleNamespaces(const std::string& base) {
  std::string out;
  if (RunCommand({"ip", "netns", "list"}, &out) != 0) return 0;
  std::istringstream lines(out);
  std::string line;
  int removed = 0;
  while (std::getline(lines, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.compare(0, base.size(), base) != 0) continue;
    const size_t end = name.find('_', base.size());
    if (end == std::string::npos || end == base.size()) continue;
    const std::string digits = name.substr(base.size(), end - base.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // Its maker still runs.
    std::string del;
    if (RunCommand({"ip", "netns", "del", name}, &del) == 0) {
      LOG(WARNING) << "removed namespace " << name << " left by process " << pid << ", which no longer runs";
      ++removed;
    }
  }
  return removed;
}

}  // namespace bench
}  // namespace nereus

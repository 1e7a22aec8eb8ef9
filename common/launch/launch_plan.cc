#include "common/launch/launch_plan.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>

#include "common/base/enum_names.h"

namespace nereus {
namespace {

// Host names and addresses end up in shell command lines (ssh, srun): only
// characters that need no quoting are accepted.
bool IsSafeName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':')) return false;
  }
  return true;
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

bool ParsePositiveInt(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  *out = std::stoi(s);
  return *out >= 1;
}

constexpr size_t kMaxHosts = 1 << 20;

// One bracket group's entries, "01-03,7" -> 01 02 03 7.
StatusOr<std::vector<std::string>> ExpandRanges(const std::string& body, const std::string& expr) {
  std::vector<std::string> out;
  std::stringstream ss(body);
  std::string entry;
  while (std::getline(ss, entry, ',')) {
    const size_t dash = entry.find('-');
    const std::string lo = entry.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : entry.substr(dash + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 9 &&
             std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    };
    if (!digits(lo) || !digits(hi)) {
      return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": " + Quoted(entry) +
                                  " in brackets is not a number or a range N-M");
    }
    const long a = std::stol(lo), b = std::stol(hi);
    if (b < a)
      return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": range " + Quoted(entry) + " runs backwards");
    if (static_cast<size_t>(b - a) >= kMaxHosts) {
      return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": range " + Quoted(entry) + " is too long");
    }
    for (long v = a; v <= b; ++v) {
      std::string n = std::to_string(v);
      if (n.size() < lo.size()) n.insert(0, lo.size() - n.size(), '0');
      out.push_back(n);
    }
  }
  if (out.empty() || body.back() == ',') {
    return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": empty entry in brackets");
  }
  return out;
}

// One name with bracket groups, "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2.
StatusOr<std::vector<std::string>> ExpandName(const std::string& item, const std::string& expr) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == '[') {
      const size_t close = item.find(']', i);
      if (close == std::string::npos)
        return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": '[' without ']'");
      ASSIGN_OR_RETURN(auto values, ExpandRanges(item.substr(i + 1, close - i - 1), expr));
      if (names.size() * values.size() > kMaxHosts)
        return InvalidArgumentError("Slurm host list " + Quoted(expr) + " is too long");
      std::vector<std::string> next;
      for (const auto& prefix : names) {
        for (const auto& v : values) next.push_back(prefix + v);
      }
      names.swap(next);
      i = close + 1;
    } else if (item[i] == ']') {
      return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": ']' without '['");
    } else {
      for (auto& n : names) n += item[i];
      ++i;
    }
  }
  for (const auto& n : names) {
    if (!IsSafeName(n)) {
      return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": bad host name " + Quoted(n));
    }
  }
  return names;
}

}  // namespace

const char* LaunchRoleName(LaunchRole role) {
  static constexpr const char* kNames[] = {"coordinator", "server", "worker"};
  static_assert(std::size(kNames) == static_cast<size_t>(LaunchRole::kWorker) + 1, "a LaunchRole without a name");
  return NameOf(role, kNames);
}

StatusOr<std::vector<HostSpec>> ParseHostfile(const std::string& text) {
  std::vector<HostSpec> hosts;
  std::map<std::string, int> first_line;
  std::stringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::stringstream fields(line);
    std::string name;
    if (!(fields >> name)) continue;
    const std::string where = "hostfile line " + std::to_string(number) + ": ";
    if (!IsSafeName(name)) {
      return InvalidArgumentError(where + "host name " + Quoted(name) + " may hold letters, digits and . - _ : only");
    }
    auto [it, inserted] = first_line.emplace(name, number);
    if (!inserted) {
      return InvalidArgumentError(where + "host " + Quoted(name) + " is already listed on line " +
                                  std::to_string(it->second) + "; give it slots=N instead");
    }
    HostSpec h;
    h.name = name;
    std::string field;
    while (fields >> field) {
      if (field.rfind("slots=", 0) == 0) {
        if (!ParsePositiveInt(field.substr(6), &h.slots)) {
          return InvalidArgumentError(where + Quoted(field) + ": slots must be a whole number >= 1");
        }
      } else if (field.rfind("addr=", 0) == 0) {
        h.address = field.substr(5);
        if (!IsSafeName(h.address)) {
          return InvalidArgumentError(where + Quoted(field) +
                                      ": the address may hold letters, digits and . - _ : only");
        }
      } else {
        return InvalidArgumentError(where + "unknown field " + Quoted(field) + " (expected slots=N or addr=ADDRESS)");
      }
    }
    hosts.push_back(h);
  }
  if (hosts.empty()) return InvalidArgumentError("the hostfile lists no host");
  return hosts;
}

StatusOr<std::vector<std::string>> ExpandSlurmHostlist(const std::string& expr) {
  std::vector<std::string> hosts;
  std::string item;
  int depth = 0;
  auto flush = [&]() -> Status {
    if (item.empty()) return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": empty host name");
    ASSIGN_OR_RETURN(auto names, ExpandName(item, expr));
    hosts.insert(hosts.end(), names.begin(), names.end());
    if (hosts.size() > kMaxHosts) return InvalidArgumentError("Slurm host list " + Quoted(expr) + " is too long");
    item.clear();
    return Status::OK();
  };
  for (char c : expr) {
    if (c == ',' && depth == 0) {
      RETURN_IF_ERROR(flush());
      continue;
    }
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1)
      return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": unbalanced brackets");
    item += c;
  }
  if (depth != 0) return InvalidArgumentError("Slurm host list " + Quoted(expr) + ": '[' without ']'");
  RETURN_IF_ERROR(flush());
  return hosts;
}

StatusOr<int> CountVisibleDevices(const std::string& cuda_visible_devices) {
  if (cuda_visible_devices.empty()) return 0;
  int n = 0;
  std::stringstream ss(cuda_visible_devices + ",");
  std::string entry;
  while (std::getline(ss, entry, ',')) {
    const bool index = !entry.empty() && entry.size() <= 9 && std::all_of(entry.begin(), entry.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    const bool uuid = (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) && entry.size() > 4;
    if (!index && !uuid) {
      return InvalidArgumentError("CUDA_VISIBLE_DEVICES=" + Quoted(cuda_visible_devices) + ": entry " + Quoted(entry) +
                                  " is not a device index or a GPU-/MIG- UUID");
    }
    ++n;
  }
  return n;
}

StatusOr<LaunchPlan> PlanLaunch(const std::vector<HostSpec>& hosts, const LaunchOptions& options) {
  if (hosts.empty()) return InvalidArgumentError("no hosts to launch on");
  if (options.num_servers < 1) {
    return InvalidArgumentError("--num_servers must be >= 1, got " + std::to_string(options.num_servers));
  }
  if (options.num_workers < 1) {
    return InvalidArgumentError("--num_workers must be >= 1, got " + std::to_string(options.num_workers));
  }
  if (options.coordinator_port < 1 || options.coordinator_port > 65535) {
    return InvalidArgumentError("--port must be in 1..65535, got " + std::to_string(options.coordinator_port));
  }
  if (options.gpus_per_host < 0) {
    return InvalidArgumentError("--gpus_per_host must be >= 0, got " + std::to_string(options.gpus_per_host));
  }
  int gpus = options.gpus_per_host;
  std::string where_gpus = "--gpus_per_host=" + std::to_string(options.gpus_per_host);
  if (gpus > 0 && options.cuda_visible_devices) {
    ASSIGN_OR_RETURN(const int listed, CountVisibleDevices(*options.cuda_visible_devices));
    gpus = std::min(gpus, listed);
    where_gpus +=
        ", CUDA_VISIBLE_DEVICES=" + Quoted(*options.cuda_visible_devices) + " lists " + std::to_string(listed);
  }
  int max_slots = 0;
  for (const auto& h : hosts) {
    if (h.slots < 1)
      return InvalidArgumentError("host " + Quoted(h.name) + " has slots=" + std::to_string(h.slots) +
                                  "; slots must be >= 1");
    if (h.address.empty()) return InvalidArgumentError("host " + Quoted(h.name) + " has no address");
    max_slots = std::max(max_slots, h.slots);
  }
  // The round-robin: round r visits, in order, every host with more than r slots.
  std::vector<int> cycle;
  for (int round = 0; round < max_slots; ++round) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (hosts[h].slots > round) cycle.push_back(static_cast<int>(h));
    }
  }
  LaunchPlan plan;
  plan.hosts = hosts;
  plan.coordinator = hosts[0].address + ":" + std::to_string(options.coordinator_port);
  plan.processes.push_back({LaunchRole::kCoordinator, 0, 0});
  for (int s = 0; s < options.num_servers; ++s) {
    plan.processes.push_back({LaunchRole::kServer, s, cycle[s % cycle.size()]});
  }
  std::vector<int> workers_on(hosts.size(), 0);
  for (int w = 0; w < options.num_workers; ++w) {
    const int h = cycle[w % cycle.size()];
    plan.processes.push_back({LaunchRole::kWorker, w, h, options.gpus_per_host > 0 ? workers_on[h] : -1});
    ++workers_on[h];
  }
  if (options.gpus_per_host > 0) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (workers_on[h] <= gpus) continue;
      auto count = [](int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
      return InvalidArgumentError("host " + Quoted(hosts[h].name) + " would run " + count(workers_on[h], "worker") +
                                  " but has " + count(gpus, "GPU") + " (" + where_gpus +
                                  "): each worker trains on a GPU of its own");
    }
  }
  return plan;
}

Status ResolveHostAddresses(std::vector<HostSpec>* hosts) {
  for (auto& h : *hosts) {
    if (!h.address.empty()) continue;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(h.name.c_str(), nullptr, &hints, &res);
    if (rc != 0 || res == nullptr) {
      return NotFoundError("cannot resolve host " + Quoted(h.name) + " to an IPv4 address (" + gai_strerror(rc) +
                           "); give its address with addr=ADDRESS in the hostfile");
    }
    char buf[INET_ADDRSTRLEN] = {0};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(res->ai_addr);
    inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
    freeaddrinfo(res);
    h.address = buf;
  }
  return Status::OK();
}

Status CheckSlurmTask(const LaunchPlan& plan, int ntasks, int procid) {
  int servers = 0, workers = 0;
  for (const auto& p : plan.processes) {
    servers += p.role == LaunchRole::kServer;
    workers += p.role == LaunchRole::kWorker;
  }
  const int n = static_cast<int>(plan.processes.size());
  const std::string layout = std::to_string(n) + " processes (1 coordinator + " + std::to_string(servers) +
                             " servers + " + std::to_string(workers) + " workers)";
  if (ntasks != -1 && ntasks != n) {
    return InvalidArgumentError("the launcher started " + std::to_string(ntasks) + " tasks but the job has " + layout +
                                "; start exactly " + std::to_string(n));
  }
  if (procid < 0 || procid >= n) {
    return InvalidArgumentError("--procid must be in 0.." + std::to_string(n - 1) + " for a job of " + layout +
                                ", got " + std::to_string(procid));
  }
  return Status::OK();
}

int LocalTaskIndex(const LaunchPlan& plan, int index) {
  int before = 0;
  for (int i = 0; i < index; ++i) before += plan.processes[i].host == plan.processes[index].host;
  return before;
}

Status CheckSlurmLocalId(const LaunchPlan& plan, int procid, int localid) {
  const int want = LocalTaskIndex(plan, procid);
  if (localid == want) return Status::OK();
  const PlannedProcess& p = plan.processes[procid];
  return InvalidArgumentError("SLURM_LOCALID is " + std::to_string(localid) + " but the plan makes task " +
                              std::to_string(procid) + " (" + LaunchRoleName(p.role) + " " + std::to_string(p.rank) +
                              ") local task " + std::to_string(want) + " of " + plan.hosts[p.host].name +
                              "; start the tasks with srun --distribution=arbitrary and SLURM_HOSTFILE from "
                              "nereus_launch_plan --format=slurm_hostfile (nereus.sbatch does)");
}

std::string ShellWords(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:=@%+,-", c) != nullptr;
    });
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

std::set<std::string> FlagNamesFromHelpXml(const std::string& xml) {
  std::set<std::string> names;
  static const std::regex name("<name>([^<]*)</name>");
  for (auto it = std::sregex_iterator(xml.begin(), xml.end(), name); it != std::sregex_iterator(); ++it)
    names.insert((*it)[1].str());
  return names;
}

StatusOr<RoutedFlags> RouteFlags(const std::vector<std::string>& flags, const BinaryFlags& known,
                                 bool launcher_sets_gpu) {
  RoutedFlags routed;
  for (const std::string& f : flags) {
    if (f.size() < 3 || f.compare(0, 2, "--") != 0) {
      return InvalidArgumentError("unexpected argument \"" + f + "\"; binary flags are passed as --name=value");
    }
    const size_t eq = f.find('=');
    const std::string name = f.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    for (const char* own : {"role", "coordinator", "rank", "bind_host", "num_servers", "num_workers"}) {
      if (name == own) return InvalidArgumentError("--" + name + " is set by the launcher for each process");
    }
    if (launcher_sets_gpu && name == "gpu") {
      return InvalidArgumentError(
          "--gpu is set by the launcher for each worker with --gpus_per_host (the k-th worker "
          "on a host trains on its GPU k)");
    }
    auto defined = [&](const std::string& n) { return known.server.count(n) > 0 || known.worker.count(n) > 0; };
    std::string bare = name;
    if (eq == std::string::npos && name.compare(0, 2, "no") == 0 && !defined(name)) bare = name.substr(2);
    bool found = false;
    if (known.server.count(bare)) {
      routed.server.push_back(f);
      found = true;
    }
    if (known.worker.count(bare)) {
      routed.worker.push_back(f);
      found = true;
    }
    if (!found) return InvalidArgumentError("--" + name + " is not a flag of nereus_server or nereus_worker");
  }
  return routed;
}

std::vector<std::string> ProcessArgs(const LaunchPlan& plan, const PlannedProcess& p, const std::string& bin_dir,
                                     const RoutedFlags& flags, const std::string& worker_command) {
  int servers = 0, workers = 0;
  for (const auto& q : plan.processes) {
    servers += q.role == LaunchRole::kServer;
    workers += q.role == LaunchRole::kWorker;
  }
  const std::string coordinator = "--coordinator=" + plan.coordinator;
  const std::string rank = "--rank=" + std::to_string(p.rank), bind = "--bind_host=" + plan.AddressOf(p);
  std::vector<std::string> args;
  const std::vector<std::string>* own = &flags.server;
  switch (p.role) {
    case LaunchRole::kCoordinator:
      args = {bin_dir + "/nereus_server", "--role=coordinator", coordinator, "--num_servers=" + std::to_string(servers),
              "--num_workers=" + std::to_string(workers)};
      break;
    case LaunchRole::kServer:
      args = {bin_dir + "/nereus_server", "--role=server", coordinator, rank, bind};
      break;
    case LaunchRole::kWorker:
      if (!worker_command.empty()) {
        int local_rank = 0, local_size = 0;
        for (const auto& q : plan.processes) {
          if (q.role != LaunchRole::kWorker || q.host != p.host) continue;
          if (q.rank < p.rank) ++local_rank;
          ++local_size;
        }
        std::vector<std::string> env = {"/usr/bin/env",
                                        "NEREUS_COORDINATOR=" + plan.coordinator,
                                        "NEREUS_RANK=" + std::to_string(p.rank),
                                        "NEREUS_NUM_WORKERS=" + std::to_string(workers),
                                        "NEREUS_NUM_SERVERS=" + std::to_string(servers),
                                        "NEREUS_BIND_HOST=" + plan.AddressOf(p),
                                        "NEREUS_LOCAL_RANK=" + std::to_string(local_rank),
                                        "NEREUS_LOCAL_SIZE=" + std::to_string(local_size)};
        if (p.gpu >= 0) env.push_back("NEREUS_GPU=" + std::to_string(p.gpu));
        env.insert(env.end(), {"NEREUS_WORKER_FLAGS=" + ShellWords(flags.worker), "bash", "-c", worker_command});
        return env;
      }
      args = {bin_dir + "/nereus_worker", coordinator, rank, bind};
      if (p.gpu >= 0) args.push_back("--gpu=" + std::to_string(p.gpu));
      own = &flags.worker;
      break;
  }
  args.insert(args.end(), own->begin(), own->end());
  return args;
}

std::string ProcessLabel(const LaunchPlan& plan, const PlannedProcess& p) {
  const std::string& host = plan.hosts[p.host].name;
  if (p.role == LaunchRole::kCoordinator) return "coordinator@" + host;
  return std::string(LaunchRoleName(p.role)) + " " + std::to_string(p.rank) + "@" + host;
}

std::string ProcessLogName(const PlannedProcess& p) {
  if (p.role == LaunchRole::kCoordinator) return "coordinator";
  return LaunchRoleName(p.role) + std::to_string(p.rank);
}

StatusOr<RemoteMode> ParseRemoteMode(const std::string& name) {
  if (name == "ssh") return RemoteMode::kSsh;
  if (name == "none") return RemoteMode::kNone;
  if (name == "netns") return RemoteMode::kNetns;
  return InvalidArgumentError("--ssh must be ssh, none or netns, got \"" + name + "\"");
}

std::vector<std::string> RemoteCommand(const RemoteOptions& remote, const std::string& host,
                                       const std::vector<std::string>& args) {
  std::vector<std::string> full;
  if (!remote.env.empty()) {
    full.push_back("env");
    full.insert(full.end(), remote.env.begin(), remote.env.end());
  }
  full.insert(full.end(), args.begin(), args.end());
  const std::string cd = "cd " + ShellWords({remote.workdir});
  switch (remote.mode) {
    case RemoteMode::kNone:
      return {"bash", "-c", cd + " && exec " + ShellWords(full)};
    case RemoteMode::kNetns:
      return {"ip", "netns", "exec", host, "bash", "-c", cd + " && exec " + ShellWords(full)};
    case RemoteMode::kSsh: {
      // POSIX sh, for any login shell: the process runs in the background
      // with its own stdin closed; a watcher reads ssh's stdin (fd 3) and
      // kills it at end-of-file (the launcher closed it, or ssh ended: the
      // launcher died, the link broke).
      const std::string line = cd + " || exit 1; exec 3<&0; " + ShellWords(full) +
                               " </dev/null & p=$!; ( read -r _ <&3; kill $p ) >/dev/null 2>&1 & w=$!; exec 3<&-;"
                               " wait $p; s=$?; kill $w 2>/dev/null; exit $s";
      std::vector<std::string> cmd = {"ssh", "-o", "BatchMode=yes"};
      cmd.insert(cmd.end(), remote.ssh_options.begin(), remote.ssh_options.end());
      cmd.push_back(host);
      cmd.push_back(line);
      return cmd;
    }
  }
  return {};
}

}  // namespace nereus

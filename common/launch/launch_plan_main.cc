// nereus_launch_plan: prints a job's role assignment (common/launch/launch_plan.h)
// for the launch scripts: scripts/launch.sh (hostfile, ssh or local) and
// scripts/slurm/ (Slurm tasks). Exit status 2 with a message naming the
// problem on bad input.
#include <gflags/gflags.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/base/init_binary.h"
#include "common/launch/launch_plan.h"

DEFINE_string(hostfile, "", "Hosts to place the job on: one a line, NAME [slots=N] [addr=ADDRESS].");
DEFINE_string(slurm_nodelist, "",
              "Instead of --hostfile: a Slurm node list (SLURM_JOB_NODELIST, e.g. gpu[01-04]); one slot a node.");
DEFINE_int32(num_servers, 1, "Number of server processes in the job.");
DEFINE_int32(num_workers, 1, "Number of worker processes in the job.");
DEFINE_int32(port, 7000, "Port of the coordinator, on the first host.");
DEFINE_int32(gpus_per_host, 0,
             "One GPU per worker: every host has this many GPUs and the k-th worker placed on a host trains on its "
             "GPU k (--gpu=k); more workers on a host than GPUs is an error naming the host and both counts. "
             "CUDA_VISIBLE_DEVICES, where set in this environment, is the hosts' list of GPUs (--gpu=k is its k-th "
             "device; a host has as many as it lists, at most this many). 0: a job without GPUs (no --gpu, and the "
             "output as without this flag).");
DEFINE_string(format, "table",
              "table: one line a process, \"ROLE RANK HOST ADDRESS COORDINATOR\" (with --gpus_per_host, then GPU: "
              "a worker's --gpu, - for the others), the coordinator first, then "
              "servers and workers by rank (the line's index is the Slurm task id); slurm_hostfile: the host of each "
              "process, one a line, for SLURM_HOSTFILE with srun --distribution=arbitrary; shell: NEREUS_ROLE, "
              "NEREUS_RANK, NEREUS_HOST, NEREUS_BIND_HOST and NEREUS_COORDINATOR of process --procid (and a "
              "worker's NEREUS_GPU with --gpus_per_host), as shell assignments.");
DEFINE_int32(procid, -1, "With --format=shell: the process (Slurm task id, SLURM_PROCID) to print.");
DEFINE_int32(ntasks, -1,
             "With --format=shell: the number of tasks the launcher started (SLURM_NTASKS); it must equal the "
             "plan's number of processes. -1: not checked.");

namespace nereus {
namespace {

int Fail(const std::string& message) {
  std::cerr << "nereus_launch_plan: " << message << "\n";
  return 2;
}

int Run() {
  if (FLAGS_hostfile.empty() == FLAGS_slurm_nodelist.empty())
    return Fail("give exactly one of --hostfile and --slurm_nodelist");
  std::vector<HostSpec> hosts;
  if (!FLAGS_hostfile.empty()) {
    std::ifstream in(FLAGS_hostfile);
    if (!in) return Fail("cannot read --hostfile " + FLAGS_hostfile);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = ParseHostfile(text.str());
    if (!parsed.ok()) return Fail(FLAGS_hostfile + ": " + parsed.status().message());
    hosts = std::move(parsed).value();
  } else {
    auto names = ExpandSlurmHostlist(FLAGS_slurm_nodelist);
    if (!names.ok()) return Fail(names.status().message());
    for (const auto& n : *names) hosts.push_back({n, 1, ""});
  }
  Status st = ResolveHostAddresses(&hosts);
  if (!st.ok()) return Fail(st.message());
  LaunchOptions options{FLAGS_num_servers, FLAGS_num_workers, FLAGS_port, FLAGS_gpus_per_host};
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr)
    options.cuda_visible_devices = visible;
  auto plan = PlanLaunch(hosts, options);
  if (!plan.ok()) return Fail(plan.status().message());

  if (FLAGS_format == "table") {
    for (const auto& p : plan->processes) {
      std::cout << LaunchRoleName(p.role) << " " << p.rank << " " << plan->hosts[p.host].name << " "
                << plan->AddressOf(p) << " " << plan->coordinator;
      if (FLAGS_gpus_per_host > 0) std::cout << " " << (p.gpu >= 0 ? std::to_string(p.gpu) : "-");
      std::cout << "\n";
    }
  } else if (FLAGS_format == "slurm_hostfile") {
    for (const auto& p : plan->processes) std::cout << plan->hosts[p.host].name << "\n";
  } else if (FLAGS_format == "shell") {
    Status task = CheckSlurmTask(*plan, FLAGS_ntasks, FLAGS_procid);
    if (!task.ok()) return Fail(task.message());
    const auto& p = plan->processes[FLAGS_procid];
    std::cout << "NEREUS_ROLE=" << LaunchRoleName(p.role) << "\nNEREUS_RANK=" << p.rank
              << "\nNEREUS_HOST=" << plan->hosts[p.host].name << "\nNEREUS_BIND_HOST=" << plan->AddressOf(p)
              << "\nNEREUS_COORDINATOR=" << plan->coordinator << "\n";
    if (p.gpu >= 0) std::cout << "NEREUS_GPU=" << p.gpu << "\n";
  } else {
    return Fail("--format must be table, slurm_hostfile or shell, got \"" + FLAGS_format + "\"");
  }
  return 0;
}

}  // namespace
}  // namespace nereus

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Prints where each process of a Nereus job runs.\n"
      "  nereus_launch_plan --hostfile=FILE --num_servers=S --num_workers=W [--port=P] [--format=table]\n"
      "  nereus_launch_plan --slurm_nodelist=\"$SLURM_JOB_NODELIST\" ... --format=shell --procid=\"$SLURM_PROCID\" "
      "--ntasks=\"$SLURM_NTASKS\"",
      &argc, &argv);
  if (argc > 1) return nereus::Fail(std::string("unexpected argument \"") + argv[1] + "\"");
  return nereus::Run();
}

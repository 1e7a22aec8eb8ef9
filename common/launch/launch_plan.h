// Role assignment for launching a job on many hosts: which host runs the
// coordinator, each server and each worker, and which address each listens
// on. One plan serves every launcher, so local, ssh and Slurm jobs are laid
// out the same way (scripts/launch.sh and scripts/slurm/nereus_task.sh read it
// through the nereus_launch_plan tool).
//
// The layout (Poseidon's): the coordinator on the first host; server i and
// worker i together in the i-th slot of a round-robin over the hosts. A host's
// `slots` is how many server+worker pairs it takes in one round (one per GPU,
// say); a round visits the hosts in order, each taking one slot while it has
// slots left. With more pairs than slots the rounds start over, so a host takes
// several pairs per slot (e.g. every process of a job on one host).
//
// With GPUs (LaunchOptions::gpus_per_host), one GPU per worker: the k-th
// worker placed on a host (k = 0, 1, ... in rank order) trains on that host's
// GPU k (--gpu=k).
//
// Then the command line of each process (LaunchCommands): the binary flags
// routed to the binaries that define them, and the shell line that starts the
// process on its host (here, over ssh or in a network namespace). nereus_launch
// (common/launch/launch_main.cc, behind scripts/launch.sh) runs them;
// --dry_run prints them.
//
// Pure functions of their arguments; no I/O but ResolveHostAddresses.
#ifndef NEREUS_COMMON_LAUNCH_LAUNCH_PLAN_H_
#define NEREUS_COMMON_LAUNCH_LAUNCH_PLAN_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {

struct HostSpec {
  std::string name;     // What the launcher reaches the host by (ssh, netns, Slurm node name).
  int slots = 1;        // Server+worker pairs per round of the round-robin (>= 1).
  std::string address;  // Where its processes listen; empty: `name`, resolved by the launcher.
};

// Parses a hostfile: one host a line, `NAME [slots=N] [addr=ADDRESS]`;
// `#` starts a comment; blank lines are skipped. Errors name the line. A host
// listed twice is an error (give it slots=N instead). Names and addresses may
// hold letters, digits and . - _ : only (they reach shell command lines).
StatusOr<std::vector<HostSpec>> ParseHostfile(const std::string& text);

// Expands a Slurm host list expression as in SLURM_JOB_NODELIST:
// "gpu[01-03,7],login" -> gpu01 gpu02 gpu03 gpu7 login. Ranges keep their
// zero padding; several bracket groups in one name expand as a product, the
// last varying fastest, as Slurm does.
StatusOr<std::vector<std::string>> ExpandSlurmHostlist(const std::string& expr);

enum class LaunchRole { kCoordinator, kServer, kWorker };
const char* LaunchRoleName(LaunchRole role);  // "coordinator", "server", "worker"

struct PlannedProcess {
  LaunchRole role;
  int rank;  // Within its role; 0 for the coordinator.
  int host;  // Index into LaunchPlan::hosts.
  // A worker's CUDA device (its --gpu) in a job with GPUs: how many workers
  // the plan puts on its host before it. -1: none (no --gpu from the launcher).
  int gpu = -1;
};

struct LaunchPlan {
  std::vector<HostSpec> hosts;
  // The coordinator first, then servers 0..S-1, then workers 0..W-1: the
  // index of a process here is its Slurm task id (SLURM_PROCID).
  std::vector<PlannedProcess> processes;
  std::string coordinator;  // host:port of the coordinator, for every --coordinator.

  const std::string& AddressOf(const PlannedProcess& p) const { return hosts[p.host].address; }
};

struct LaunchOptions {
  int num_servers = 1;
  int num_workers = 1;
  int coordinator_port = 7000;
  // 0: a job without GPUs; the workers get no --gpu from the launcher. N >= 1:
  // every host has N GPUs, one a worker: the k-th worker on a host gets
  // --gpu=k.
  int gpus_per_host = 0;
  // The job's CUDA_VISIBLE_DEVICES, where it is set (nullopt: not set). It is
  // left as it is for every process: CUDA numbers the devices it lists 0, 1,
  // ... in its order, so --gpu=k is the k-th listed device, and a host has as
  // many GPUs as it lists, at most gpus_per_host. Unused without GPUs.
  std::optional<std::string> cuda_visible_devices = std::nullopt;
};

// The number of devices a CUDA_VISIBLE_DEVICES value lists: its
// comma-separated entries, each a device index (digits) or a UUID (GPU-...,
// MIG-...); "" lists none. Any other entry is an error naming it (CUDA would
// hide it and every device after it).
StatusOr<int> CountVisibleDevices(const std::string& cuda_visible_devices);

// The plan for `hosts` (every address must be set: see ResolveHostAddresses).
// Errors: no hosts, a count below 1, a port outside 1..65535, slots below 1,
// an empty address, gpus_per_host below 0, a bad cuda_visible_devices, a host
// with more workers than GPUs (naming the host and both counts).
StatusOr<LaunchPlan> PlanLaunch(const std::vector<HostSpec>& hosts, const LaunchOptions& options);

// Fills each empty `address` with the host name's first IPv4 address
// (getaddrinfo; an IP literal stays as it is). A name that does not resolve is
// an error naming it. ZeroMQ binds to addresses, not to DNS names.
Status ResolveHostAddresses(std::vector<HostSpec>* hosts);

// A Slurm task's place: OK if the step started exactly the plan's processes
// (`ntasks`; -1: not checked) and `procid` indexes one of them; otherwise the
// error says how many to start.
Status CheckSlurmTask(const LaunchPlan& plan, int ntasks, int procid);

// Process `index`'s place among the processes the plan puts on its host,
// from 0 in plan order: what srun --distribution=arbitrary, given the plan's
// SLURM_HOSTFILE, makes the task's SLURM_LOCALID.
int LocalTaskIndex(const LaunchPlan& plan, int index);

// A Slurm task's SLURM_LOCALID against the plan. The coordinator and the
// servers precede the workers in task order, so a worker's local id less the
// coordinator and servers on its node is its GPU; this holds exactly when
// `localid` is LocalTaskIndex(plan, procid), and otherwise the error names
// both (the tasks were not started as the plan lays them out).
Status CheckSlurmLocalId(const LaunchPlan& plan, int procid, int localid);

// --- Command lines -------------------------------------------------------

// The words as one POSIX shell line, quoted only where needed: a word of
// letters, digits and _ . / : = @ % + , - stays as it is; any other is put in
// single quotes, a ' inside becoming '\''.
std::string ShellWords(const std::vector<std::string>& words);

// The flag names in gflags' --helpxml output (its <name> elements).
std::set<std::string> FlagNamesFromHelpXml(const std::string& xml);

// The flags each binary defines.
struct BinaryFlags {
  std::set<std::string> server;  // nereus_server (coordinator and servers)
  std::set<std::string> worker;  // nereus_worker
};

// Binary flags split between the binaries that define them; a flag both
// define goes to both.
struct RoutedFlags {
  std::vector<std::string> server, worker;
};

// Errors: a word that is not --name[=value]; a flag the launcher sets per
// process (--role, --coordinator, --rank, --bind_host, --num_servers,
// --num_workers, and --gpu when `launcher_sets_gpu`: a job with GPUs); a
// flag neither binary defines. --noX without a value is boolean flag X's
// negation where X is defined and noX is not.
StatusOr<RoutedFlags> RouteFlags(const std::vector<std::string>& flags, const BinaryFlags& known,
                                 bool launcher_sets_gpu = false);

// The command line of process `p`: nereus_server or nereus_worker in
// `bin_dir` with its role, rank, coordinator and listening address (and a
// worker's --gpu where it has one), then its routed flags. With a `worker_command` (a shell command line: a Python
// worker, say) a worker runs that instead, through /usr/bin/env and bash -c,
// with its place in the environment:
//   NEREUS_COORDINATOR  the coordinator's host:port
//   NEREUS_RANK         the worker's rank
//   NEREUS_NUM_WORKERS, NEREUS_NUM_SERVERS  the job's size
//   NEREUS_BIND_HOST    the address it listens on (its host's)
//   NEREUS_LOCAL_RANK, NEREUS_LOCAL_SIZE    its index among the workers of its
//                       host and their number (to pick a GPU)
//   NEREUS_GPU          its GPU, where the launcher assigns one
//   NEREUS_WORKER_FLAGS the flags routed to nereus_worker, as one shell line
//                       (nereus.torch.init reads the client's among them)
std::vector<std::string> ProcessArgs(const LaunchPlan& plan, const PlannedProcess& p, const std::string& bin_dir,
                                     const RoutedFlags& flags, const std::string& worker_command = "");

// "coordinator@HOST", "server 1@HOST", "worker 0@HOST": how output lines and
// messages name a process.
std::string ProcessLabel(const LaunchPlan& plan, const PlannedProcess& p);
// "coordinator", "server1", "worker0": its log file's name, without ".log".
std::string ProcessLogName(const PlannedProcess& p);

// How a process reaches its host.
enum class RemoteMode {
  kNone,   // Here: bash -c "cd DIR && exec ARGS".
  kSsh,    // ssh -o BatchMode=yes [ssh options] HOST "...": the remote shell
           // stops the process when ssh's stdin reads end-of-file.
  kNetns,  // ip netns exec HOST bash -c "cd DIR && exec ARGS".
};
// "ssh", "none", "netns" -> the mode; InvalidArgument otherwise.
StatusOr<RemoteMode> ParseRemoteMode(const std::string& name);

struct RemoteOptions {
  RemoteMode mode = RemoteMode::kSsh;
  std::vector<std::string> ssh_options;  // Extra ssh arguments, e.g. {"-p", "2222"}.
  std::string workdir;                   // Working directory of every process.
  std::vector<std::string> env;          // NAME=VALUE for every process (through env).
};

// The command that starts `args` on `host` as `remote` says (what --dry_run
// prints, after the process's label).
std::vector<std::string> RemoteCommand(const RemoteOptions& remote, const std::string& host,
                                       const std::vector<std::string>& args);

}  // namespace nereus

#endif  // NEREUS_COMMON_LAUNCH_LAUNCH_PLAN_H_

// Role assignment (common/launch/launch_plan.h), worked by hand: hostfiles with and
// without slots, Slurm node lists, each worker's GPU, and the errors bad input
// gets.
#include "common/launch/launch_plan.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace nereus {
namespace {

using Names = std::vector<std::string>;

// "role rank host" of every process, in plan order.
std::vector<std::string> Layout(const LaunchPlan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.processes) {
    out.push_back(std::string(LaunchRoleName(p.role)) + " " + std::to_string(p.rank) + " " + plan.hosts[p.host].name);
  }
  return out;
}

std::string ErrorOf(const std::string& hostfile) {
  auto r = ParseHostfile(hostfile);
  EXPECT_FALSE(r.ok()) << hostfile;
  return r.ok() ? "" : r.status().message();
}

TEST(ParseHostfile, NamesSlotsAddressesAndComments) {
  auto hosts = ParseHostfile(
      "# our cluster\n"
      "hostA slots=2\n"
      "\n"
      "  hostB      # one slot\n"
      "ns-c addr=10.0.0.3 slots=3\n");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].name, "hostA");
  EXPECT_EQ((*hosts)[0].slots, 2);
  EXPECT_EQ((*hosts)[0].address, "");
  EXPECT_EQ((*hosts)[1].name, "hostB");
  EXPECT_EQ((*hosts)[1].slots, 1);
  EXPECT_EQ((*hosts)[2].name, "ns-c");
  EXPECT_EQ((*hosts)[2].slots, 3);
  EXPECT_EQ((*hosts)[2].address, "10.0.0.3");
}

TEST(ParseHostfile, BadInputNamesTheLineAndTheProblem) {
  EXPECT_EQ(ErrorOf("a\nb\na slots=2\n"),
            "hostfile line 3: host \"a\" is already listed on line 1; give it slots=N instead");
  EXPECT_EQ(ErrorOf("a slots=0\n"), "hostfile line 1: \"slots=0\": slots must be a whole number >= 1");
  EXPECT_EQ(ErrorOf("a slots=two\n"), "hostfile line 1: \"slots=two\": slots must be a whole number >= 1");
  EXPECT_EQ(ErrorOf("a\n\nb cpus=4\n"), "hostfile line 3: unknown field \"cpus=4\" (expected slots=N or addr=ADDRESS)");
  EXPECT_EQ(ErrorOf("a;rm\n"), "hostfile line 1: host name \"a;rm\" may hold letters, digits and . - _ : only");
  EXPECT_EQ(ErrorOf("a addr=$(x)\n"),
            "hostfile line 1: \"addr=$(x)\": the address may hold letters, digits and . - _ : only");
  EXPECT_EQ(ErrorOf("# nothing\n\n"), "the hostfile lists no host");
}

// Three hosts with 2, 1 and 3 slots: the rounds visit A B C, then A C, then C,
// so the cycle of slots is A B C A C C. Servers 0-4 and workers 0-6 take the
// cycle in order, wrapping after 6.
TEST(PlanLaunch, RoundRobinOverSlots) {
  std::vector<HostSpec> hosts = {{"A", 2, "10.0.0.1"}, {"B", 1, "10.0.0.2"}, {"C", 3, "10.0.0.3"}};
  auto plan = PlanLaunch(hosts, {5, 7, 7100});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->coordinator, "10.0.0.1:7100");
  EXPECT_EQ(Layout(*plan),
            (Names{"coordinator 0 A", "server 0 A", "server 1 B", "server 2 C", "server 3 A", "server 4 C",
                   "worker 0 A", "worker 1 B", "worker 2 C", "worker 3 A", "worker 4 C", "worker 5 C", "worker 6 A"}));
  EXPECT_EQ(plan->AddressOf(plan->processes[12]), "10.0.0.1");
  EXPECT_EQ(plan->AddressOf(plan->processes[8]), "10.0.0.3");
}

// Poseidon's layout: one server and one worker a host.
TEST(PlanLaunch, OneServerAndOneWorkerPerHost) {
  std::vector<HostSpec> hosts = {{"h0", 1, "192.168.1.10"}, {"h1", 1, "192.168.1.11"}};
  auto plan = PlanLaunch(hosts, {2, 2, 7000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Layout(*plan), (Names{"coordinator 0 h0", "server 0 h0", "server 1 h1", "worker 0 h0", "worker 1 h1"}));
  EXPECT_EQ(plan->coordinator, "192.168.1.10:7000");
}

// A local job (scripts/run_local.sh): every process on the one host.
TEST(PlanLaunch, EverythingOnOneHost) {
  auto plan = PlanLaunch({{"127.0.0.1", 1, "127.0.0.1"}}, {2, 3, 40000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Layout(*plan), (Names{"coordinator 0 127.0.0.1", "server 0 127.0.0.1", "server 1 127.0.0.1",
                                  "worker 0 127.0.0.1", "worker 1 127.0.0.1", "worker 2 127.0.0.1"}));
  EXPECT_EQ(plan->coordinator, "127.0.0.1:40000");
}

// More servers than workers: the pairs still start at the first slot, so
// server i and worker i share a host for every i both have.
TEST(PlanLaunch, UnequalCountsStayPaired) {
  std::vector<HostSpec> hosts = {{"a", 1, "1.1.1.1"}, {"b", 1, "1.1.1.2"}, {"c", 1, "1.1.1.3"}};
  auto plan = PlanLaunch(hosts, {3, 1, 7000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Layout(*plan), (Names{"coordinator 0 a", "server 0 a", "server 1 b", "server 2 c", "worker 0 a"}));
}

TEST(PlanLaunch, BadOptionsAreNamed) {
  std::vector<HostSpec> hosts = {{"a", 1, "1.1.1.1"}};
  EXPECT_EQ(PlanLaunch(hosts, {0, 1, 7000}).status().message(), "--num_servers must be >= 1, got 0");
  EXPECT_EQ(PlanLaunch(hosts, {1, -2, 7000}).status().message(), "--num_workers must be >= 1, got -2");
  EXPECT_EQ(PlanLaunch(hosts, {1, 1, 70000}).status().message(), "--port must be in 1..65535, got 70000");
  EXPECT_EQ(PlanLaunch({}, {1, 1, 7000}).status().message(), "no hosts to launch on");
  EXPECT_EQ(PlanLaunch({{"a", 1, ""}}, {1, 1, 7000}).status().message(), "host \"a\" has no address");
  EXPECT_EQ(PlanLaunch({{"a", 0, "1.1.1.1"}}, {1, 1, 7000}).status().message(),
            "host \"a\" has slots=0; slots must be >= 1");
}

// "role rank host gpu" of every process, in plan order (gpu -1: none).
std::vector<std::string> GpuLayout(const LaunchPlan& plan) {
  std::vector<std::string> out;
  for (const auto& p : plan.processes) {
    out.push_back(std::string(LaunchRoleName(p.role)) + " " + std::to_string(p.rank) + " " + plan.hosts[p.host].name +
                  " " + std::to_string(p.gpu));
  }
  return out;
}

LaunchOptions WithGpus(int servers, int workers, int gpus_per_host, std::optional<std::string> visible = std::nullopt) {
  LaunchOptions o{servers, workers, 7000, gpus_per_host};
  o.cuda_visible_devices = std::move(visible);
  return o;
}

// Uneven slots, A 2, B 1, C 3: the cycle A B C A C C, then A again. With 3
// GPUs a host, each host's workers take its GPUs 0, 1, 2 in rank order; the
// coordinator and the servers get none.
TEST(PlanGpus, KthWorkerOnAHostGetsItsGpuK) {
  std::vector<HostSpec> hosts = {{"A", 2, "10.0.0.1"}, {"B", 1, "10.0.0.2"}, {"C", 3, "10.0.0.3"}};
  auto plan = PlanLaunch(hosts, WithGpus(2, 7, 3));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(GpuLayout(*plan),
            (Names{"coordinator 0 A -1", "server 0 A -1", "server 1 B -1", "worker 0 A 0", "worker 1 B 0",
                   "worker 2 C 0", "worker 3 A 1", "worker 4 C 1", "worker 5 C 2", "worker 6 A 2"}));
}

// Poseidon's layout wrapped: 2 hosts of 1 slot, 4 workers, 2 GPUs a host.
// Everything on one host: 4 workers on GPUs 0-3.
TEST(PlanGpus, WrappedRoundsAndOneHost) {
  auto two = PlanLaunch({{"h0", 1, "1.1.1.1"}, {"h1", 1, "1.1.1.2"}}, WithGpus(1, 4, 2));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(GpuLayout(*two), (Names{"coordinator 0 h0 -1", "server 0 h0 -1", "worker 0 h0 0", "worker 1 h1 0",
                                    "worker 2 h0 1", "worker 3 h1 1"}));
  auto one = PlanLaunch({{"gpu01", 4, "1.1.1.1"}}, WithGpus(4, 4, 8));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(GpuLayout(*one), (Names{"coordinator 0 gpu01 -1", "server 0 gpu01 -1", "server 1 gpu01 -1",
                                    "server 2 gpu01 -1", "server 3 gpu01 -1", "worker 0 gpu01 0", "worker 1 gpu01 1",
                                    "worker 2 gpu01 2", "worker 3 gpu01 3"}));
}

// No GPUs (0, the default): no worker gets one, whatever CUDA_VISIBLE_DEVICES
// says, and the plan is the one without the option.
TEST(PlanGpus, WithoutGpusNothingChanges) {
  std::vector<HostSpec> hosts = {{"A", 2, "10.0.0.1"}, {"B", 1, "10.0.0.2"}};
  auto plain = PlanLaunch(hosts, {1, 5, 7000});
  auto zero = PlanLaunch(hosts, WithGpus(1, 5, 0, "not a list"));
  ASSERT_TRUE(plain.ok() && zero.ok());
  EXPECT_EQ(GpuLayout(*zero), (Names{"coordinator 0 A -1", "server 0 A -1", "worker 0 A -1", "worker 1 B -1",
                                     "worker 2 A -1", "worker 3 A -1", "worker 4 B -1"}));
  EXPECT_EQ(GpuLayout(*plain), GpuLayout(*zero));
}

TEST(PlanGpus, MoreWorkersThanGpusNamesTheHostAndBothCounts) {
  std::vector<HostSpec> hosts = {{"A", 2, "10.0.0.1"}, {"B", 1, "10.0.0.2"}, {"C", 3, "10.0.0.3"}};
  // A and C take 3 workers each; A, listed first, is named.
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 7, 2)).status().message(),
            "host \"A\" would run 3 workers but has 2 GPUs (--gpus_per_host=2): each worker trains on a GPU of its "
            "own");
  // 6 workers: A 2, B 1, C 3.
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 6, 2)).status().message(),
            "host \"C\" would run 3 workers but has 2 GPUs (--gpus_per_host=2): each worker trains on a GPU of its "
            "own");
  EXPECT_EQ(PlanLaunch({{"solo", 1, "1.1.1.1"}}, WithGpus(1, 2, 1)).status().message(),
            "host \"solo\" would run 2 workers but has 1 GPU (--gpus_per_host=1): each worker trains on a GPU of its "
            "own");
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 1, -1)).status().message(), "--gpus_per_host must be >= 0, got -1");
}

// CUDA_VISIBLE_DEVICES is the host's list: --gpu=k is its k-th device (CUDA
// numbers what it lists from 0), and a host has as many GPUs as it lists, at
// most gpus_per_host.
TEST(PlanGpus, CudaVisibleDevicesListsTheGpus) {
  std::vector<HostSpec> hosts = {{"A", 2, "10.0.0.1"}, {"B", 2, "10.0.0.2"}};
  auto listed = PlanLaunch(hosts, WithGpus(1, 4, 4, "6,2"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(GpuLayout(*listed), (Names{"coordinator 0 A -1", "server 0 A -1", "worker 0 A 0", "worker 1 B 0",
                                       "worker 2 A 1", "worker 3 B 1"}));
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 6, 4, "6,2")).status().message(),
            "host \"A\" would run 3 workers but has 2 GPUs (--gpus_per_host=4, CUDA_VISIBLE_DEVICES=\"6,2\" lists 2): "
            "each worker trains on a GPU of its own");
  // A longer list than gpus_per_host: gpus_per_host bounds it.
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 6, 2, "0,1,2,3")).status().message(),
            "host \"A\" would run 3 workers but has 2 GPUs (--gpus_per_host=2, CUDA_VISIBLE_DEVICES=\"0,1,2,3\" lists "
            "4): each worker trains on a GPU of its own");
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 1, 2, "")).status().message(),
            "host \"A\" would run 1 worker but has 0 GPUs (--gpus_per_host=2, CUDA_VISIBLE_DEVICES=\"\" lists 0): "
            "each worker trains on a GPU of its own");
  EXPECT_EQ(PlanLaunch(hosts, WithGpus(1, 2, 2, "0,,1")).status().message(),
            "CUDA_VISIBLE_DEVICES=\"0,,1\": entry \"\" is not a device index or a GPU-/MIG- UUID");
}

TEST(CountVisibleDevices, IndicesAndUuids) {
  EXPECT_EQ(*CountVisibleDevices(""), 0);
  EXPECT_EQ(*CountVisibleDevices("3"), 1);
  EXPECT_EQ(*CountVisibleDevices("0,1,2,3,4,5,6,7"), 8);
  EXPECT_EQ(*CountVisibleDevices("GPU-8f1c2a3b-0000-1111-2222-333344445555,MIG-abc"), 2);
  EXPECT_EQ(CountVisibleDevices("-1").status().message(),
            "CUDA_VISIBLE_DEVICES=\"-1\": entry \"-1\" is not a device index or a GPU-/MIG- UUID");
  EXPECT_EQ(CountVisibleDevices("0,1,").status().message(),
            "CUDA_VISIBLE_DEVICES=\"0,1,\": entry \"\" is not a device index or a GPU-/MIG- UUID");
  EXPECT_EQ(CountVisibleDevices("0, 1").status().message(),
            "CUDA_VISIBLE_DEVICES=\"0, 1\": entry \" 1\" is not a device index or a GPU-/MIG- UUID");
  EXPECT_EQ(CountVisibleDevices("GPU-").status().message(),
            "CUDA_VISIBLE_DEVICES=\"GPU-\": entry \"GPU-\" is not a device index or a GPU-/MIG- UUID");
}

// Under Slurm (gpu[01-02], 2 servers, 4 workers, 2 GPUs a node) the tasks
// on a node take local ids in task order; a worker's local id less the
// coordinator and servers on its node is its GPU.
TEST(SlurmLayout, LocalIdsAndGpus) {
  std::vector<HostSpec> hosts = {{"gpu01", 1, "10.1.0.1"}, {"gpu02", 1, "10.1.0.2"}};
  auto plan = PlanLaunch(hosts, WithGpus(2, 4, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(GpuLayout(*plan), (Names{"coordinator 0 gpu01 -1", "server 0 gpu01 -1", "server 1 gpu02 -1",
                                     "worker 0 gpu01 0", "worker 1 gpu02 0", "worker 2 gpu01 1", "worker 3 gpu02 1"}));
  std::vector<int> local;
  for (int i = 0; i < 7; ++i) local.push_back(LocalTaskIndex(*plan, i));
  EXPECT_EQ(local, (std::vector<int>{0, 1, 0, 2, 1, 3, 2}));
  for (int i = 0; i < 7; ++i) EXPECT_TRUE(CheckSlurmLocalId(*plan, i, local[i]).ok()) << i;
  EXPECT_EQ(CheckSlurmLocalId(*plan, 5, 2).message(),
            "SLURM_LOCALID is 2 but the plan makes task 5 (worker 2) local task 3 of gpu01; start the tasks with srun "
            "--distribution=arbitrary and SLURM_HOSTFILE from nereus_launch_plan --format=slurm_hostfile "
            "(nereus.sbatch does)");
}

TEST(ExpandSlurmHostlist, RangesPaddingAndProducts) {
  EXPECT_EQ(*ExpandSlurmHostlist("vm"), (Names{"vm"}));
  EXPECT_EQ(*ExpandSlurmHostlist("gpu[01-03,7],login"), (Names{"gpu01", "gpu02", "gpu03", "gpu7", "login"}));
  EXPECT_EQ(*ExpandSlurmHostlist("node[8-10]"), (Names{"node8", "node9", "node10"}));
  EXPECT_EQ(*ExpandSlurmHostlist("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(*ExpandSlurmHostlist("r[1-2]n[1-2],x"), (Names{"r1n1", "r1n2", "r2n1", "r2n2", "x"}));
}

TEST(ExpandSlurmHostlist, BadListsAreNamed) {
  EXPECT_EQ(ExpandSlurmHostlist("gpu[01-03").status().message(), "Slurm host list \"gpu[01-03\": '[' without ']'");
  EXPECT_EQ(ExpandSlurmHostlist("gpu[3-1]").status().message(),
            "Slurm host list \"gpu[3-1]\": range \"3-1\" runs backwards");
  EXPECT_EQ(ExpandSlurmHostlist("gpu[a]").status().message(),
            "Slurm host list \"gpu[a]\": \"a\" in brackets is not a number or a range N-M");
  EXPECT_EQ(ExpandSlurmHostlist("a,,b").status().message(), "Slurm host list \"a,,b\": empty host name");
  EXPECT_EQ(ExpandSlurmHostlist("a]").status().message(), "Slurm host list \"a]\": unbalanced brackets");
  EXPECT_EQ(ExpandSlurmHostlist("").status().message(), "Slurm host list \"\": empty host name");
}

// A Slurm job on gpu[01-02] with 2 servers and 2 workers: 5 tasks. The task
// id indexes the plan: task 0 the coordinator on gpu01, tasks 1-2 the servers,
// 3-4 the workers, alternating nodes.
TEST(SlurmLayout, TaskIdsIndexThePlan) {
  auto names = ExpandSlurmHostlist("gpu[01-02]");
  ASSERT_TRUE(names.ok());
  std::vector<HostSpec> hosts;
  for (size_t i = 0; i < names->size(); ++i) hosts.push_back({(*names)[i], 1, "10.1.0." + std::to_string(i + 1)});
  auto plan = PlanLaunch(hosts, {2, 2, 7000});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Layout(*plan),
            (Names{"coordinator 0 gpu01", "server 0 gpu01", "server 1 gpu02", "worker 0 gpu01", "worker 1 gpu02"}));
  EXPECT_EQ(plan->coordinator, "10.1.0.1:7000");
  EXPECT_EQ(plan->AddressOf(plan->processes[4]), "10.1.0.2");
}

TEST(ResolveHostAddresses, LiteralsStayNamesResolveUnknownFails) {
  std::vector<HostSpec> hosts = {{"localhost", 1, ""}, {"127.0.0.5", 1, ""}, {"h", 1, "10.9.9.9"}};
  ASSERT_TRUE(ResolveHostAddresses(&hosts).ok());
  EXPECT_EQ(hosts[0].address, "127.0.0.1");
  EXPECT_EQ(hosts[1].address, "127.0.0.5");
  EXPECT_EQ(hosts[2].address, "10.9.9.9");
  std::vector<HostSpec> bad = {{"no-such-host.invalid", 1, ""}};
  Status st = ResolveHostAddresses(&bad);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("cannot resolve host \"no-such-host.invalid\""), std::string::npos) << st.message();
}

TEST(SlurmLayout, TaskCountsAndIdsAreChecked) {
  std::vector<HostSpec> hosts = {{"gpu01", 1, "10.1.0.1"}};
  auto plan = PlanLaunch(hosts, {2, 2, 7000});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(CheckSlurmTask(*plan, 5, 4).ok());
  EXPECT_TRUE(CheckSlurmTask(*plan, -1, 0).ok());
  EXPECT_EQ(CheckSlurmTask(*plan, 6, 3).message(),
            "the launcher started 6 tasks but the job has 5 processes (1 coordinator + 2 servers + 2 workers); start "
            "exactly 5");
  EXPECT_EQ(CheckSlurmTask(*plan, 5, 5).message(),
            "--procid must be in 0..4 for a job of 5 processes (1 coordinator + 2 servers + 2 workers), got 5");
}

// --- Command lines ----------------------------------------------------------

TEST(ShellWords, QuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(ShellWords({"a/b.c", "--x=1,2:3@h%+-_"}), "a/b.c --x=1,2:3@h%+-_");
  EXPECT_EQ(ShellWords({"/w d", "it's", "", "$HOME", "a;b"}), R"('/w d' 'it'\''s' '' '$HOME' 'a;b')");
}

TEST(FlagNamesFromHelpXml, ReadsTheNameElements) {
  EXPECT_EQ(FlagNamesFromHelpXml("<AllFlags><flag><file>x.cc</file><name>rank</name><meaning>..</meaning></flag>"
                                 "<flag><name>resume</name></flag></AllFlags>"),
            (std::set<std::string>{"rank", "resume"}));
  EXPECT_TRUE(FlagNamesFromHelpXml("not xml").empty());
}

TEST(RouteFlags, EachFlagGoesToTheBinariesThatDefineIt) {
  BinaryFlags known;
  known.server = {"consistency", "startup_timeout_s", "resume", "checkpoint_dir"};
  known.worker = {"iterations", "startup_timeout_s", "resume", "nodisplay_special"};
  auto routed = RouteFlags(
      {"--iterations=5", "--consistency=ssp", "--startup_timeout_s=30", "--noresume", "--nodisplay_special"}, known);
  ASSERT_TRUE(routed.ok()) << routed.status();
  EXPECT_EQ(routed->server, (Names{"--consistency=ssp", "--startup_timeout_s=30", "--noresume"}));
  EXPECT_EQ(routed->worker, (Names{"--iterations=5", "--startup_timeout_s=30", "--noresume", "--nodisplay_special"}));
  auto error = [&](const Names& flags) {
    auto r = RouteFlags(flags, known);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : r.status().message();
  };
  EXPECT_EQ(error({"--iteratons=5"}), "--iteratons is not a flag of nereus_server or nereus_worker");
  EXPECT_EQ(error({"--noresume=1"}), "--noresume is not a flag of nereus_server or nereus_worker");
  EXPECT_EQ(error({"--rank=1"}), "--rank is set by the launcher for each process");
  EXPECT_EQ(error({"--bind_host"}), "--bind_host is set by the launcher for each process");
  EXPECT_EQ(error({"5"}), "unexpected argument \"5\"; binary flags are passed as --name=value");
  EXPECT_EQ(error({"--"}), "unexpected argument \"--\"; binary flags are passed as --name=value");
}

// --gpu is a worker flag, passed as given in a job without GPUs and set by
// the launcher in one with them.
TEST(RouteFlags, GpuIsTheLaunchersWithGpusPerHost) {
  BinaryFlags known;
  known.server = {"consistency"};
  known.worker = {"gpu", "iterations"};
  auto plain = RouteFlags({"--gpu=1", "--iterations=5"}, known);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->worker, (Names{"--gpu=1", "--iterations=5"}));
  EXPECT_TRUE(plain->server.empty());
  EXPECT_EQ(RouteFlags({"--iterations=5", "--gpu=1"}, known, true).status().message(),
            "--gpu is set by the launcher for each worker with --gpus_per_host (the k-th worker on a host trains on "
            "its GPU k)");
  auto with_gpus = RouteFlags({"--iterations=5"}, known, true);
  ASSERT_TRUE(with_gpus.ok());
  EXPECT_EQ(with_gpus->worker, (Names{"--iterations=5"}));
}

// The hosts the process-command tests plan on: hostA (1 slot, 10.0.0.1)
// and hostB (2 slots, 10.0.0.2).
std::vector<HostSpec> TwoHosts() { return {{"hostA", 1, "10.0.0.1"}, {"hostB", 2, "10.0.0.2"}}; }

// Routed flags: --consistency=ssp for the servers, `worker` for the workers.
RoutedFlags SspServersAnd(Names worker) {
  RoutedFlags flags;
  flags.server = {"--consistency=ssp"};
  flags.worker = std::move(worker);
  return flags;
}

TEST(ProcessCommands, ArgsLabelsLogsAndEachRemoteMode) {
  auto plan = PlanLaunch(TwoHosts(), {1, 2, 7100});
  ASSERT_TRUE(plan.ok());
  const RoutedFlags flags = SspServersAnd({"--iterations=5"});
  const PlannedProcess& coordinator = plan->processes[0];
  const PlannedProcess& worker1 = plan->processes[3];
  EXPECT_EQ(ProcessArgs(*plan, coordinator, "/b", flags),
            (Names{"/b/nereus_server", "--role=coordinator", "--coordinator=10.0.0.1:7100", "--num_servers=1",
                   "--num_workers=2", "--consistency=ssp"}));
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[1], "/b", flags),
            (Names{"/b/nereus_server", "--role=server", "--coordinator=10.0.0.1:7100", "--rank=0",
                   "--bind_host=10.0.0.1", "--consistency=ssp"}));
  const Names args = ProcessArgs(*plan, worker1, "/b", flags);
  EXPECT_EQ(args, (Names{"/b/nereus_worker", "--coordinator=10.0.0.1:7100", "--rank=1", "--bind_host=10.0.0.2",
                         "--iterations=5"}));
  EXPECT_EQ(ProcessLabel(*plan, coordinator), "coordinator@hostA");
  EXPECT_EQ(ProcessLabel(*plan, worker1), "worker 1@hostB");
  EXPECT_EQ(ProcessLogName(coordinator), "coordinator");
  EXPECT_EQ(ProcessLogName(worker1), "worker1");

  RemoteOptions remote;
  remote.workdir = "/w d";
  remote.env = {"A=1"};
  remote.mode = RemoteMode::kNone;
  EXPECT_EQ(ShellWords(RemoteCommand(remote, "hostB", args)),
            "bash -c 'cd '\\''/w d'\\'' && exec env A=1 /b/nereus_worker --coordinator=10.0.0.1:7100 --rank=1 "
            "--bind_host=10.0.0.2 --iterations=5'");
  remote.mode = RemoteMode::kNetns;
  EXPECT_EQ(RemoteCommand(remote, "hostB", args)[3], "hostB");
  EXPECT_EQ(RemoteCommand(remote, "hostB", args)[0], "ip");
  remote.mode = RemoteMode::kSsh;
  remote.env.clear();
  remote.workdir = "/w";
  remote.ssh_options = {"-p", "2222"};
  EXPECT_EQ(ShellWords(RemoteCommand(remote, "hostB", args)),
            "ssh -o BatchMode=yes -p 2222 hostB 'cd /w || exit 1; exec 3<&0; /b/nereus_worker "
            "--coordinator=10.0.0.1:7100 --rank=1 --bind_host=10.0.0.2 --iterations=5 </dev/null & p=$!; ( read -r _ "
            "<&3; kill $p ) >/dev/null 2>&1 & w=$!; exec 3<&-; wait $p; s=$?; kill $w 2>/dev/null; exit $s'");
  EXPECT_EQ(ParseRemoteMode("rsh").status().message(), "--ssh must be ssh, none or netns, got \"rsh\"");
}

// scripts/launch.sh --worker_command: a worker runs the command (a Python
// worker, say) with its place in the environment and the workers' flags in
// NEREUS_WORKER_FLAGS; the coordinator and servers are as always.
TEST(ProcessCommands, AWorkerCommandRunsWithItsPlaceInTheEnvironment) {
  auto plan = PlanLaunch(TwoHosts(), {3, 3, 7100});
  ASSERT_TRUE(plan.ok());
  const RoutedFlags flags = SspServersAnd({"--schedule=full", "--timeline=/t/{rank}.json"});
  const PlannedProcess& worker2 = plan->processes.back();
  ASSERT_EQ(worker2.role, LaunchRole::kWorker);
  ASSERT_EQ(worker2.rank, 2);
  EXPECT_EQ(ProcessArgs(*plan, worker2, "/b", flags, "python3 train.py --epochs=2"),
            (Names{"/usr/bin/env", "NEREUS_COORDINATOR=10.0.0.1:7100", "NEREUS_RANK=2", "NEREUS_NUM_WORKERS=3",
                   "NEREUS_NUM_SERVERS=3", "NEREUS_BIND_HOST=10.0.0.2", "NEREUS_LOCAL_RANK=1", "NEREUS_LOCAL_SIZE=2",
                   "NEREUS_WORKER_FLAGS=--schedule=full '--timeline=/t/{rank}.json'", "bash", "-c",
                   "python3 train.py --epochs=2"}));
  const Names worker0 = ProcessArgs(*plan, plan->processes[4], "/b", flags, "python3 train.py");
  EXPECT_EQ(worker0[5], "NEREUS_BIND_HOST=10.0.0.1");
  EXPECT_EQ(worker0[6], "NEREUS_LOCAL_RANK=0");
  EXPECT_EQ(worker0[7], "NEREUS_LOCAL_SIZE=1");
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[0], "/b", flags, "python3 train.py"),
            (Names{"/b/nereus_server", "--role=coordinator", "--coordinator=10.0.0.1:7100", "--num_servers=3",
                   "--num_workers=3", "--consistency=ssp"}));
}

// With GPUs a worker's command has its --gpu after its address; the
// coordinator's and the servers' have none.
TEST(ProcessCommands, WorkersGetTheirGpu) {
  auto plan = PlanLaunch(TwoHosts(), WithGpus(1, 3, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const RoutedFlags flags = SspServersAnd({"--iterations=5"});
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[1], "/b", flags),
            (Names{"/b/nereus_server", "--role=server", "--coordinator=10.0.0.1:7000", "--rank=0",
                   "--bind_host=10.0.0.1", "--consistency=ssp"}));
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[2], "/b", flags),
            (Names{"/b/nereus_worker", "--coordinator=10.0.0.1:7000", "--rank=0", "--bind_host=10.0.0.1", "--gpu=0",
                   "--iterations=5"}));
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[3], "/b", flags),
            (Names{"/b/nereus_worker", "--coordinator=10.0.0.1:7000", "--rank=1", "--bind_host=10.0.0.2", "--gpu=0",
                   "--iterations=5"}));
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[4], "/b", flags),
            (Names{"/b/nereus_worker", "--coordinator=10.0.0.1:7000", "--rank=2", "--bind_host=10.0.0.2", "--gpu=1",
                   "--iterations=5"}));
  // A worker command (a Python worker) gets its GPU in the environment.
  EXPECT_EQ(ProcessArgs(*plan, plan->processes[4], "/b", flags, "python3 train.py"),
            (Names{"/usr/bin/env", "NEREUS_COORDINATOR=10.0.0.1:7000", "NEREUS_RANK=2", "NEREUS_NUM_WORKERS=3",
                   "NEREUS_NUM_SERVERS=1", "NEREUS_BIND_HOST=10.0.0.2", "NEREUS_LOCAL_RANK=1", "NEREUS_LOCAL_SIZE=2",
                   "NEREUS_GPU=1", "NEREUS_WORKER_FLAGS=--iterations=5", "bash", "-c", "python3 train.py"}));
}

}  // namespace
}  // namespace nereus

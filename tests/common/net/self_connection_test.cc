// A node whose coordinator port lies in the kernel's ephemeral range, started
// before the coordinator listens, can be given that very port as its
// connection's source port: a TCP self-connection, which reaches the node
// itself. The node notices (its own REGISTER comes back), refuses the
// connection naming the port, and connects again. Reproduced every time in a
// network namespace of the test's own (ip_local_port_range is per namespace)
// whose ephemeral range is the coordinator's port and the next: the node's
// own listening socket takes the odd one (Linux gives bind() odd ports), its
// connection the coordinator's. Needs root for the namespace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "bench/harness/netns.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/status_util.h"

namespace nereus {
namespace {

using test::TempDir;

constexpr int kPort = 40000;

TEST(SelfConnectionTest, ANodeRefusesAConnectionToItselfNamingThePort) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_NET_ADMIN) for a network namespace";
  auto ns = bench::NetNamespace::Create("nereus_selfconn" + std::to_string(getpid()), 0);
  if (!ns.ok()) GTEST_SKIP() << "network namespaces unavailable here: " << ns.status();
  std::string out;
  ASSERT_EQ(bench::RunCommand((*ns)->Wrap({"sh", "-c",
                                           "echo '" + std::to_string(kPort) + " " + std::to_string(kPort + 1) +
                                               "' > /proc/sys/net/ipv4/ip_local_port_range"}),
                              &out),
            0)
      << out;
  TempDir dir;
  // A server with no coordinator yet: its every connection to 127.0.0.1:kPort
  // gets kPort as its source port.
  auto server = test::Subprocess::Start(
      (*ns)->Wrap({test::BinaryPath("nereus_server"), "--role=server", "--rank=0",
                   "--coordinator=127.0.0.1:" + std::to_string(kPort), "--startup_timeout_s=4"}),
      dir.File("server.log"));
  const auto code = server->WaitFor(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << server->Log();
  EXPECT_EQ(*code, 1) << server->Log();
  const std::string log = server->Log();
  test::ExpectContains(log,
                       {"refused the connection to the coordinator at tcp://127.0.0.1:40000: it reached this "
                        "node itself (TCP self-connection on port 40000, which is in this host's ephemeral port "
                        "range, /proc/sys/net/ipv4/ip_local_port_range, and had no listener yet); connecting again",
                        "the connection reached this node itself",
                        "(TCP self-connection: port 40000 is in this host's ephemeral port range, "
                        "/proc/sys/net/ipv4/ip_local_port_range); give the coordinator a port below that range"});
}

}  // namespace
}  // namespace nereus

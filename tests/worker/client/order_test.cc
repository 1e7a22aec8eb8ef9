// Under contention on a bandwidth-limited link (a namespace of our own whose
// loopback tc shapes), layer 0's fresh weights arrive first although its
// gradients were handed over last — with priorities, and not without them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "bench/harness/netns.h"
#include "tests/support/process_util.h"

namespace nereus {
namespace {

struct Result {
  std::vector<long long> arrival_us;  // Per layer: the receive thread's clock at its completing reply.
  std::string raw;
};

Result Probe(const bench::NetNamespace& ns, const std::string& schedule, const test::TempDir& dir) {
  auto p = test::Subprocess::Start(ns.Wrap({test::BinaryPath("nereus_order_probe"), "--schedule=" + schedule,
                                            "--timeline=" + dir.File(schedule + ".trace.json")}),
                                   dir.File(schedule + ".log"));
  auto code = p->WaitFor(std::chrono::seconds(60));
  Result r;
  r.raw = p->Log();
  EXPECT_EQ(code, 0) << r.raw;
  std::smatch m;
  std::regex re("\"arrival_us\": \\[(\\d+), (\\d+), (\\d+), (\\d+)\\]");
  if (std::regex_search(r.raw, m, re))
    for (int i = 1; i <= 4; ++i) r.arrival_us.push_back(std::stoll(m[i]));
  return r;
}

TEST(OrderTest, LayerZeroPullCompletesFirstUnderContention) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (CAP_NET_ADMIN) to create a network namespace";
  auto ns = bench::NetNamespace::Create("nereus_order_" + std::to_string(getpid()), /*rate_mbit=*/100);
  if (!ns.ok()) GTEST_SKIP() << "network namespaces unavailable here: " << ns.status().message();
  test::TempDir dir;
  Result priority = Probe(**ns, "priority", dir);
  ASSERT_EQ(priority.arrival_us.size(), 4u) << priority.raw;
  for (int l = 1; l < 4; ++l)
    EXPECT_LT(priority.arrival_us[0], priority.arrival_us[l]) << "layer 0 should arrive first with priorities, "
                                                              << "before layer " << l << ": " << priority.raw;
  // Without priorities the same traffic is first in first out: layer 0,
  // handed over last, arrives last, or in the same reply as the last part of
  // the layer before it (the server answers the parts of one update in one
  // PULL_REPLY). This is what makes the check above mean something.
  Result fifo = Probe(**ns, "wfbp", dir);
  ASSERT_EQ(fifo.arrival_us.size(), 4u) << fifo.raw;
  for (int l = 1; l < 4; ++l)
    EXPECT_GE(fifo.arrival_us[0], fifo.arrival_us[l])
        << "with FIFO layer 0 should arrive last, not before layer " << l << ": " << fifo.raw;
}

}  // namespace
}  // namespace nereus

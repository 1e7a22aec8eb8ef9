// The benchmark's watchdog and round-robin shares (a bench that once
// assumed counts divide evenly waited for ever).
#include "bench/harness/watchdog.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace nereus {
namespace bench {
namespace {

// Records expiries; Wait blocks (bounded) until one came.
struct Expiries {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> phases;
  Watchdog::Expired Callback() {
    return [this](const std::string& phase, double) {
      std::lock_guard<std::mutex> lock(mu);
      phases.push_back(phase);
      cv.notify_all();
    };
  }
  bool WaitFor(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return phases.size() >= n; });
  }
};

TEST(WatchdogTest, NamesTheStuckPhaseOnce) {
  Expiries e;
  {
    Watchdog wd(0.05, e.Callback());
    wd.Phase("quick");
    wd.Phase("raw zmq stream 2x2");  // Ends "quick" in time; this one never ends.
    ASSERT_TRUE(e.WaitFor(1, std::chrono::seconds(10)));
  }
  ASSERT_EQ(e.phases, (std::vector<std::string>{"raw zmq stream 2x2"}));
}

TEST(WatchdogTest, PhasesThatEndInTimeAndIdleNeverFire) {
  Expiries e;
  {
    Watchdog wd(1.0, e.Callback());
    for (int i = 0; i < 100; ++i) wd.Phase("phase " + std::to_string(i));
    wd.Idle();
    // Idle: nothing is bounded, however long this takes.
    EXPECT_FALSE(e.WaitFor(1, std::chrono::milliseconds(2500)));
  }
  EXPECT_TRUE(e.phases.empty());
}

TEST(WatchdogTest, DisarmedWithZeroTimeout) {
  Expiries e;
  Watchdog wd(0, e.Callback());
  wd.Phase("anything");
  EXPECT_FALSE(e.WaitFor(1, std::chrono::milliseconds(200)));
}

TEST(RoundRobinShareTest, SharesAreExactWhenCountsDoNotDivide) {
  // The hang seen once: 2 senders x 7629 messages over 2 receivers, each
  // sender starting at receiver 0, gives 7630 and 7628, not 7629 each.
  EXPECT_EQ(RoundRobinShare(7629, 2, 0, 0), 3815u);
  EXPECT_EQ(RoundRobinShare(7629, 2, 1, 0), 3814u);
  EXPECT_EQ(RoundRobinShare(7629, 2, 0, 1), 3814u);
  EXPECT_EQ(RoundRobinShare(7629, 2, 1, 1), 3815u);
  EXPECT_EQ(RoundRobinShare(10, 3, 2, 2), 4u);  // Slots 2,0,1,2,0,1,2,0,1,2.
  EXPECT_EQ(RoundRobinShare(10, 3, 0, 2), 3u);
  EXPECT_EQ(RoundRobinShare(3, 4, 3, 1), 1u);  // Slots 1,2,3.
  EXPECT_EQ(RoundRobinShare(3, 4, 0, 1), 0u);
  // Whatever the counts, the shares add up to the whole.
  for (int ways = 1; ways <= 5; ++ways)
    for (int start = 0; start < 7; ++start)
      for (uint64_t items = 0; items < 23; ++items) {
        uint64_t sum = 0;
        for (int slot = 0; slot < ways; ++slot) sum += RoundRobinShare(items, ways, slot, start);
        EXPECT_EQ(sum, items) << items << " over " << ways << " from " << start;
      }
}

}  // namespace
}  // namespace bench
}  // namespace nereus

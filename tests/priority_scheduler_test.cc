#include "worker/client/priority_scheduler.h"

#include <gtest/gtest.h>

namespace nereus {
namespace {

struct Recorder {
  std::vector<int> sent;
  PriorityScheduler::Item Item(int server, uint64_t priority, uint64_t bytes) {
    PriorityScheduler::Item i;
    i.server = server;
    i.priority = priority;
    i.bytes = bytes;
    i.send = [this, priority] { sent.push_back(static_cast<int>(priority)); };
    return i;
  }
};

TEST(PrioritySchedulerTest, NewlyReadyUrgentPartitionOvertakesQueuedOnes) {
  Recorder r;
  PriorityScheduler s(1, /*credit_bytes=*/3);
  for (int p = 10; p <= 14; ++p) s.Enqueue(r.Item(0, p, 1));
  EXPECT_EQ(r.sent, (std::vector<int>{10, 11, 12}));  // Credit is full.
  EXPECT_EQ(s.queued(0), 2u);
  s.Enqueue(r.Item(0, 0, 1));  // Layer 0 becomes ready: queued, not sent (no credit).
  EXPECT_EQ(r.sent.size(), 3u);
  s.Complete(0, 1);
  EXPECT_EQ(r.sent, (std::vector<int>{10, 11, 12, 0}));  // Ahead of 13 and 14.
  s.Complete(0, 1);
  s.Complete(0, 1);
  s.Complete(0, 1);
  EXPECT_EQ(r.sent, (std::vector<int>{10, 11, 12, 0, 13, 14}));
  EXPECT_EQ(s.in_flight(0), 2u);
}

TEST(PrioritySchedulerTest, EqualPrioritiesKeepArrivalOrderAndNoCreditSendsAtOnce) {
  Recorder r;
  PriorityScheduler s(2, /*credit_bytes=*/0);
  s.Enqueue(r.Item(1, 5, 100));
  s.Enqueue(r.Item(0, 7, 100));
  s.Enqueue(r.Item(1, 1, 100));
  EXPECT_EQ(r.sent, (std::vector<int>{5, 7, 1}));
  EXPECT_EQ(s.in_flight(1), 200u);
}

TEST(PrioritySchedulerTest, ItemLargerThanCreditGoesAloneAndServersAreIndependent) {
  Recorder r;
  PriorityScheduler s(2, /*credit_bytes=*/10);
  s.Enqueue(r.Item(0, 1, 50));  // Larger than the credit: sent since nothing is in flight.
  s.Enqueue(r.Item(0, 2, 1));   // Waits for it.
  s.Enqueue(r.Item(1, 3, 5));   // Another server has its own credit.
  EXPECT_EQ(r.sent, (std::vector<int>{1, 3}));
  s.Complete(0, 50);
  EXPECT_EQ(r.sent, (std::vector<int>{1, 3, 2}));
}

}  // namespace
}  // namespace nereus

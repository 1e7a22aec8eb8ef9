#include "worker/client/priority_scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

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

// Batching: what leaves, as one entry per wire message (its items' priorities).
struct BatchRecorder {
  std::vector<std::vector<int>> sent;
  PriorityScheduler::Item Item(int server, uint64_t priority, uint64_t bytes, int kind = 1) {
    // {server, priority, bytes, send, batch_kind, batch_cost, unit}.
    return {server,
            priority,
            bytes,
            [this, priority] { sent.push_back({static_cast<int>(priority)}); },
            kind,
            bytes,
            std::make_shared<int>(static_cast<int>(priority))};
  }
  PriorityScheduler Make(int servers, uint64_t credit, uint64_t batch) {
    return PriorityScheduler(servers, credit, batch, [this](std::vector<PriorityScheduler::Item>* items) {
      std::vector<int> b;
      for (auto& i : *items) b.push_back(*std::static_pointer_cast<int>(i.unit));
      sent.push_back(b);
    });
  }
};

TEST(PrioritySchedulerTest, QueuedSmallItemsLeaveAsOneBatchInPriorityOrderAndBigOnesAlone) {
  BatchRecorder r;
  PriorityScheduler s = r.Make(2, /*credit_bytes=*/200, /*batch_bytes=*/64);
  s.Enqueue(r.Item(0, 50, 200));  // Takes the whole credit: the link is busy.
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{50}}));
  // Queued behind it, out of order; 40 is big (not below the batch size).
  for (int p : {14, 11, 13, 12}) s.Enqueue(r.Item(0, p, 10));
  s.Enqueue(r.Item(0, 20, 64));
  s.Enqueue(r.Item(0, 21, 10));
  s.Enqueue(r.Item(1, 3, 10));  // Another server: its own queue, sent at once.
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{50}, {3}}));
  s.Complete(0, 200);
  // The four small ones in priority order as one batch; the big one stops
  // the batch (never skipped over) and goes alone; 21 follows it alone (the
  // queue behind it is empty).
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{50}, {3}, {11, 12, 13, 14}, {20}, {21}}));
  EXPECT_EQ(s.in_flight(0), 40u + 64u + 10u);
}

TEST(PrioritySchedulerTest, BatchesKeepTheCreditTheBatchCapAndTheKind) {
  BatchRecorder r;
  PriorityScheduler s = r.Make(1, /*credit_bytes=*/35, /*batch_bytes=*/25);
  std::vector<PriorityScheduler::Item> items;
  for (int p = 1; p <= 6; ++p) items.push_back(r.Item(0, p, 10, p == 5 ? 2 : 1));
  s.EnqueueAll(std::move(items));  // Queued together, then dispatched.
  // 1+2 fill the batch cap (20 + 10 > 25); 3 starts the next batch, which the
  // credit ends (30 in flight + 10 > 35).
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{1, 2}, {3}}));
  s.Complete(0, 20);
  // 4, then 5 is of another kind: alone after it.
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{1, 2}, {3}, {4}, {5}}));
  s.Complete(0, 30);
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{1, 2}, {3}, {4}, {5}, {6}}));
}

TEST(PrioritySchedulerTest, WithoutBatchBytesEveryItemGoesAlone) {
  BatchRecorder r;
  PriorityScheduler s = r.Make(1, /*credit_bytes=*/10, /*batch_bytes=*/0);
  for (int p = 1; p <= 3; ++p) s.Enqueue(r.Item(0, p, 10));
  s.Complete(0, 10);
  s.Complete(0, 10);
  EXPECT_EQ(r.sent, (std::vector<std::vector<int>>{{1}, {2}, {3}}));
}

}  // namespace
}  // namespace nereus

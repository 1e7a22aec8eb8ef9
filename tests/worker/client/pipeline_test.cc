// The layer-wise API end to end: every schedule gives the same weights, bit
// for bit, on 2 servers x 3 workers (real ZeroMQ on 127.0.0.1, in one process).
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "bench/harness/local_job.h"
#include "common/update/sgd.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "worker/client/options_proto.h"
#include "worker/synthetic/synthetic_model.h"

namespace nereus {
namespace {

constexpr int kClocks = 20;
const char* kTensors = "1000,7,250x10,3,64x3x3x3,1,500,2";

// Trains the synthetic model through the layer-wise API; returns every
// worker's final weights (all tensors, concatenated).
std::vector<std::vector<float>> Train(Schedule schedule, const std::string& timeline = "", ClientStats* stats = nullptr,
                                      uint64_t batch_bytes = ClientOptions().batch_bytes, double merge_alpha_s = 0) {
  auto shapes = ParseTensorShapes(kTensors).value();
  const int W = 3, T = static_cast<int>(shapes.size());
  bench::LocalJobOptions o;
  o.servers = 2;
  o.workers = W;
  o.job.set_partition_bytes(1024);  // Every big tensor is split over both servers.
  o.client.schedule = schedule;
  o.client.credit_bytes = 2048;
  o.client.streams = 2;
  o.client.merge_profile_iterations = 2;
  o.client.timeline = timeline;
  o.client.batch_bytes = batch_bytes;
  if (merge_alpha_s > 0) {
    o.client.merge_alpha_s = merge_alpha_s;
    o.client.merge_beta_s_per_byte = 1e-9;
  }
  auto job = bench::LocalJob::Start(o);
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return {};
  SyntheticModel model(SyntheticKind::kNoise, 5, 0.01f);
  std::vector<std::vector<float>> result(W);
  std::vector<std::thread> threads;
  std::vector<Status> status(W);
  for (int r = 0; r < W; ++r) {
    threads.emplace_back([&, r] {
      Client& c = (*job)->worker(r);
      std::vector<std::vector<float>> w(T), g(T);
      std::vector<const float*> init;
      for (int t = 0; t < T; ++t) {
        const size_t n = ElementCount(shapes[t]);
        w[t].resize(n);
        g[t].resize(n);
        model.InitialWeights(t, w[t].data(), n);
        init.push_back(w[t].data());
        TensorSpec spec{"t" + std::to_string(t), shapes[t]};
        spec.layer = t;
        spec.data = w[t].data();
        spec.diff = g[t].data();
        auto id = c.RegisterTensor(spec);
        if (!id.ok()) {
          status[r] = id.status();
          return;
        }
      }
      Status st = c.Init(SgdConfigFromProto(test::InvDecaySgd()), init);
      for (int64_t clock = 0; st.ok() && clock < kClocks; ++clock) {
        for (int l = 0; st.ok() && l < T; ++l) st = c.WaitWeights(l, clock);
        for (int l = T - 1; st.ok() && l >= 0; --l) {
          model.Gradient(r, clock, l, w[l].data(), g[l].data(), g[l].size());
          st = c.GradientsReady(l, clock);
        }
      }
      for (int l = 0; st.ok() && l < T; ++l) st = c.WaitWeights(l, kClocks);
      status[r] = st;
      for (auto& v : w) result[r].insert(result[r].end(), v.begin(), v.end());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < W; ++r) EXPECT_TRUE(status[r].ok()) << "worker " << r << ": " << status[r];
  if (stats) *stats = (*job)->worker(0).stats();
  EXPECT_TRUE((*job)->Finish().ok());
  return result;
}

std::vector<float> Reference() {
  auto shapes = ParseTensorShapes(kTensors).value();
  SyntheticModel model(SyntheticKind::kNoise, 5, 0.01f);
  const pb::SgdConfig sgd = test::InvDecaySgd();
  std::vector<float> out;
  for (size_t t = 0; t < shapes.size(); ++t) {
    const size_t n = ElementCount(shapes[t]);
    std::vector<float> w(n), h(n, 0.0f), avg(n);
    std::vector<std::vector<float>> g(3, std::vector<float>(n));
    model.InitialWeights(t, w.data(), n);
    for (int c = 0; c < kClocks; ++c) {
      const float* srcs[3];
      for (int r = 0; r < 3; ++r) {
        model.Gradient(r, c, t, w.data(), g[r].data(), n);
        srcs[r] = g[r].data();
      }
      AverageInOrder(srcs, 3, avg.data(), n);
      SgdStep(sgd, LearningRate(sgd, c), 1.0f, 1.0f, avg.data(), w.data(), h.data(), n);
    }
    out.insert(out.end(), w.begin(), w.end());
  }
  return out;
}

TEST(PipelineTest, EveryScheduleMatchesSequentialBitForBit) {
  const std::vector<float> expected = Reference();
  const auto sequential = Train(Schedule::kSequential);
  ASSERT_EQ(sequential.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(sequential[r].size(), expected.size());
    EXPECT_EQ(std::memcmp(sequential[r].data(), expected.data(), expected.size() * sizeof(float)), 0)
        << "sequential, worker " << r << " differs from the single-process reference";
  }
  for (Schedule s : {Schedule::kWfbp, Schedule::kPriority, Schedule::kFull}) {
    const auto got = Train(s);
    ASSERT_EQ(got.size(), 3u) << ScheduleName(s);
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(got[r].size(), expected.size());
      EXPECT_EQ(std::memcmp(got[r].data(), sequential[r].data(), expected.size() * sizeof(float)), 0)
          << ScheduleName(s) << ", worker " << r << " differs from sequential";
    }
  }
}

TEST(PipelineTest, MergingSendsFewerPushMessagesForTheSameBytes) {
  ClientStats priority, full;
  Train(Schedule::kPriority, "", &priority, /*batch_bytes=*/0);
  // The link model is given, with a per-message cost (1 s) far above any
  // gap between the layers' backwards, so the plan merges whatever the
  // machine's timing (measured, a slow TSan run once planned no merge).
  Train(Schedule::kFull, "", &full, /*batch_bytes=*/0, /*merge_alpha_s=*/1.0);
  // Same gradients, fewer messages: clocks after the first few (used to time
  // the layers) travel merged.
  EXPECT_EQ(full.push_bytes, priority.push_bytes);
  EXPECT_LT(full.push_messages, priority.push_messages);
  // Without merging: one message per partition per clock. The 8 tensors have
  // 4 + 1 + 10 + 1 + 7 + 1 + 2 + 1 = 27 partitions of at most 1024 bytes.
  EXPECT_EQ(priority.push_messages, 27u * kClocks);
  EXPECT_EQ(priority.pull_messages, 27u);  // Clock 0's prefetch; the rest ride on pushes.
}

// Batching small queued units (--batch_bytes) changes how many messages go,
// never the weights: every schedule with batching on gives, bit for bit, the
// weights of batching off, and sends the same bytes in fewer messages.
TEST(PipelineTest, BatchingSendsFewerMessagesAndTheSameWeightsBitForBit) {
  ClientStats off;
  const auto plain = Train(Schedule::kPriority, "", &off, /*batch_bytes=*/0);
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(off.batches, 0u);
  for (Schedule s : {Schedule::kSequential, Schedule::kWfbp, Schedule::kPriority, Schedule::kFull}) {
    ClientStats on;
    const auto got = Train(s, "", &on, /*batch_bytes=*/64 << 10);
    ASSERT_EQ(got.size(), 3u) << ScheduleName(s);
    for (int r = 0; r < 3; ++r) {
      ASSERT_EQ(got[r].size(), plain[r].size());
      EXPECT_EQ(std::memcmp(got[r].data(), plain[r].data(), plain[r].size() * sizeof(float)), 0)
          << ScheduleName(s) << " with batching, worker " << r << " differs from priority without";
    }
    EXPECT_GT(on.batches, 0u) << ScheduleName(s);
    if (s != Schedule::kPriority) continue;
    // The same units and bytes; each batch of k units is one message.
    EXPECT_EQ(on.push_bytes, off.push_bytes);
    EXPECT_LT(on.push_messages, off.push_messages);
    EXPECT_LT(on.pull_messages, off.pull_messages);  // Clock 0's prefetch, batched.
    EXPECT_EQ(on.push_messages + on.pull_messages + on.batched_units - on.batches,
              off.push_messages + off.pull_messages);
  }
}

// Sequential mode's pulls ride on its pushes, as the other schedules' do:
// the only PULL messages are clock 0's, exactly as many as under priority,
// and one PUSH per partition and clock.
TEST(PipelineTest, SequentialPullsRideOnThePushes) {
  ClientStats priority, sequential;
  const auto a = Train(Schedule::kPriority, "", &priority, /*batch_bytes=*/0);
  const auto b = Train(Schedule::kSequential, "", &sequential, /*batch_bytes=*/0);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_GT(sequential.pull_messages, 0u);
  EXPECT_EQ(sequential.pull_messages, priority.pull_messages);
  EXPECT_EQ(sequential.push_messages, priority.push_messages);
}

TEST(PipelineTest, TimelineIsChromeTraceWithComputeQueueTransferAndApplySpans) {
  test::TempDir dir;
  Train(Schedule::kPriority, dir.File("trace.{rank}.json"));
  const std::string json = test::ReadFile(dir.File("trace.1.json"));
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.rfind("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", 0), 0u);
  for (const char* lane : {"queued in the client", "push transfer", "server apply", "pull transfer"})
    EXPECT_NE(json.find(lane), std::string::npos) << lane;
  EXPECT_NE(json.find("\"ph\": \"X\""), std::string::npos);
  EXPECT_NE(json.find("\"tid\": 4, \"ts\""), std::string::npos) << "no server-apply span";
  EXPECT_NE(json.find("\"args\": {\"name\": \"worker 1\"}"), std::string::npos);
  // Spans of every clock are there (timeline_every = 1): the last clock's push.
  EXPECT_NE(json.find("\"args\": {\"clock\": 19}"), std::string::npos);
}

}  // namespace
}  // namespace nereus

// The vectorised SGD step and average (common/update/sgd.cc) against the scalar
// loops they replace, bit for bit, and the server's out-of-place update.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/update/sgd.h"
#include "server/param_server.h"

namespace nereus {
namespace {

// Caffe's step, the scalar loop as it was before vectorising.
void ScalarStep(const pb::SgdConfig& c, float rate, float lr_mult, float decay_mult, const float* diff, float* data,
                float* history, size_t n) {
  const float local_rate = rate * lr_mult;
  const float local_decay = c.weight_decay() * decay_mult;
  const float momentum = c.momentum();
  const bool l1 = c.regularization_type() == "L1";
  for (size_t i = 0; i < n; ++i) {
    float g = diff[i];
    if (local_decay != 0.0f) {
      const float reg = l1 ? static_cast<float>((data[i] > 0.0f) - (data[i] < 0.0f)) : data[i];
      g = local_decay * reg + diff[i];
    }
    const float h = local_rate * g + momentum * history[i];
    history[i] = h;
    data[i] = data[i] - h;
  }
}

std::vector<float> Random(size_t n, std::mt19937* rng, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(*rng);
  return v;
}

pb::SgdConfig MomentumSgd(const char* regularization, float weight_decay) {
  pb::SgdConfig c;
  c.set_lr_policy("fixed");
  c.set_momentum(0.9f);
  c.set_weight_decay(weight_decay);
  c.set_regularization_type(regularization);
  return c;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(SgdVectorTest, StepIsBitwiseTheScalarLoop) {
  std::mt19937 rng(7);
  for (const char* reg : {"L2", "L1"}) {
    for (float decay : {0.0f, 5e-4f}) {
      const pb::SgdConfig c = MomentumSgd(reg, decay);
      // Lengths around the vector width and its tail.
      for (size_t n : {0u, 1u, 3u, 4u, 7u, 8u, 9u, 15u, 16u, 17u, 1000u, 1027u}) {
        const auto diff = Random(n, &rng, 1e-2f), data0 = Random(n, &rng, 1.0f), hist0 = Random(n, &rng, 1e-3f);
        std::vector<float> want = data0, want_h = hist0;
        ScalarStep(c, 0.01f, 1.5f, 2.0f, diff.data(), want.data(), want_h.data(), n);
        std::vector<float> got = data0, got_h = hist0;
        SgdStep(c, 0.01f, 1.5f, 2.0f, diff.data(), got.data(), got_h.data(), n);
        EXPECT_TRUE(BitEqual(got, want)) << reg << " decay " << decay << " n " << n;
        EXPECT_TRUE(BitEqual(got_h, want_h)) << reg << " decay " << decay << " n " << n;
        std::vector<float> out(n, -1.0f), out_h = hist0;
        const float* one = diff.data();  // One gradient: stepped on as it is.
        SgdStepAveraged(c, 0.01f, 1.5f, 2.0f, &one, 1, data0.data(), out.data(), out_h.data(), n);
        EXPECT_TRUE(BitEqual(out, want)) << "out of place, " << reg << " decay " << decay << " n " << n;
        EXPECT_TRUE(BitEqual(out_h, want_h)) << "out of place, " << reg << " decay " << decay << " n " << n;
      }
    }
  }
}

TEST(SgdVectorTest, AverageIsBitwiseTheScalarLoop) {
  std::mt19937 rng(11);
  for (size_t k : {1u, 2u, 3u, 8u}) {
    for (size_t n : {1u, 5u, 8u, 1023u}) {
      std::vector<std::vector<float>> in;
      std::vector<const float*> srcs;
      for (size_t j = 0; j < k; ++j) in.push_back(Random(n, &rng, 1.0f));
      for (auto& v : in) srcs.push_back(v.data());
      std::vector<float> want(n), got(n);
      const float scale = 1.0f / static_cast<float>(k);
      for (size_t i = 0; i < n; ++i) {
        float s = srcs[0][i];
        for (size_t j = 1; j < k; ++j) s += srcs[j][i];
        want[i] = s * scale;
      }
      AverageInOrder(srcs.data(), k, got.data(), n);
      EXPECT_TRUE(BitEqual(got, want)) << k << " sources, n " << n;
    }
  }
}

// The step on gradients averaged on the fly is bitwise AverageInOrder and
// then the step, in place and out of place, for every regularisation.
TEST(SgdVectorTest, AveragedStepIsBitwiseAverageThenStep) {
  std::mt19937 rng(13);
  for (const char* reg : {"L2", "L1"}) {
    for (float decay : {0.0f, 5e-4f}) {
      const pb::SgdConfig c = MomentumSgd(reg, decay);
      for (size_t k : {1u, 2u, 3u, 5u}) {
        for (size_t n : {0u, 1u, 7u, 8u, 9u, 17u, 1027u}) {
          std::vector<std::vector<float>> in;
          std::vector<const float*> srcs;
          for (size_t j = 0; j < k; ++j) in.push_back(Random(n, &rng, 1e-2f));
          for (auto& v : in) srcs.push_back(v.data());
          const auto data0 = Random(n, &rng, 1.0f), hist0 = Random(n, &rng, 1e-3f);
          std::vector<float> avg(n), want = data0, want_h = hist0;
          AverageInOrder(srcs.data(), k, avg.data(), n);
          ScalarStep(c, 0.01f, 1.5f, 2.0f, avg.data(), want.data(), want_h.data(), n);
          // In place.
          std::vector<float> got = data0, got_h = hist0;
          SgdStepAveraged(c, 0.01f, 1.5f, 2.0f, srcs.data(), k, got.data(), got.data(), got_h.data(), n);
          EXPECT_TRUE(BitEqual(got, want)) << reg << " decay " << decay << " k " << k << " n " << n;
          EXPECT_TRUE(BitEqual(got_h, want_h)) << reg << " decay " << decay << " k " << k << " n " << n;
          // Out of place: the old weights stay as they were.
          std::vector<float> out(n, 7.0f), out_h = hist0;
          SgdStepAveraged(c, 0.01f, 1.5f, 2.0f, srcs.data(), k, data0.data(), out.data(), out_h.data(), n);
          EXPECT_TRUE(BitEqual(out, want)) << reg << " decay " << decay << " k " << k << " n " << n;
          EXPECT_TRUE(BitEqual(out_h, want_h)) << reg << " decay " << decay << " k " << k << " n " << n;
        }
      }
    }
  }
}

// Replies the server sends, kept alive like replies still in flight.
class HoldingSink : public ReplySink {
 public:
  void Reply(const Endpoint&, Message msg) override { replies.push_back(std::move(msg)); }
  std::vector<Message> replies;
};

Message Push(int64_t clock, uint64_t pull_id, const std::vector<float>& g) {
  Message m;
  m.header.set_op(pb::PUSH);
  m.header.set_request_id(100 + clock);
  m.header.set_dtype(pb::FLOAT32);
  m.header.set_clock(clock);
  m.header.set_pull_request_id(pull_id);
  m.header.set_payload_bytes(g.size() * sizeof(float));
  m.payload.push_back(Buffer::CopyOf(g.data(), g.size() * sizeof(float)));
  return m;
}

// While replies hold earlier weights, updates go out of place (into a spare
// buffer or a new one); each held reply keeps its own version's values, and
// the weights stay bitwise those of in-place steps.
void OutOfPlaceUpdates(int workers);

// With several workers the update averages their gradients in rank order on
// the fly (SgdStepAveraged); the weights must still be those of the scalar
// average and step.
TEST(SgdVectorTest, OutOfPlaceUpdatesKeepHeldRepliesAndExactWeights) {
  for (int workers : {1, 2, 3}) {
    SCOPED_TRACE(std::to_string(workers) + " worker(s)");
    OutOfPlaceUpdates(workers);
  }
}

void OutOfPlaceUpdates(int workers) {
  HoldingSink sink;
  ParamServerOptions o;
  o.num_workers = workers;
  ParamServer server(o, &sink);
  pb::SgdConfig sgd;
  sgd.set_lr_policy("fixed");
  sgd.set_base_lr(0.1f);
  sgd.set_momentum(0.9f);
  sgd.set_weight_decay(1e-3f);
  const std::vector<float> w0 = {1.0f, -2.0f, 0.5f, 3.0f, 0.25f};
  Message init;
  init.header.set_op(pb::INIT_PARTITION);
  init.header.set_request_id(1);
  init.header.set_dtype(pb::FLOAT32);
  init.header.mutable_partition_meta()->set_length(w0.size());
  init.header.mutable_partition_meta()->set_lr_mult(1.0f);
  init.header.mutable_partition_meta()->set_decay_mult(1.0f);
  *init.header.mutable_sgd() = sgd;
  init.header.set_payload_bytes(w0.size() * sizeof(float));
  init.payload.push_back(Buffer::CopyOf(w0.data(), w0.size() * sizeof(float)));
  server.Handle("w", 0, std::move(init), pb::Header());

  std::vector<float> want = w0, hist(w0.size(), 0.0f);
  std::vector<std::vector<float>> versions;
  for (int64_t clock = 0; clock < 4; ++clock) {
    // Worker r's gradient; worker 0's push carries the pull. Pushed in
    // reverse rank order: the average must not follow arrival.
    std::vector<std::vector<float>> g(workers);
    for (int r = 0; r < workers; ++r)
      g[r] = {0.1f * (clock + 1) + 0.37f * r, -0.2f, 0.3f * (r + 1), 0.0f, 1.0f / (r + 3)};
    for (int r = workers - 1; r >= 0; --r)
      server.Handle("w" + std::to_string(r), r, Push(clock, r == 0 ? 1000 + clock : 0, g[r]), pb::Header());
    std::vector<float> avg(w0.size());
    for (size_t i = 0; i < avg.size(); ++i) {
      float sum = g[0][i];
      for (int r = 1; r < workers; ++r) sum += g[r][i];
      avg[i] = sum * (1.0f / static_cast<float>(workers));
    }
    ScalarStep(sgd, 0.1f, 1.0f, 1.0f, avg.data(), want.data(), hist.data(), want.size());
    versions.push_back(want);
    if (clock == 1) {
      // Clock 0's reply has gone: its buffer (the spare) is free again. Clock
      // 2 then writes into it; clock 3 needs a new one (1 and 2 are held).
      for (auto it = sink.replies.begin(); it != sink.replies.end(); ++it)
        if (it->header.op() == pb::PULL_REPLY && it->header.request_id() == 1000) {
          sink.replies.erase(it);
          break;
        }
    }
  }
  auto snap = server.Snapshot(0, 0);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->second, 4);
  EXPECT_TRUE(BitEqual(snap->first, want));
  // The replies of clocks 1, 2 and 3 are still held and show their own versions.
  std::vector<std::vector<float>> seen;
  for (const Message& m : sink.replies)
    if (m.header.op() == pb::PULL_REPLY) seen.emplace_back(m.payload[0].floats(), m.payload[0].floats() + w0.size());
  ASSERT_EQ(seen.size(), 3u);
  for (int v = 1; v <= 3; ++v) EXPECT_TRUE(BitEqual(seen[v - 1], versions[v])) << "reply of clock " << v;
}

}  // namespace
}  // namespace nereus

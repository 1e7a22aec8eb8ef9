// Unit tests of the client library's parts (worker/client/*.h) on their own,
// without servers: what the RequestTable, TensorRegistry, MessageBuilder and
// MergeProfiler promise in their headers.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "nereus/client.h"
#include "worker/client/merge_profiler.h"
#include "worker/client/message_builder.h"
#include "worker/client/request_table.h"
#include "worker/client/server_queues.h"
#include "worker/client/tensor_registry.h"

namespace nereus {
namespace {

Request MakeRequest(const StatePtr& state, const std::string& what) {
  Request r;
  r.state = state;
  r.what = what;
  return r;
}

TEST(RequestTableTest, IdsStartAtOneAndEachRequestIsTakenOnce) {
  RequestTable table;
  EXPECT_EQ(table.NextId(), 1u);
  EXPECT_EQ(table.NextId(), 2u);
  auto state = std::make_shared<Handle::State>(1);
  table.Add(7, MakeRequest(state, "PUSH of tensor \"w\" partition 0"));
  table.StampDispatch(7, 1234);
  table.StampDispatch(8, 99);  // Unknown: ignored.
  Request r;
  EXPECT_FALSE(table.Take(8, &r));
  ASSERT_TRUE(table.Take(7, &r));
  EXPECT_EQ(r.dispatch_us, 1234);
  EXPECT_EQ(r.what, "PUSH of tensor \"w\" partition 0");
  EXPECT_FALSE(table.Take(7, &r));
  EXPECT_TRUE(table.aborted().ok());
}

TEST(RequestTableTest, FailAllFailsEveryRequestAndLaterOnesAtOnce) {
  RequestTable table;
  auto a = std::make_shared<Handle::State>(2);
  auto b = std::make_shared<Handle::State>(1);
  table.Add(1, MakeRequest(a, "PUSH of tensor \"a\" partition 0"));
  table.Add(2, MakeRequest(a, "PUSH of tensor \"a\" partition 1"));
  table.Add(3, MakeRequest(b, "PULL of tensor \"b\" partition 0"));
  table.FailAll(UnavailableError("server 1 died"));
  table.FailAll(AbortedError("client destroyed"));  // The first cause is kept.
  EXPECT_EQ(table.aborted().message(), "server 1 died");
  const Status sa = MakeHandle(a).Wait();
  EXPECT_EQ(sa.code(), StatusCode::kUnavailable);
  EXPECT_EQ(sa.message(), "PUSH of tensor \"a\" partition 0: server 1 died");
  EXPECT_EQ(MakeHandle(b).Wait().message(), "PULL of tensor \"b\" partition 0: server 1 died");
  Request r;
  EXPECT_FALSE(table.Take(3, &r));
  // Registered after the abort: no reply will come, so it fails at once.
  auto late = std::make_shared<Handle::State>(1);
  table.Add(4, MakeRequest(late, "PULL of tensor \"c\" partition 2"));
  EXPECT_TRUE(MakeHandle(late).done());
  EXPECT_EQ(MakeHandle(late).Wait().message(), "PULL of tensor \"c\" partition 2: server 1 died");
  EXPECT_FALSE(table.Take(4, &r));
}

TensorSpec Spec(const std::string& name, std::vector<int64_t> shape) {
  TensorSpec s;
  s.name = name;
  s.shape = std::move(shape);
  return s;
}

// HybComm's rates (ClientOptions::sfb_*): 0 means measured; a negative or
// NaN rate is refused before anything connects.
TEST(ClientOptionsTest, NegativeOrNanHybCommRatesAreRefusedNamingTheFlag) {
  ClientOptions o;
  o.coordinator = "127.0.0.1:1";  // Never reached.
  o.sfb_rebuild_gflops = -1;
  auto bad = Client::Connect(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--sfb_rebuild_gflops must be >= 0 (0: measured at Init), got -1.000000");
  o.sfb_rebuild_gflops = 0;
  o.sfb_link_gbit = std::nan("");
  auto nan = Client::Connect(o);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("--sfb_link_gbit must be >= 0"), std::string::npos) << nan.status();
}

// The trials' trust ratio: 0 (try every layer) or more than 1.
TEST(ClientOptionsTest, ATrustRatioOfOneOrLessIsRefused) {
  ClientOptions o;
  o.coordinator = "127.0.0.1:1";  // Never reached.
  for (double r : {1.0, 0.5, -3.0}) {
    o.sfb_trial_trust_ratio = r;
    auto bad = Client::Connect(o);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().message(),
              "--sfb_trial_trust_ratio must be 0 (try every layer) or more than 1, got " + std::to_string(r));
  }
}

// An applier that is never called: the registry only compares them.
class UnusedApplier : public FactorApplier {
 public:
  Status ApplyFactors(int, int64_t, const std::vector<RankFactors>&) override { return Status::OK(); }
  std::string rebuild_on() const override { return "nowhere"; }
  double rebuild_gflops() const override { return 0; }
  double update_gbytes() const override { return 0; }
};

TEST(TensorRegistryTest, EveryTensorWithFactorsHasTheSameApplier) {
  TensorRegistry reg;
  UnusedApplier a, b;
  float data[6], diff[6], left[4], right[6];
  auto with_factors = [&](const std::string& name, FactorApplier* applier) {
    TensorSpec s = Spec(name, {2, 3});
    s.data = data;
    s.diff = diff;
    s.factor_rows = 2;
    s.factor_left = left;
    s.factor_right = right;
    s.factor_applier = applier;
    return s;
  };
  TensorSpec lone = Spec("lone", {2});
  lone.factor_applier = &a;
  EXPECT_EQ(reg.Register(lone).status().message(),
            "tensor \"lone\": a factor_applier without sufficient factors (factor_rows, factor_left, factor_right)");
  EXPECT_EQ(*reg.Register(with_factors("fc1", &a)), 0);
  EXPECT_EQ(*reg.Register(with_factors("fc2", &a)), 1);
  EXPECT_EQ(reg.Register(with_factors("fc3", &b)).status().message(),
            "tensor \"fc3\" has another factor_applier than tensor \"fc1\": every tensor with factors has the "
            "same one, or none");
  EXPECT_EQ(reg.Register(with_factors("fc4", nullptr)).status().message(),
            "tensor \"fc4\" has another factor_applier than tensor \"fc1\": every tensor with factors has the "
            "same one, or none");
  EXPECT_EQ(*reg.Register(Spec("bias", {3})), 2);  // Without factors: no applier needed.
}

TEST(TensorRegistryTest, RegisterRejectsBadSpecsNamingTheTensor) {
  TensorRegistry reg;
  EXPECT_EQ(reg.Register(Spec("a", {})).status().message(), "tensor \"a\" has no shape");
  EXPECT_EQ(reg.Register(Spec("b", {3, 0})).status().message(), "tensor \"b\" has a non-positive dimension");
  TensorSpec half = Spec("c", {2});
  float data[2];
  half.data = data;
  EXPECT_EQ(reg.Register(half).status().message(), "tensor \"c\": give both data and diff buffers, or neither");
  EXPECT_EQ(*reg.Register(Spec("d", {2, 3})), 0);
  EXPECT_EQ(*reg.Register(Spec("e", {5})), 1);
  EXPECT_EQ(reg.CheckTensor(0, "PUSH").message(), "PUSH before Init");
  EXPECT_EQ(reg.Freeze(1, 16, 2).message(), "Init got 1 initial values for 2 registered tensors");
  EXPECT_FALSE(reg.frozen());
  ASSERT_TRUE(reg.Freeze(2, 16, 2).ok());
  EXPECT_TRUE(reg.frozen());
  EXPECT_EQ(reg.Freeze(2, 16, 2).message(), "Init called twice");
  EXPECT_EQ(reg.Register(Spec("f", {1})).status().message(), "RegisterTensor(\"f\") after Init");
  EXPECT_TRUE(reg.CheckTensor(1, "PULL").ok());
  EXPECT_EQ(reg.CheckTensor(2, "PULL").code(), StatusCode::kNotFound);
  EXPECT_EQ(reg.CheckTensor(-1, "PULL").message(), "unknown tensor id -1");
  EXPECT_EQ(reg.elements(0), 6u);
  // 6 floats in partitions of 16 bytes (4 floats): 4 + 2.
  ASSERT_EQ(reg.partitions(0).size(), 2u);
  EXPECT_EQ(reg.partitions(0)[0].length, 4u);
  EXPECT_EQ(reg.partitions(0)[1].offset, 4u);
  std::vector<PartitionRef> refs = reg.Refs(0);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[1].tensor, 0);
  EXPECT_EQ(refs[1].placement, &reg.partitions(0)[1]);
}

TEST(TensorRegistryTest, DigestDependsOnNamesShapesAndMultipliers) {
  auto digest = [](std::vector<TensorSpec> specs) {
    TensorRegistry reg;
    for (const auto& s : specs) EXPECT_TRUE(reg.Register(s).ok());
    EXPECT_TRUE(reg.Freeze(specs.size(), 16, 1).ok());
    return reg.Digest();
  };
  const uint64_t base = digest({Spec("w", {2, 3}), Spec("b", {3})});
  EXPECT_EQ(digest({Spec("w", {2, 3}), Spec("b", {3})}), base);
  EXPECT_NE(digest({Spec("w", {3, 2}), Spec("b", {3})}), base);
  EXPECT_NE(digest({Spec("v", {2, 3}), Spec("b", {3})}), base);
  TensorSpec lr = Spec("b", {3});
  lr.lr_mult = 2.0f;
  EXPECT_NE(digest({Spec("w", {2, 3}), lr}), base);
}

// Two tensors over two servers in partitions of 8 bytes (2 floats).
struct BuilderFixture : public ::testing::Test {
  void SetUp() override {
    for (int t = 0; t < 2; ++t) {
      TensorSpec s = Spec("t" + std::to_string(t), {t == 0 ? 5 : 3});
      s.layer = t;
      s.data = data[t];
      s.diff = grad[t];
      ASSERT_TRUE(reg.Register(s).ok());
    }
    ASSERT_TRUE(reg.Freeze(2, 8, 2).ok());
  }
  ClientOptions Options(Schedule schedule) {
    ClientOptions o;
    o.schedule = schedule;
    o.streams = 2;
    return o;
  }
  // The pushes of every partition of both tensors for clock 7 (base priority
  // 1 << 32), merged per server or not, each carrying a pull of clock 8
  // that completes `pull`; the acks complete `push`.
  std::vector<QueuedMessage> PushAll(MessageBuilder& builder, bool merge) {
    std::vector<PartitionRef> refs = reg.Refs(0);
    for (const PartitionRef& r : reg.Refs(1)) refs.push_back(r);
    push = std::make_shared<Handle::State>(1);
    pull = std::make_shared<Handle::State>(static_cast<int>(refs.size()));
    std::vector<QueuedMessage> out;
    builder.BuildPushes(
        refs, {grad[0], grad[1]}, {0, 1}, /*clock=*/7, [this](int) { return pull; }, push,
        std::make_shared<SendGuard>(push), /*base_priority=*/uint64_t{1} << 32, &out, merge);
    return out;
  }
  StatePtr push, pull;
  float data[2][5] = {};
  float grad[2][5] = {};
  TensorRegistry reg;
  RequestTable requests;
};

TEST_F(BuilderFixture, PushesCarryEveryPartitionOnceAndRegisterTheirAcksAndPulls) {
  for (bool merge : {false, true}) {
    SCOPED_TRACE(merge ? "merged" : "one per partition");
    MessageBuilder builder(Options(Schedule::kFull), &reg, &requests);
    const std::vector<QueuedMessage> out = PushAll(builder, merge);
    std::set<std::pair<int, int>> seen;
    for (const QueuedMessage& m : out) {
      const pb::Header& h = m.msg.header;
      EXPECT_EQ(h.op(), pb::PUSH);
      EXPECT_EQ(h.request_id(), m.request_id);
      std::vector<pb::Part> parts(h.parts().begin(), h.parts().end());
      if (parts.empty()) {  // A single partition: the plain header fields.
        pb::Part p;
        p.set_tensor(h.tensor());
        p.set_partition(h.partition());
        p.set_clock(h.clock());
        p.set_pull_request_id(h.pull_request_id());
        EXPECT_EQ(h.priority(), h.tensor() * 1000 + h.partition());
        parts.push_back(p);
      } else {
        EXPECT_GT(parts.size(), 1u);
      }
      EXPECT_EQ(m.msg.payload.size(), parts.size());
      EXPECT_LE(m.bytes, 8u);  // Merged up to partition_bytes at most.
      uint64_t bytes = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        const pb::Part& p = parts[i];
        EXPECT_EQ(p.clock(), 7);
        const PartitionPlacement& c = reg.partitions(p.tensor())[p.partition()];
        EXPECT_EQ(c.server, m.server);
        EXPECT_TRUE(seen.insert({p.tensor(), p.partition()}).second);
        EXPECT_EQ(m.msg.payload[i].data(), static_cast<const void*>(grad[p.tensor()] + c.offset));
        bytes += m.msg.payload[i].size();
        Request pr;  // The pull riding on this partition.
        ASSERT_TRUE(requests.Take(p.pull_request_id(), &pr));
        EXPECT_EQ(pr.kind, Request::Kind::kPull);
        EXPECT_EQ(pr.dst, data[p.tensor()] + c.offset);
        EXPECT_EQ(pr.length, c.length);
        EXPECT_EQ(pr.clock, 8);
      }
      EXPECT_EQ(bytes, m.bytes);
      Request ack;
      ASSERT_TRUE(requests.Take(m.request_id, &ack));
      EXPECT_EQ(ack.kind, Request::Kind::kAck);
      EXPECT_EQ(ack.credit, m.bytes);
      EXPECT_EQ(ack.piggyback.size(), parts.size());
      EXPECT_GE(m.priority, uint64_t{1} << 32);
    }
    // 5 floats -> partitions of 2, 2, 1; 3 floats -> 2, 1.
    EXPECT_EQ(seen.size(), 5u);
    // Merging joins the two 4-byte partitions, which share a server (ShardMap
    // places the 8-byte ones first, then fills the lighter server); the
    // 8-byte partitions fill a message each.
    int merged = 0;
    for (const QueuedMessage& m : out) merged += m.msg.header.parts_size() > 1;
    EXPECT_EQ(out.size(), merge ? 4u : 5u);
    EXPECT_EQ(merged, merge ? 1 : 0);
  }
}

TEST_F(BuilderFixture, PullsWithoutPrioritiesKeepArrivalOrderOnOneStream) {
  MessageBuilder builder(Options(Schedule::kWfbp), &reg, &requests);
  auto pull = std::make_shared<Handle::State>(3);
  std::vector<QueuedMessage> out;
  builder.BuildPulls(reg.Refs(0), data[0], /*clock=*/3, pull, uint64_t{5} << 32, &out);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].priority, 0u);
    EXPECT_EQ(out[i].stream, 0);
    EXPECT_EQ(out[i].bytes, 0u);  // Pull requests take no credit.
    EXPECT_EQ(out[i].msg.header.op(), pb::PULL);
    EXPECT_EQ(out[i].msg.header.partition(), static_cast<int>(i));
    EXPECT_EQ(out[i].msg.header.clock(), 3);
    Request r;
    ASSERT_TRUE(requests.Take(out[i].request_id, &r));
    EXPECT_EQ(r.dst, data[0] + reg.partitions(0)[i].offset);
    EXPECT_EQ(r.credit, 0u);
  }
  MessageBuilder full(Options(Schedule::kFull), &reg, &requests);
  out.clear();
  full.BuildPulls(reg.Refs(0), data[0], 3, pull, uint64_t{5} << 32, &out);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].priority, (uint64_t{5} << 32) + i);  // (layer, partition).
    EXPECT_EQ(out[i].stream, static_cast<int>(i % 2));
  }
}

TEST_F(BuilderFixture, CoalescedUnitsKeepEachUnitsRequestIdPartsAndFramesInOrder) {
  MessageBuilder builder(Options(Schedule::kFull), &reg, &requests);
  std::vector<QueuedMessage> out = PushAll(builder, /*merge=*/true);
  // The units of the server that holds the merged one, plus a plain one.
  std::vector<QueuedMessage> units;
  int server = -1;
  for (const QueuedMessage& m : out)
    if (m.msg.header.parts_size() > 1) server = m.server;
  ASSERT_GE(server, 0);
  for (QueuedMessage& m : out)
    if (m.server == server) units.push_back(std::move(m));
  ASSERT_GE(units.size(), 2u);
  std::vector<std::pair<uint64_t, const void*>> expect;  // (request id, frame) in order.
  uint64_t bytes = 0;
  for (const QueuedMessage& u : units) {
    EXPECT_EQ(u.batch_bytes, u.bytes);  // A push adds its payload to a batch.
    bytes += u.bytes;
    for (const Buffer& b : u.msg.payload) expect.emplace_back(u.request_id, b.data());
  }
  const QueuedMessage batch = CoalesceUnits(std::move(units));
  const pb::Header& h = batch.msg.header;
  EXPECT_EQ(h.op(), pb::PUSH);
  EXPECT_EQ(h.request_id(), 0u);
  EXPECT_EQ(batch.server, server);
  EXPECT_EQ(batch.bytes, bytes);
  ASSERT_EQ(h.parts_size(), static_cast<int>(expect.size()));
  ASSERT_EQ(batch.msg.payload.size(), expect.size());
  for (int i = 0; i < h.parts_size(); ++i) {
    EXPECT_EQ(h.parts(i).request_id(), expect[i].first) << i;
    EXPECT_EQ(batch.msg.payload[i].data(), expect[i].second) << i;  // Still zero-copy.
    EXPECT_EQ(h.parts(i).payload_bytes(), batch.msg.payload[i].size());
    EXPECT_EQ(h.parts(i).clock(), 7);
    EXPECT_NE(h.parts(i).pull_request_id(), 0u);
  }

  // Pulls: one part per partition, no payload; a pull adds its reply's size.
  std::vector<QueuedMessage> pulls;
  builder.BuildPulls(reg.Refs(0), data[0], 3, pull, 0, &pulls);
  std::vector<QueuedMessage> to0;
  for (QueuedMessage& m : pulls) {
    EXPECT_EQ(m.batch_bytes, reg.partitions(0)[m.msg.header.partition()].length * sizeof(float));
    if (m.server == pulls[0].server) to0.push_back(std::move(m));
  }
  std::vector<uint64_t> ids;
  for (const QueuedMessage& m : to0) ids.push_back(m.request_id);
  const QueuedMessage pulled = CoalesceUnits(std::move(to0));
  EXPECT_EQ(pulled.msg.header.op(), pb::PULL);
  EXPECT_TRUE(pulled.msg.payload.empty());
  ASSERT_EQ(pulled.msg.header.parts_size(), static_cast<int>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(pulled.msg.header.parts(i).request_id(), ids[i]);
    EXPECT_EQ(pulled.msg.header.parts(i).clock(), 3);
    EXPECT_EQ(pulled.msg.header.parts(i).tensor(), 0);
  }
}

TEST(MergeProfilerTest, OneGroupPerLayerUntilKClocksAreTimed) {
  MergeProfiler off(/*enabled=*/false, 3);
  off.Reset(3);
  EXPECT_FALSE(off.profiling());
  EXPECT_FALSE(off.WantsPlan(100));
  MergeProfiler p(/*enabled=*/true, 2);
  p.Reset(3);
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(p.group_of(l).first, l);
    EXPECT_EQ(p.group_of(l).last, l);
  }
  EXPECT_TRUE(p.profiling());
  EXPECT_FALSE(p.WantsPlan(1));
  EXPECT_FALSE(p.WantsPlan(2));
  EXPECT_TRUE(p.WantsPlan(3));
  // A link where one message costs far more than the bytes: merging pays.
  p.set_link(LinkModel{1e-3, 1e-12});
  for (int64_t clock = 1; clock <= 2; ++clock) {
    p.RecordReady(clock, 2, 1000);
    p.RecordReady(clock, 1, 1010);
    p.RecordReady(clock, 0, 1020);
    p.RecordWaitEnd(clock, 990);
  }
  p.Plan({400, 400, 400}, /*rank=*/0);
  EXPECT_FALSE(p.profiling());
  EXPECT_FALSE(p.WantsPlan(4));
  // Every layer in exactly one group, groups in layer order.
  int next = 0;
  for (int l = 0; l < 3; ++l) {
    const MergeGroup& g = p.group_of(l);
    EXPECT_LE(g.first, l);
    EXPECT_GE(g.last, l);
    if (g.first == l) {
      EXPECT_EQ(g.first, next);
      next = g.last + 1;
    }
  }
  EXPECT_EQ(next, 3);
  EXPECT_EQ(p.group_of(2).first, 0) << "10 us of backward per layer against 1 ms per message: one group";
}

}  // namespace
}  // namespace nereus

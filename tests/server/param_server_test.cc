// ParamServer logic in-process: replies are captured instead of sent.
#include "server/param_server.h"

#include <gtest/gtest.h>

#include "common/sgd.h"

namespace nereus {
namespace {

struct Captured {
  Endpoint to;
  Message msg;
};

class CaptureSink : public ReplySink {
 public:
  void Reply(const Endpoint& to, Message msg) override { replies.push_back({to, std::move(msg)}); }
  std::vector<Captured> replies;
};

pb::SgdConfig Sgd() {
  pb::SgdConfig c;
  c.set_base_lr(0.1f);
  c.set_lr_policy("fixed");
  c.set_momentum(0.5f);
  c.set_weight_decay(0.0f);
  return c;
}

class ParamServerTest : public ::testing::Test {
 protected:
  void Make(pb::Consistency consistency, int workers, int staleness = 0) {
    ParamServerOptions o;
    o.num_workers = workers;
    o.consistency = consistency;
    o.staleness = staleness;
    server_ = std::make_unique<ParamServer>(o, &sink_);
    // Tensor 0, chunk 0: 4 floats, initial values 1, 2, 3, 4.
    Message m = Floats(pb::INIT_CHUNK, 0, {1, 2, 3, 4});
    auto* meta = m.header.mutable_chunk_meta();
    meta->set_tensor(0);
    meta->set_chunk(0);
    meta->set_length(4);
    meta->set_lr_mult(1);
    meta->set_decay_mult(1);
    *m.header.mutable_sgd() = Sgd();
    Send(std::move(m), 0);
    ASSERT_EQ(Last().header.op(), pb::INIT_ACK);
  }
  Message Floats(pb::Op op, int64_t clock, std::vector<float> v) {
    Message m;
    m.header.set_op(op);
    m.header.set_request_id(++id_);
    m.header.set_clock(clock);
    m.header.set_dtype(pb::FLOAT32);
    auto p = std::make_shared<std::vector<float>>(std::move(v));
    m.payload.push_back(Buffer::Of(p));
    m.header.set_payload_bytes(m.payload_bytes());
    return m;
  }
  Message Pull(int64_t clock) {
    Message m;
    m.header.set_op(pb::PULL);
    m.header.set_request_id(++id_);
    m.header.set_clock(clock);
    return m;
  }
  void Send(Message m, int worker) {
    pb::Header partial = m.header;
    server_->Handle("w" + std::to_string(worker), worker, std::move(m), partial);
  }
  // A second chunk: tensor 1, chunk 0, 2 floats (10, 20).
  void InitSecond() {
    Message m = Floats(pb::INIT_CHUNK, 0, {10, 20});
    m.header.set_tensor(1);
    auto* meta = m.header.mutable_chunk_meta();
    meta->set_tensor(1);
    meta->set_chunk(0);
    meta->set_length(2);
    meta->set_lr_mult(1);
    meta->set_decay_mult(1);
    *m.header.mutable_sgd() = Sgd();
    Send(std::move(m), 0);
    ASSERT_EQ(Last().header.op(), pb::INIT_ACK);
  }
  // A batched PUSH (what CoalesceUnits builds): one part per gradient, each
  // with its unit's request id (ids 1000 + i) and a pull of clock + 1 riding
  // on it (ids 2000 + i).
  Message BatchPush(int64_t clock, const std::vector<std::pair<int, std::vector<float>>>& grads) {
    Message m;
    m.header.set_op(pb::PUSH);
    m.header.set_dtype(pb::FLOAT32);
    for (size_t i = 0; i < grads.size(); ++i) {
      auto v = std::make_shared<std::vector<float>>(grads[i].second);
      m.payload.push_back(Buffer::Of(v));
      pb::Part* p = m.header.add_parts();
      p->set_tensor(grads[i].first);
      p->set_clock(clock);
      p->set_payload_bytes(v->size() * sizeof(float));
      p->set_request_id(1000 + i);
      p->set_pull_request_id(2000 + i);
    }
    m.header.set_payload_bytes(m.payload_bytes());
    return m;
  }
  Message BatchPull(int64_t clock, const std::vector<int>& tensors) {
    Message m;
    m.header.set_op(pb::PULL);
    for (size_t i = 0; i < tensors.size(); ++i) {
      pb::Part* p = m.header.add_parts();
      p->set_tensor(tensors[i]);
      p->set_clock(clock);
      p->set_request_id(3000 + i);
    }
    return m;
  }
  std::vector<uint64_t> PartIds(const Message& m) {
    std::vector<uint64_t> ids;
    for (const pb::Part& p : m.header.parts()) ids.push_back(p.request_id());
    return ids;
  }
  const Message& Last() { return sink_.replies.back().msg; }
  std::vector<float> Weights() { return server_->Snapshot(0, 0).value().first; }
  int64_t Version() { return server_->Snapshot(0, 0).value().second; }

  CaptureSink sink_;
  std::unique_ptr<ParamServer> server_;
  uint64_t id_ = 0;
};

TEST_F(ParamServerTest, BspAppliesOnceAllWorkersPushedAndAnswersWaitingPull) {
  Make(pb::BSP, 2);
  Send(Pull(1), 0);  // Must wait: no update yet.
  EXPECT_EQ(Last().header.op(), pb::INIT_ACK);
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0);
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  EXPECT_EQ(Version(), 0);
  const size_t before = sink_.replies.size();
  Send(Floats(pb::PUSH, 0, {3, 3, 3, 3}), 1);
  // PUSH_ACK, then the waiting pull answered at once.
  ASSERT_EQ(sink_.replies.size(), before + 2);
  const Message& reply = Last();
  EXPECT_EQ(reply.header.op(), pb::PULL_REPLY);
  EXPECT_EQ(sink_.replies.back().to, "w0");
  EXPECT_EQ(reply.header.clock(), 1);
  // avg = 2; h = 0.1 * 2 = 0.2; w -= 0.2.
  const float* w = reply.payload[0].floats();
  EXPECT_FLOAT_EQ(w[0], 0.8f);
  EXPECT_FLOAT_EQ(w[3], 3.8f);
  EXPECT_EQ(Version(), 1);
}

TEST_F(ParamServerTest, AverageDoesNotDependOnArrivalOrder) {
  const std::vector<float> g0 = {1e8f, 1, 0.1f, 3}, g1 = {1, 2, 0.2f, 4}, g2 = {-1e8f, 3, 0.3f, 5};
  std::vector<float> first;
  for (int order = 0; order < 2; ++order) {
    sink_.replies.clear();
    Make(pb::BSP, 3);
    if (order == 0) {
      Send(Floats(pb::PUSH, 0, g0), 0);
      Send(Floats(pb::PUSH, 0, g1), 1);
      Send(Floats(pb::PUSH, 0, g2), 2);
      first = Weights();
    } else {
      Send(Floats(pb::PUSH, 0, g2), 2);
      Send(Floats(pb::PUSH, 0, g0), 0);
      Send(Floats(pb::PUSH, 0, g1), 1);
      EXPECT_EQ(Weights(), first);  // Bitwise.
    }
  }
  // And equal to averaging in rank order by hand.
  std::vector<float> w = {1, 2, 3, 4}, h(4, 0), avg(4);
  const float* srcs[3] = {g0.data(), g1.data(), g2.data()};
  AverageInOrder(srcs, 3, avg.data(), 4);
  SgdStep(Sgd(), 0.1f, 1, 1, avg.data(), w.data(), h.data(), 4);
  EXPECT_EQ(w, first);
}

TEST_F(ParamServerTest, PullReplySharesWeightsAndUpdateCopiesOnWrite) {
  Make(pb::BSP, 1);
  Send(Pull(0), 0);
  Buffer sent = Last().payload[0];  // A reply "still in flight".
  EXPECT_EQ(sent.floats()[0], 1.0f);
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0);
  EXPECT_EQ(sent.floats()[0], 1.0f) << "an in-flight reply must not see the next update";
  EXPECT_FLOAT_EQ(Weights()[0], 0.9f);
}

TEST_F(ParamServerTest, SspPullWaitsOnlyBeyondStaleness) {
  Make(pb::SSP, 2, /*staleness=*/2);
  Send(Pull(2), 0);  // needs version >= 0: answered
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
  EXPECT_EQ(Last().header.clock(), 0);
  const size_t n = sink_.replies.size();
  Send(Pull(3), 0);  // needs version >= 1: waits
  EXPECT_EQ(sink_.replies.size(), n);
  // Worker 0 runs ahead: clocks 0, 1, 2 pushed; worker 1 only clock 0.
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0);
  Send(Floats(pb::PUSH, 1, {1, 1, 1, 1}), 0);
  Send(Floats(pb::PUSH, 2, {1, 1, 1, 1}), 0);
  EXPECT_EQ(Version(), 0);
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 1);
  EXPECT_EQ(Version(), 1);  // Clock 1 still lacks worker 1.
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
  EXPECT_EQ(Last().header.clock(), 1);
}

TEST_F(ParamServerTest, AsyncAppliesEachPushScaledByWorkers) {
  Make(pb::ASYNC, 2);
  Send(Floats(pb::PUSH, 0, {2, 2, 2, 2}), 1);
  EXPECT_EQ(Version(), 1);
  EXPECT_FLOAT_EQ(Weights()[0], 0.9f);  // 0.1 * (2 / 2)
  Send(Pull(100), 0);                   // Never waits.
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
}

TEST_F(ParamServerTest, BadRequestsGetErrorsAndLeaveParametersUnchanged) {
  Make(pb::BSP, 2);
  const std::vector<float> before = Weights();
  struct Case {
    Message msg;
    int worker;
    std::string expect;
  };
  std::vector<Case> cases;
  {
    Message m = Floats(pb::PUSH, 0, {1, 1, 1, 1});
    m.header.set_tensor(9);
    cases.push_back({std::move(m), 0, "unknown tensor 9 chunk 0"});
  }
  {
    Message m = Floats(pb::PUSH, 0, {1, 1, 1, 1});
    m.header.set_dtype(pb::DTYPE_UNSPECIFIED);
    cases.push_back({std::move(m), 0, "unsupported dtype DTYPE_UNSPECIFIED for PUSH"});
  }
  cases.push_back({Floats(pb::PUSH, 0, {1, 1, 1}), 0, "holds 4 floats (16 bytes) but the payload has 12 bytes"});
  cases.push_back({Floats(pb::PUSH, 0, {1, 1, 1, 1}), -1, "which is not a worker of this job"});
  cases.push_back({Floats(pb::PUSH, -1, {1, 1, 1, 1}), 0, "negative clock"});
  cases.push_back({Floats(pb::PUSH, 500, {1, 1, 1, 1}), 0, "too far ahead"});
  {
    Message m = Pull(0);
    m.header.set_op(pb::BARRIER);
    cases.push_back({std::move(m), 0, "server cannot handle op BARRIER"});
  }
  for (auto& c : cases) {
    const uint64_t id = c.msg.header.request_id();
    Send(std::move(c.msg), c.worker);
    const Message& r = Last();
    ASSERT_EQ(r.header.op(), pb::ERROR) << c.expect;
    EXPECT_EQ(r.header.request_id(), id);
    EXPECT_NE(r.header.error().find(c.expect), std::string::npos) << r.header.error();
  }
  // A decode failure reported by the transport.
  pb::Header partial;
  partial.set_request_id(77);
  partial.set_op(pb::PUSH);
  server_->Handle("w0", 0, DataLossError("malformed message: header says payload_bytes=16 but ..."), partial);
  EXPECT_EQ(Last().header.op(), pb::ERROR);
  EXPECT_EQ(Last().header.request_id(), 77u);
  EXPECT_EQ(Last().header.error_op(), pb::PUSH);
  // Duplicate push from the same worker for the same clock.
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0);
  Send(Floats(pb::PUSH, 0, {5, 5, 5, 5}), 0);
  EXPECT_NE(Last().header.error().find("duplicate PUSH from worker 0 for clock 0"), std::string::npos);
  EXPECT_EQ(Weights(), before);
  EXPECT_EQ(Version(), 0);
  // The server still works: worker 1 completes clock 0 with the first push.
  Send(Floats(pb::PUSH, 0, {3, 3, 3, 3}), 1);
  EXPECT_EQ(Version(), 1);
  EXPECT_FLOAT_EQ(Weights()[0], 0.8f);
  // A stale push for an applied clock is refused.
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 1);
  EXPECT_NE(Last().header.error().find("stale PUSH for clock 0"), std::string::npos);
}

TEST_F(ParamServerTest, BatchIsAckedOnceAndItsPullsAnsweredInOneReply) {
  Make(pb::BSP, 2);
  InitSecond();
  Send(BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}}), 0);
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  EXPECT_EQ(Last().header.request_id(), 0u);
  EXPECT_EQ(PartIds(Last()), (std::vector<uint64_t>{1000, 1001}));
  const size_t before = sink_.replies.size();
  Send(BatchPush(0, {{0, {3, 3, 3, 3}}, {1, {4, 4}}}), 1);
  // One PUSH_ACK for worker 1, one PULL_REPLY for each worker with both chunks.
  ASSERT_EQ(sink_.replies.size(), before + 3);
  for (size_t i = before + 1; i < sink_.replies.size(); ++i) {
    const Message& r = sink_.replies[i].msg;
    ASSERT_EQ(r.header.op(), pb::PULL_REPLY);
    EXPECT_EQ(PartIds(r), (std::vector<uint64_t>{2000, 2001}));
    ASSERT_EQ(r.payload.size(), 2u);
    EXPECT_FLOAT_EQ(r.payload[0].floats()[0], 0.8f);   // 1 - 0.1 * avg(1, 3)
    EXPECT_FLOAT_EQ(r.payload[1].floats()[1], 19.7f);  // 20 - 0.1 * avg(2, 4)
  }
  // A batched pull of what exists: one reply carrying every chunk.
  Send(BatchPull(1, {1, 0}), 0);
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
  EXPECT_EQ(PartIds(Last()), (std::vector<uint64_t>{3000, 3001}));
  EXPECT_EQ(Last().payload[0].size(), 2 * sizeof(float));
  // A batched pull of a version not there yet waits, like a plain one.
  const size_t waiting = sink_.replies.size();
  Send(BatchPull(2, {0, 1}), 0);
  EXPECT_EQ(sink_.replies.size(), waiting);
}

TEST_F(ParamServerTest, MalformedBatchesAreRefusedWholeAndChangeNothing) {
  Make(pb::BSP, 2);
  InitSecond();
  const std::vector<float> before = Weights();
  struct Case {
    Message msg;
    std::string expect;
    std::vector<uint64_t> ids;  // The units the ERROR must name.
  };
  std::vector<Case> cases;
  {  // Lying count: two parts, one frame.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}});
    m.payload.pop_back();
    m.header.set_payload_bytes(m.payload_bytes());
    cases.push_back({std::move(m), "batched PUSH has 2 parts but 1 payload frames", {1000, 1001}});
  }
  {  // Lying size: the part says more bytes than its frame holds.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}});
    m.header.mutable_parts(1)->set_payload_bytes(16);
    cases.push_back({std::move(m), "batched PUSH part 1 says 16 bytes but its frame has 8", {1000, 1001}});
  }
  {  // Well-formed, but one part has the other chunk's size: nothing is stored.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2, 2, 2}}});
    cases.push_back({std::move(m), "batched PUSH part 1: wrong shape", {1000, 1001}});
  }
  {  // The same chunk and clock twice in one message.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {0, {5, 5, 5, 5}}});
    cases.push_back({std::move(m), "batched PUSH part 1 repeats tensor 0 chunk 0 for clock 0", {1000, 1001}});
  }
  {  // Some parts with a request id, some without.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}});
    m.header.mutable_parts(0)->set_request_id(0);
    cases.push_back({std::move(m), "batched PUSH with 2 parts, only 1 of which carry a request id", {1001}});
  }
  {  // An unknown chunk in a batched pull.
    Message m = BatchPull(0, {0, 7});
    cases.push_back({std::move(m), "batched PULL part 1: unknown tensor 7 chunk 0", {3000, 3001}});
  }
  {  // A pull part that claims a payload.
    Message m = BatchPull(0, {0, 1});
    m.header.mutable_parts(0)->set_payload_bytes(16);
    cases.push_back({std::move(m), "batched PULL part 0 says 16 payload bytes", {3000, 3001}});
  }
  {  // Pull parts without request ids.
    Message m = BatchPull(0, {0, 1});
    for (auto& p : *m.header.mutable_parts()) p.set_request_id(0);
    cases.push_back({std::move(m), "PULL with 2 parts and no request ids", {}});
  }
  for (auto& c : cases) {
    const size_t n = sink_.replies.size();
    Send(std::move(c.msg), 0);
    ASSERT_EQ(sink_.replies.size(), n + 1) << c.expect;  // Only the ERROR: no ack, no weights.
    const Message& r = Last();
    ASSERT_EQ(r.header.op(), pb::ERROR) << c.expect;
    EXPECT_NE(r.header.error().find(c.expect), std::string::npos) << r.header.error();
    EXPECT_EQ(PartIds(r), c.ids) << c.expect;
  }
  EXPECT_EQ(Weights(), before);
  EXPECT_EQ(Version(), 0);
  EXPECT_EQ(server_->Snapshot(1, 0).value().second, 0);
  // Nothing was stored: both workers' real pushes complete clock 0 exactly once.
  Send(BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}}), 0);
  Send(BatchPush(0, {{0, {3, 3, 3, 3}}, {1, {4, 4}}}), 1);
  EXPECT_EQ(Version(), 1);
  EXPECT_FLOAT_EQ(Weights()[0], 0.8f);
  const std::vector<float> second = server_->Snapshot(1, 0).value().first;
  EXPECT_FLOAT_EQ(second[0], 9.7f);  // 10 - 0.1 * avg(2, 4)
  EXPECT_FLOAT_EQ(second[1], 19.7f);
}

TEST_F(ParamServerTest, ReinitWithOtherLayoutIsRefused) {
  Make(pb::BSP, 1);
  Message m = Floats(pb::INIT_CHUNK, 0, {1, 2, 3, 4});
  auto* meta = m.header.mutable_chunk_meta();
  meta->set_length(4);
  meta->set_lr_mult(2);
  *m.header.mutable_sgd() = Sgd();
  Send(std::move(m), 0);
  EXPECT_EQ(Last().header.op(), pb::ERROR);
  EXPECT_NE(Last().header.error().find("already initialized with another layout"), std::string::npos);
}

}  // namespace
}  // namespace nereus

// ParamServer logic in-process: replies are captured instead of sent.
#include "server/param_server.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>

#include "common/update/sgd.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"

namespace nereus {
namespace {

using test::Gate;

// With apply threads, Reply() comes from the pool's threads, one at a time
// (under the server's lock); the test reads `replies` after WaitIdle().
using test::CaptureSink;

// Every test runs with the updates on the Handle() thread (0) and on a pool
// of 3 threads, every update through the pool (inline_apply_bytes 0): the
// replies, versions and weights must be the same. Send() waits for the
// updates it started, so the tests read the replies as they would inline.
class ParamServerTest : public ::testing::TestWithParam<int> {
 protected:
  void Make(pb::Consistency consistency, int workers, int staleness = 0,
            const pb::SgdConfig& sgd = test::FixedMomentumSgd(), std::vector<std::vector<int>> host_groups = {}) {
    ParamServerOptions o;
    o.host_groups = std::move(host_groups);
    o.num_workers = workers;
    o.consistency = consistency;
    o.staleness = staleness;
    o.apply_threads = GetParam();
    o.inline_apply_bytes = 0;
    server_.reset();  // Its pool's threads reply into sink_.
    server_ = std::make_unique<ParamServer>(o, &sink_);
    // Tensor 0, partition 0: 4 floats, initial values 1, 2, 3, 4.
    Send(test::InitPartitionMessage(++id_, 0, {1, 2, 3, 4}, sgd), 0);
    ASSERT_EQ(Last().header.op(), pb::INIT_ACK);
  }
  // Make(pb::BSP, 2), then clock 0 applied (pushes of 1 and 3: avg 2,
  // h = 0.2, w = (0.8, 1.8, 2.8, 3.8)), at version 1.
  void MakeBspPastClock0() {
    Make(pb::BSP, 2);
    Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0);
    Send(Floats(pb::PUSH, 0, {3, 3, 3, 3}), 1);
    ASSERT_EQ(Version(), 1);
  }
  // A request the server must refuse: `msg` from `worker`, answered with an
  // ERROR whose text holds `expect`.
  struct ErrorCase {
    Message msg;
    int worker;
    std::string expect;
  };
  // Sends every case in order, checking its ERROR (and, with
  // `same_request_id`, that the ERROR carries the request's id).
  void ExpectErrors(std::vector<ErrorCase> cases, bool same_request_id = true) {
    for (auto& c : cases) {
      const uint64_t id = c.msg.header.request_id();
      Send(std::move(c.msg), c.worker);
      const Message& r = Last();
      ASSERT_EQ(r.header.op(), pb::ERROR) << c.expect;
      if (same_request_id) {
        EXPECT_EQ(r.header.request_id(), id);
      }
      EXPECT_NE(r.header.error().find(c.expect), std::string::npos) << r.header.error();
    }
  }
  Message Floats(pb::Op op, int64_t clock, std::vector<float> v) {
    return test::FloatsMessage(op, ++id_, 0, clock, std::move(v));
  }
  Message Pull(int64_t clock) { return test::PullMessage(++id_, 0, clock); }
  // `m` as a host's sum (host-local aggregation), covering `workers`.
  static Message Covering(Message m, const std::vector<int>& workers) {
    for (int w : workers) m.header.add_covers(w);
    return m;
  }
  void Send(Message m, int worker) {
    pb::Header partial = m.header;
    server_->Handle("w" + std::to_string(worker), worker, std::move(m), partial);
    server_->WaitIdle();
  }
  // A second partition: tensor 1, partition 0, 2 floats (10, 20).
  void InitSecond() {
    Send(test::InitPartitionMessage(++id_, 1, {10, 20}, test::FixedMomentumSgd()), 0);
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
  const Message& Last() { return sink_.Last(); }
  std::vector<float> Weights() { return server_->Snapshot(0, 0).value().first; }
  int64_t Version() { return server_->Snapshot(0, 0).value().second; }

  CaptureSink sink_;
  std::unique_ptr<ParamServer> server_;
  uint64_t id_ = 0;
};

INSTANTIATE_TEST_SUITE_P(ApplyThreads, ParamServerTest, ::testing::Values(0, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("OnReceiveThread")
                                                  : std::to_string(info.param) + "Threads";
                         });

TEST_P(ParamServerTest, BspAppliesOnceAllWorkersPushedAndAnswersWaitingPull) {
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

TEST_P(ParamServerTest, AverageDoesNotDependOnArrivalOrder) {
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
      EXPECT_TRUE(test::BytesEqual(Weights(), first));
    }
  }
  // And equal to averaging in rank order by hand.
  std::vector<float> w = {1, 2, 3, 4}, h(4, 0), avg(4);
  const float* srcs[3] = {g0.data(), g1.data(), g2.data()};
  AverageInOrder(srcs, 3, avg.data(), 4);
  SgdStep(test::FixedMomentumSgd(), 0.1f, 1, 1, avg.data(), w.data(), h.data(), 4);
  EXPECT_EQ(w, first);
}

// Solver type Average (nereus.torch's local mode): each clock's values are
// the workers' average gradient of that clock in rank order, bit for bit,
// whatever the learning rate, decay and momentum say; nothing accumulates.
TEST_P(ParamServerTest, AverageSolverKeepsTheAverageGradientOfEachClock) {
  pb::SgdConfig sgd = test::FixedMomentumSgd();
  sgd.set_type(pb::SOLVER_AVERAGE);
  sgd.set_weight_decay(0.5f);
  Make(pb::BSP, 3, 0, sgd);
  const std::vector<float> g0 = {1e8f, 1, 0.1f, 3}, g1 = {1, 2, 0.2f, 4}, g2 = {-1e8f, 3, 0.3f, 5};
  for (int64_t clock = 0; clock < 2; ++clock) {
    Send(Floats(pb::PUSH, clock, g2), 2);
    Send(Floats(pb::PUSH, clock, g0), 0);
    Send(Floats(pb::PUSH, clock, g1), 1);
    std::vector<float> avg(4);
    const float* srcs[3] = {g0.data(), g1.data(), g2.data()};
    AverageInOrder(srcs, 3, avg.data(), 4);
    EXPECT_TRUE(test::BytesEqual(Weights(), avg)) << "clock " << clock;
    EXPECT_EQ(Version(), clock + 1);
  }
}

// Host-local aggregation: 4 workers on 2 hosts, {0, 1} and {2, 3}. Each
// host's first worker pushes its host's sum, covering both; the update adds
// the two sums in rank order and scales by 1/4 (not 1/2), whichever host
// comes first: bitwise AverageInOrder of the sums with divisor 4, then the
// step.
TEST_P(ParamServerTest, HostSumsCoverTheirWorkersAndAreAveragedOverEveryWorker) {
  const std::vector<std::vector<int>> hosts = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
  Make(pb::BSP, 4, 0, test::FixedMomentumSgd(), hosts);
  const std::vector<float> s01 = {3, 1e8f, 0.25f, -1}, s23 = {5, -1e8f, 0.5f, 7};
  Send(Covering(Floats(pb::PUSH, 0, s23), {2, 3}), 2);
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  EXPECT_EQ(Version(), 0);
  Send(Covering(Floats(pb::PUSH, 0, s01), {0, 1}), 0);
  EXPECT_EQ(Version(), 1);
  std::vector<float> w = {1, 2, 3, 4}, h(4, 0), avg(4);
  const float* srcs[2] = {s01.data(), s23.data()};
  AverageInOrder(srcs, 2, avg.data(), 4, /*divisor=*/4);
  EXPECT_EQ(avg[0], (3.0f + 5.0f) * 0.25f);
  SgdStep(test::FixedMomentumSgd(), 0.1f, 1, 1, avg.data(), w.data(), h.data(), 4);
  EXPECT_TRUE(test::BytesEqual(Weights(), w));
  // One host of all four workers: its one sum, scaled by 1/4.
  Make(pb::BSP, 4, 0, test::FixedMomentumSgd(), {{0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}, {0, 1, 2, 3}});
  Send(Covering(Floats(pb::PUSH, 0, {8, 8, 8, 8}), {0, 1, 2, 3}), 0);
  EXPECT_EQ(Version(), 1);
  w = {1, 2, 3, 4};
  h.assign(4, 0);
  const std::vector<float> two(4, 2.0f);
  SgdStep(test::FixedMomentumSgd(), 0.1f, 1, 1, two.data(), w.data(), h.data(), 4);
  EXPECT_TRUE(test::BytesEqual(Weights(), w));
}

TEST_P(ParamServerTest, PushesThatCoverOtherWorkersThanTheirHostsAreRefused) {
  Make(pb::BSP, 4, 0, test::FixedMomentumSgd(), {{0, 1}, {0, 1}, {2, 3}, {2, 3}});
  ExpectErrors({
      {Floats(pb::PUSH, 0, {1, 1, 1, 1}), 1,
       "PUSH from worker 1, whose host's gradients worker 0 pushes (host-local aggregation, workers {0, 1})"},
      {Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0, "PUSH from worker 0 covers workers {0}, but its host's are {0, 1}"},
      {Covering(Floats(pb::PUSH, 0, {1, 1, 1, 1}), {0, 1, 2}), 0,
       "PUSH from worker 0 covers workers {0, 1, 2}, but its host's are {0, 1}"},
      {Covering(Floats(pb::PUSH, 0, {1, 1, 1, 1}), {2, 3}), 0,
       "PUSH from worker 0 covers workers {2, 3}, but its host's are {0, 1}"},
  });
  Send(Covering(Floats(pb::PUSH, 0, {1, 1, 1, 1}), {2, 3}), 2);
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  ExpectErrors({{Covering(Floats(pb::PUSH, 0, {1, 1, 1, 1}), {2, 3}), 2, "duplicate PUSH from worker 2 for clock 0"}});
  EXPECT_EQ(Version(), 0);
  EXPECT_EQ(Weights(), (std::vector<float>{1, 2, 3, 4}));
  // A job without host-local aggregation.
  Make(pb::BSP, 2);
  ExpectErrors({{Covering(Floats(pb::PUSH, 0, {1, 1, 1, 1}), {0, 1}), 0,
                 "PUSH from worker 0 covers workers {0, 1}, but this job does not aggregate per host"}});
  EXPECT_EQ(Version(), 0);
}

TEST_P(ParamServerTest, AverageSolverIsRefusedOutsideBsp) {
  ParamServerOptions o;
  o.num_workers = 2;
  o.consistency = pb::SSP;
  o.staleness = 1;
  o.apply_threads = GetParam();
  server_ = std::make_unique<ParamServer>(o, &sink_);
  pb::SgdConfig sgd = test::FixedMomentumSgd();
  sgd.set_type(pb::SOLVER_AVERAGE);
  Send(test::InitPartitionMessage(++id_, 0, {1, 2}, sgd), 0);
  ASSERT_EQ(Last().header.op(), pb::ERROR);
  EXPECT_NE(Last().header.error().find("solver type Average (the servers only average) needs BSP; this job is SSP"),
            std::string::npos)
      << Last().header.error();
}

TEST_P(ParamServerTest, PullReplySharesWeightsAndUpdateCopiesOnWrite) {
  Make(pb::BSP, 1);
  Send(Pull(0), 0);
  Buffer sent = Last().payload[0];  // A reply "still in flight".
  EXPECT_EQ(sent.floats()[0], 1.0f);
  Send(Floats(pb::PUSH, 0, {1, 1, 1, 1}), 0);
  EXPECT_EQ(sent.floats()[0], 1.0f) << "an in-flight reply must not see the next update";
  EXPECT_FLOAT_EQ(Weights()[0], 0.9f);
}

TEST_P(ParamServerTest, SspPullWaitsOnlyBeyondStaleness) {
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

TEST_P(ParamServerTest, AsyncAppliesEachPushScaledByWorkers) {
  Make(pb::ASYNC, 2);
  Send(Floats(pb::PUSH, 0, {2, 2, 2, 2}), 1);
  EXPECT_EQ(Version(), 1);
  EXPECT_FLOAT_EQ(Weights()[0], 0.9f);  // 0.1 * (2 / 2)
  Send(Pull(100), 0);                   // Never waits.
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
}

TEST_P(ParamServerTest, BadRequestsGetErrorsAndLeaveParametersUnchanged) {
  Make(pb::BSP, 2);
  const std::vector<float> before = Weights();
  std::vector<ErrorCase> cases;
  {
    Message m = Floats(pb::PUSH, 0, {1, 1, 1, 1});
    m.header.set_tensor(9);
    cases.push_back({std::move(m), 0, "unknown tensor 9 partition 0"});
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
  ASSERT_NO_FATAL_FAILURE(ExpectErrors(std::move(cases)));
  // A decode failure reported by the transport.
  pb::Header partial;
  partial.set_request_id(77);
  partial.set_op(pb::PUSH);
  server_->Handle("w0", 0, DataLossError("malformed message: header says payload_bytes=16 but ..."), partial);
  server_->WaitIdle();
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

// HybComm's measured switching: a LEND of version v is answered once the
// partition has v, holds every update of a clock >= v (pushes of the one
// clock the hand-back resumes from are kept, pulls of later versions wait),
// and a HAND_BACK of version v' puts the workers' state in place, after
// which the servers' updates resume from v' exactly.
Message LendMessage(uint64_t id, int64_t version, std::vector<std::string> arrays) {
  Message m;
  m.header.set_op(pb::LEND);
  m.header.set_request_id(id);
  m.header.set_clock(version);
  for (auto& a : arrays) m.header.add_state_arrays(a);
  return m;
}
Message HandBackMessage(uint64_t id, int64_t version, std::vector<std::string> arrays,
                        std::vector<std::vector<float>> frames) {
  Message m;
  m.header.set_op(pb::HAND_BACK);
  m.header.set_request_id(id);
  m.header.set_clock(version);
  m.header.set_dtype(pb::FLOAT32);
  for (auto& a : arrays) m.header.add_state_arrays(a);
  for (auto& f : frames) m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(std::move(f))));
  m.header.set_payload_bytes(m.payload_bytes());
  return m;
}
std::vector<float> FrameFloats(const Message& m, size_t i) {
  return std::vector<float>(m.payload[i].floats(), m.payload[i].floats() + m.payload[i].size() / sizeof(float));
}

TEST_P(ParamServerTest, LendAndHandBackMoveTheStateAtExactVersions) {
  ASSERT_NO_FATAL_FAILURE(MakeBspPastClock0());
  // Lent from version 2, which does not exist yet: answered when it does.
  Send(LendMessage(++id_, 2, {"history"}), 0);
  const uint64_t lend0 = id_;
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  // Clock 1: avg 1, h = 0.5 * 0.2 + 0.1 * 1 = 0.2, w = (0.6, 1.6, 2.6, 3.6); then the LEND's reply.
  Send(Floats(pb::PUSH, 1, {1, 1, 1, 1}), 0);
  Send(Floats(pb::PUSH, 1, {1, 1, 1, 1}), 1);
  ASSERT_EQ(Version(), 2);
  {
    const Message& r = Last();
    ASSERT_EQ(r.header.op(), pb::LEND_REPLY);
    EXPECT_EQ(r.header.request_id(), lend0);
    EXPECT_EQ(r.header.clock(), 2);
    ASSERT_EQ(r.header.state_arrays_size(), 1);
    EXPECT_EQ(r.header.state_arrays(0), "history");
    ASSERT_EQ(r.payload.size(), 1u);
    const std::vector<float> h = FrameFloats(r, 0);
    for (float x : h) EXPECT_FLOAT_EQ(x, 0.2f);
  }
  // Another worker's LEND of the same version is answered at once.
  Send(LendMessage(++id_, 2, {"weights", "history"}), 1);
  ASSERT_EQ(Last().header.op(), pb::LEND_REPLY);
  ASSERT_EQ(Last().payload.size(), 2u);
  const std::vector<float> lent_weights = FrameFloats(Last(), 0);
  EXPECT_EQ(lent_weights, Weights());
  EXPECT_FLOAT_EQ(lent_weights[0], 0.6f);
  // A pull of version 3 waits for the hand-back; a push of clock 4 (the
  // hand-back's) is kept, one of clock 5 as well is refused.
  Send(Pull(3), 1);
  const size_t before_pull = sink_.replies.size();
  Send(Floats(pb::PUSH, 4, {1, 1, 1, 1}), 0);
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  Send(Floats(pb::PUSH, 5, {1, 1, 1, 1}), 1);
  ASSERT_EQ(Last().header.op(), pb::ERROR);
  EXPECT_NE(Last().header.error().find("is lent to the workers from version 2 and gradients of clock 4 already wait"),
            std::string::npos)
      << Last().header.error();
  EXPECT_EQ(Version(), 2);
  // The workers' state at version 4 comes back: the waiting pull gets it.
  Send(HandBackMessage(++id_, 4, {"weights", "history"}, {{10, 20, 30, 40}, {1, 1, 1, 1}}), 0);
  ASSERT_EQ(sink_.replies.size(), before_pull + 4);  // PUSH_ACK, ERROR, HAND_BACK_ACK, PULL_REPLY.
  EXPECT_EQ(sink_.replies[before_pull + 2].msg.header.op(), pb::HAND_BACK_ACK);
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
  EXPECT_EQ(Last().header.clock(), 4);
  EXPECT_EQ(FrameFloats(Last(), 0), (std::vector<float>{10, 20, 30, 40}));
  EXPECT_EQ(Version(), 4);
  // Clock 4 completes with worker 1's push: avg 2, h = 0.5 * 1 + 0.1 * 2 = 0.7, from the handed-back state.
  Send(Floats(pb::PUSH, 4, {3, 3, 3, 3}), 1);
  EXPECT_EQ(Version(), 5);
  const std::vector<float> w = Weights();
  EXPECT_FLOAT_EQ(w[0], 10 - 0.7f);
  EXPECT_FLOAT_EQ(w[3], 40 - 0.7f);
  // Lent and handed back again, at the next clock.
  Send(LendMessage(++id_, 5, {"history"}), 0);
  ASSERT_EQ(Last().header.op(), pb::LEND_REPLY);
  for (float x : FrameFloats(Last(), 0)) EXPECT_FLOAT_EQ(x, 0.7f);
}

TEST_P(ParamServerTest, BadLendsAndHandBacksGetErrorsAndChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(MakeBspPastClock0());
  const std::vector<float> before = Weights();
  auto lend = [&](int64_t v, std::vector<std::string> a) { return LendMessage(++id_, v, std::move(a)); };
  auto back = [&](int64_t v, std::vector<std::string> a, std::vector<std::vector<float>> f) {
    return HandBackMessage(++id_, v, std::move(a), std::move(f));
  };
  std::vector<ErrorCase> cases;
  cases.push_back({lend(1, {"history"}), -1, "LEND from w-1, which is not a worker of this job"});
  {
    Message m = lend(1, {"history"});
    m.header.set_tensor(7);
    cases.push_back({std::move(m), 0, "unknown tensor 7 partition 0"});
  }
  cases.push_back({lend(0, {"history"}), 0, "LEND of version 0, but tensor 0 partition 0 has already applied 1"});
  cases.push_back({lend(-3, {}), 0, "LEND of version -3 is out of range"});
  cases.push_back({lend(1, {"momentum"}), 0,
                   "asks for state array \"momentum\"; tensor 0 partition 0 has weights, "
                   "history"});
  cases.push_back({lend(1, {"history", "history"}), 0, "asks for state array \"history\" twice"});
  {
    Message m = lend(1, {"history"});
    m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(4, 1.0f)));
    cases.push_back({std::move(m), 0, "LEND carries no payload"});
  }
  cases.push_back({back(1, {"weights", "history"}, {{1, 1, 1, 1}, {1, 1, 1, 1}}), 0,
                   "HAND_BACK of tensor 0 partition 0, which is not lent to the workers"});
  ASSERT_NO_FATAL_FAILURE(ExpectErrors(std::move(cases)));
  // Lent from version 1 (answered at once); the bad hand-backs below change nothing.
  Send(lend(1, {"history"}), 0);
  ASSERT_EQ(Last().header.op(), pb::LEND_REPLY);
  cases.clear();
  // A LEND of a later version waits for this lend's HAND_BACK (worker 0's
  // can come after another worker's next LEND): no reply now, one per worker
  // at most.
  const size_t replies = sink_.replies.size();
  Message later = lend(2, {});
  const uint64_t later_id = later.header.request_id();
  Send(std::move(later), 1);
  EXPECT_EQ(sink_.replies.size(), replies);
  Send(lend(2, {}), 0);
  EXPECT_EQ(sink_.replies.size(), replies);
  cases.push_back({lend(2, {}), 1,
                   "LEND of version 2, but tensor 0 partition 0 is lent from version 1 and already holds 2 LEND(s) "
                   "for after its HAND_BACK"});
  cases.push_back({back(0, {"weights", "history"}, {{1, 1, 1, 1}, {1, 1, 1, 1}}), 0,
                   "HAND_BACK of version 0 of tensor 0 partition 0, which was lent from version 1"});
  cases.push_back({back(3, {"weights"}, {{1, 1, 1, 1}}), 0, "carries weights; the solver's state is weights, history"});
  cases.push_back({back(3, {"history", "weights"}, {{1, 1, 1, 1}, {1, 1, 1, 1}}), 0,
                   "carries history, weights; the solver's state is weights, history"});
  cases.push_back({back(3, {"weights", "history"}, {{1, 1, 1, 1}}), 0, "names 2 arrays but has 1 payload frames"});
  cases.push_back(
      {back(3, {"weights", "history"}, {{1, 1, 1, 1}, {1, 1, 1}}), 0, "array history has 12 bytes, the partition 16"});
  cases.push_back({back(3, {"weights", "history"}, {{1, 1, 1, 1}, {1, 1, 1, 1}}), -1,
                   "HAND_BACK from w-1, which is not a worker of this job"});
  {
    Message m = back(3, {"weights", "history"}, {{1, 1, 1, 1}, {1, 1, 1, 1}});
    m.header.set_dtype(pb::DTYPE_UNSPECIFIED);
    cases.push_back({std::move(m), 0, "unsupported dtype DTYPE_UNSPECIFIED for HAND_BACK"});
  }
  ASSERT_NO_FATAL_FAILURE(ExpectErrors(std::move(cases), /*same_request_id=*/false));
  EXPECT_EQ(Weights(), before);
  EXPECT_EQ(Version(), 1);
  // Still lent, and still works: a good hand-back. The two LENDs of version
  // 2 held for it are refused now, naming why: it came back at version 3.
  const size_t before_back = sink_.replies.size();
  Send(back(3, {"weights", "history"}, {{5, 6, 7, 8}, {0, 0, 0, 0}}), 1);
  ASSERT_EQ(sink_.replies.size(), before_back + 3);
  EXPECT_EQ(sink_.replies[before_back].msg.header.op(), pb::HAND_BACK_ACK);
  for (size_t i = before_back + 1; i < before_back + 3; ++i) {
    const Message& r = sink_.replies[i].msg;
    ASSERT_EQ(r.header.op(), pb::ERROR);
    EXPECT_EQ(r.header.error_op(), pb::LEND);
    EXPECT_NE(r.header.error().find("LEND of version 2, but tensor 0 partition 0 was handed back at version 3"),
              std::string::npos)
        << r.header.error();
  }
  EXPECT_EQ(sink_.replies[before_back + 1].msg.header.request_id(), later_id);
  EXPECT_EQ(Version(), 3);
  EXPECT_EQ(Weights(), (std::vector<float>{5, 6, 7, 8}));
}

// A layer lent, handed back at version 2 and lent again from version 4: the
// LENDs of 4 may come before the HAND_BACK (from other workers), and are
// answered once the partition, updated by the servers at clocks 2 and 3,
// reaches version 4.
TEST_P(ParamServerTest, ALendOfALaterVersionWaitsForTheHandBack) {
  ASSERT_NO_FATAL_FAILURE(MakeBspPastClock0());
  Send(LendMessage(++id_, 1, {"history"}), 0);
  Send(LendMessage(++id_, 1, {"history"}), 1);
  ASSERT_EQ(Last().header.op(), pb::LEND_REPLY);
  const size_t replies = sink_.replies.size();
  Send(LendMessage(++id_, 4, {"history"}), 1);  // Worker 1 is ahead of worker 0's HAND_BACK.
  EXPECT_EQ(sink_.replies.size(), replies);
  Send(HandBackMessage(++id_, 2, {"weights", "history"}, {{1, 2, 3, 4}, {0, 0, 0, 0}}), 0);
  EXPECT_EQ(Last().header.op(), pb::HAND_BACK_ACK);
  EXPECT_EQ(Version(), 2);
  Send(LendMessage(++id_, 4, {"history"}), 0);
  EXPECT_EQ(sink_.replies.size(), replies + 1);  // Only the ACK: version 4 is not there yet.
  for (int64_t clock : {2, 3}) {
    for (int w = 0; w < 2; ++w) Send(Floats(pb::PUSH, clock, {1, 1, 1, 1}), w);
  }
  EXPECT_EQ(Version(), 4);
  int lend_replies = 0;
  for (size_t i = replies; i < sink_.replies.size(); ++i) {
    const Message& r = sink_.replies[i].msg;
    EXPECT_NE(r.header.op(), pb::ERROR) << r.header.error();
    if (r.header.op() == pb::LEND_REPLY) {
      ++lend_replies;
      EXPECT_EQ(r.header.clock(), 4);
    }
  }
  EXPECT_EQ(lend_replies, 2);
}

TEST_P(ParamServerTest, LendingNeedsBsp) {
  Make(pb::SSP, 2, 1);
  Send(LendMessage(++id_, 0, {"history"}), 0);
  ASSERT_EQ(Last().header.op(), pb::ERROR);
  EXPECT_NE(Last().header.error().find("LEND needs BSP (this job is SSP)"), std::string::npos) << Last().header.error();
}

TEST_P(ParamServerTest, BatchIsAckedOnceAndItsPullsAnsweredInOneReply) {
  Make(pb::BSP, 2);
  InitSecond();
  Send(BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}}), 0);
  EXPECT_EQ(Last().header.op(), pb::PUSH_ACK);
  EXPECT_EQ(Last().header.request_id(), 0u);
  EXPECT_EQ(PartIds(Last()), (std::vector<uint64_t>{1000, 1001}));
  const size_t before = sink_.replies.size();
  Send(BatchPush(0, {{0, {3, 3, 3, 3}}, {1, {4, 4}}}), 1);
  // One PUSH_ACK for worker 1, one PULL_REPLY for each worker with both partitions.
  ASSERT_EQ(sink_.replies.size(), before + 3);
  for (size_t i = before + 1; i < sink_.replies.size(); ++i) {
    const Message& r = sink_.replies[i].msg;
    ASSERT_EQ(r.header.op(), pb::PULL_REPLY);
    EXPECT_EQ(PartIds(r), (std::vector<uint64_t>{2000, 2001}));
    ASSERT_EQ(r.payload.size(), 2u);
    EXPECT_FLOAT_EQ(r.payload[0].floats()[0], 0.8f);   // 1 - 0.1 * avg(1, 3)
    EXPECT_FLOAT_EQ(r.payload[1].floats()[1], 19.7f);  // 20 - 0.1 * avg(2, 4)
  }
  // A batched pull of what exists: one reply carrying every partition.
  Send(BatchPull(1, {1, 0}), 0);
  EXPECT_EQ(Last().header.op(), pb::PULL_REPLY);
  EXPECT_EQ(PartIds(Last()), (std::vector<uint64_t>{3000, 3001}));
  EXPECT_EQ(Last().payload[0].size(), 2 * sizeof(float));
  // A batched pull of a version not there yet waits, like a plain one.
  const size_t waiting = sink_.replies.size();
  Send(BatchPull(2, {0, 1}), 0);
  EXPECT_EQ(sink_.replies.size(), waiting);
}

TEST_P(ParamServerTest, MalformedBatchesAreRefusedWholeAndChangeNothing) {
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
  {  // Well-formed, but one part has the other partition's size: nothing is stored.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2, 2, 2}}});
    cases.push_back({std::move(m), "batched PUSH part 1: wrong shape", {1000, 1001}});
  }
  {  // The same partition and clock twice in one message.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {0, {5, 5, 5, 5}}});
    cases.push_back({std::move(m), "batched PUSH part 1 repeats tensor 0 partition 0 for clock 0", {1000, 1001}});
  }
  {  // Some parts with a request id, some without.
    Message m = BatchPush(0, {{0, {1, 1, 1, 1}}, {1, {2, 2}}});
    m.header.mutable_parts(0)->set_request_id(0);
    cases.push_back({std::move(m), "batched PUSH with 2 parts, only 1 of which carry a request id", {1001}});
  }
  {  // An unknown partition in a batched pull.
    Message m = BatchPull(0, {0, 7});
    cases.push_back({std::move(m), "batched PULL part 1: unknown tensor 7 partition 0", {3000, 3001}});
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

TEST_P(ParamServerTest, ReinitWithOtherLayoutIsRefused) {
  Make(pb::BSP, 1);
  Message m = Floats(pb::INIT_PARTITION, 0, {1, 2, 3, 4});
  auto* meta = m.header.mutable_partition_meta();
  meta->set_length(4);
  meta->set_lr_mult(2);
  *m.header.mutable_sgd() = test::FixedMomentumSgd();
  Send(std::move(m), 0);
  EXPECT_EQ(Last().header.op(), pb::ERROR);
  EXPECT_NE(Last().header.error().find("already initialized with another layout"), std::string::npos);
}

// A BSP job of 3 workers and 12 partitions of 5,000 floats, 6 clocks, every push
// carrying the pull of the next clock, the pushes of each clock in a
// shuffled order (the same for every run). What one run saw: every
// PULL_REPLY's version and bytes by (worker, tensor, clock pushed), and
// each partition's final weights.
struct PoolRun {
  std::map<std::tuple<int, int, int64_t>, std::pair<int64_t, std::vector<float>>> replies;
  std::vector<std::vector<float>> final_weights;
};

constexpr int kPoolWorkers = 3, kPoolPartitions = 12, kPoolClocks = 6;
constexpr size_t kPoolFloats = 5000;

pb::SgdConfig PoolSgd() {
  pb::SgdConfig c = test::FixedMomentumSgd();
  c.set_momentum(0.9f);
  c.set_weight_decay(0.01f);
  return c;
}

float PoolGradient(int worker, int tensor, int64_t clock, size_t i) {
  return std::sin(0.001f * static_cast<float>(i + 1) * static_cast<float>(worker + 2)) *
         (1.0f + 0.1f * static_cast<float>(tensor) - 0.05f * static_cast<float>(clock));
}

PoolRun RunPoolJob(int apply_threads) {
  CaptureSink sink;
  ParamServerOptions o;
  o.num_workers = kPoolWorkers;
  o.apply_threads = apply_threads;
  o.inline_apply_bytes = 0;
  PoolRun run;
  {
    ParamServer server(o, &sink);
    auto handle = [&](Message m, int worker) {
      pb::Header partial = m.header;
      server.Handle("w" + std::to_string(worker), worker, std::move(m), partial);
    };
    uint64_t id = 0;
    for (int t = 0; t < kPoolPartitions; ++t) {
      Message m;
      m.header.set_op(pb::INIT_PARTITION);
      m.header.set_request_id(++id);
      m.header.set_tensor(t);
      m.header.set_dtype(pb::FLOAT32);
      auto w = std::make_shared<std::vector<float>>(kPoolFloats);
      for (size_t i = 0; i < kPoolFloats; ++i) (*w)[i] = 0.5f + 0.001f * static_cast<float>(i % 97) * (t + 1);
      m.payload.push_back(Buffer::Of(w));
      m.header.set_payload_bytes(m.payload_bytes());
      auto* meta = m.header.mutable_partition_meta();
      meta->set_tensor(t);
      meta->set_length(kPoolFloats);
      meta->set_lr_mult(1);
      meta->set_decay_mult(1);
      *m.header.mutable_sgd() = PoolSgd();
      handle(std::move(m), 0);
    }
    std::mt19937 rng(7);
    std::map<uint64_t, std::tuple<int, int, int64_t>> pull_of;
    for (int64_t clock = 0; clock < kPoolClocks; ++clock) {
      std::vector<std::pair<int, int>> order;  // (worker, tensor)
      for (int w = 0; w < kPoolWorkers; ++w)
        for (int t = 0; t < kPoolPartitions; ++t) order.emplace_back(w, t);
      std::shuffle(order.begin(), order.end(), rng);
      for (auto [w, t] : order) {
        Message m;
        m.header.set_op(pb::PUSH);
        m.header.set_request_id(++id);
        m.header.set_tensor(t);
        m.header.set_clock(clock);
        m.header.set_dtype(pb::FLOAT32);
        m.header.set_pull_request_id(++id);
        pull_of[id] = {w, t, clock};
        auto g = std::make_shared<std::vector<float>>(kPoolFloats);
        for (size_t i = 0; i < kPoolFloats; ++i) (*g)[i] = PoolGradient(w, t, clock, i);
        m.payload.push_back(Buffer::Of(g));
        m.header.set_payload_bytes(m.payload_bytes());
        handle(std::move(m), w);
      }
    }
    server.WaitIdle();
    for (const CaptureSink::Captured& c : sink.replies) {
      if (c.msg.header.op() != pb::PULL_REPLY) continue;
      EXPECT_EQ(c.msg.header.parts_size(), 0);
      const float* f = c.msg.payload[0].floats();
      run.replies[pull_of.at(c.msg.header.request_id())] = {c.msg.header.clock(),
                                                            std::vector<float>(f, f + kPoolFloats)};
    }
    for (int t = 0; t < kPoolPartitions; ++t) run.final_weights.push_back(server.Snapshot(t, 0).value().first);
  }
  return run;
}

// Updates on 1 and 4 pool threads (12 partitions updated concurrently while the
// pushes of later clocks keep arriving) give bitwise the weights and the
// replies of updates on the receive thread, and those of the solver step
// worked out here; every piggybacked pull of clock c is answered with
// exactly version c + 1.
TEST(ParamServerPoolTest, UpdatesOnAnyNumberOfThreadsAreBitwiseThoseOfOne) {
  const PoolRun one = RunPoolJob(0);
  ASSERT_EQ(one.replies.size(), static_cast<size_t>(kPoolWorkers * kPoolPartitions * kPoolClocks));
  for (const auto& [key, reply] : one.replies) EXPECT_EQ(reply.first, std::get<2>(key) + 1);
  for (int threads : {1, 4}) {
    const PoolRun pool = RunPoolJob(threads);
    ASSERT_EQ(pool.replies.size(), one.replies.size()) << threads << " threads";
    for (const auto& [key, reply] : one.replies) {
      const auto& got = pool.replies.at(key);
      EXPECT_EQ(got.first, reply.first);
      ASSERT_EQ(std::memcmp(got.second.data(), reply.second.data(), kPoolFloats * sizeof(float)), 0)
          << threads << " threads: worker " << std::get<0>(key) << " tensor " << std::get<1>(key) << " clock "
          << std::get<2>(key);
    }
    for (int t = 0; t < kPoolPartitions; ++t)
      EXPECT_EQ(std::memcmp(pool.final_weights[t].data(), one.final_weights[t].data(), kPoolFloats * sizeof(float)), 0)
          << threads << " threads, tensor " << t;
  }
  // The reference: per partition, the workers' gradients averaged in rank order
  // and one SGD step per clock.
  const pb::SgdConfig sgd = PoolSgd();
  for (int t = 0; t < kPoolPartitions; ++t) {
    std::vector<float> w(kPoolFloats), h(kPoolFloats, 0.0f), avg(kPoolFloats);
    for (size_t i = 0; i < kPoolFloats; ++i) w[i] = 0.5f + 0.001f * static_cast<float>(i % 97) * (t + 1);
    std::vector<std::vector<float>> g(kPoolWorkers, std::vector<float>(kPoolFloats));
    for (int64_t clock = 0; clock < kPoolClocks; ++clock) {
      std::vector<const float*> srcs;
      for (int r = 0; r < kPoolWorkers; ++r) {
        for (size_t i = 0; i < kPoolFloats; ++i) g[r][i] = PoolGradient(r, t, clock, i);
        srcs.push_back(g[r].data());
      }
      AverageInOrder(srcs.data(), kPoolWorkers, avg.data(), kPoolFloats);
      SgdStep(sgd, LearningRate(sgd, clock), 1.0f, 1.0f, avg.data(), w.data(), h.data(), kPoolFloats);
    }
    EXPECT_EQ(std::memcmp(w.data(), one.final_weights[t].data(), kPoolFloats * sizeof(float)), 0) << "tensor " << t;
  }
}

// While a partition is being updated on the pool, the receive thread goes on:
// the next clock's push is acked and kept, and a pull of the version the
// partition already has waits for the update to end (its arrays are the
// update's), then gets the new version; the next update, made while that
// reply holds the weights, does not touch them (copy-on-write).
TEST(ParamServerPoolTest, PullDuringAnUpdateIsAnsweredWhenItEnds) {
  CaptureSink sink;
  Gate gate;
  ParamServerOptions o;
  o.num_workers = 1;
  o.apply_threads = 2;
  o.inline_apply_bytes = 0;
  o.before_update = [&](int tensor, int partition, int64_t clock) {
    if (tensor == 0 && partition == 0 && clock == 0) gate.Wait();
  };
  ParamServer server(o, &sink);
  auto send = [&](pb::Op op, int64_t clock, std::vector<float> v, uint64_t id) {
    Message m;
    m.header.set_op(op);
    m.header.set_request_id(id);
    m.header.set_clock(clock);
    m.header.set_dtype(pb::FLOAT32);
    if (!v.empty()) {
      m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(std::move(v))));
      m.header.set_payload_bytes(m.payload_bytes());
    }
    if (op == pb::INIT_PARTITION) {
      auto* meta = m.header.mutable_partition_meta();
      meta->set_length(4);
      meta->set_lr_mult(1);
      meta->set_decay_mult(1);
      *m.header.mutable_sgd() = test::FixedMomentumSgd();
    }
    pb::Header partial = m.header;
    server.Handle("w0", 0, std::move(m), partial);
  };
  send(pb::INIT_PARTITION, 0, {1, 2, 3, 4}, 1);
  send(pb::PUSH, 0, {1, 1, 1, 1}, 2);
  gate.AwaitArrival();  // The update of clock 0 has started and is held.
  send(pb::PULL, 0, {}, 3);
  send(pb::PUSH, 1, {2, 2, 2, 2}, 4);
  ASSERT_EQ(sink.replies.size(), 3u);  // INIT_ACK and two PUSH_ACKs; the pull waits.
  EXPECT_EQ(sink.replies[1].msg.header.op(), pb::PUSH_ACK);
  EXPECT_EQ(sink.replies[2].msg.header.op(), pb::PUSH_ACK);
  EXPECT_EQ(sink.replies[2].msg.header.request_id(), 4u);
  gate.Open();
  server.WaitIdle();
  ASSERT_EQ(sink.replies.size(), 4u);
  const Message& reply = sink.replies[3].msg;
  ASSERT_EQ(reply.header.op(), pb::PULL_REPLY);
  EXPECT_EQ(reply.header.request_id(), 3u);
  EXPECT_EQ(reply.header.clock(), 1);
  // h = 0.1 * 1; w = 1 - 0.1. Clock 1 was applied after the reply left, out
  // of place: h = 0.1 * 2 + 0.5 * 0.1 = 0.25, w = 0.9 - 0.25.
  EXPECT_FLOAT_EQ(reply.payload[0].floats()[0], 0.9f);
  auto now = server.Snapshot(0, 0).value();
  EXPECT_EQ(now.second, 2);
  EXPECT_FLOAT_EQ(now.first[0], 0.65f);
  EXPECT_FLOAT_EQ(reply.payload[0].floats()[0], 0.9f);
}

// After StopApplyThreads the pool is gone and updates are made on the
// Handle() thread again, before Handle() returns.
TEST(ParamServerPoolTest, AfterStopApplyThreadsUpdatesAreMadeInline) {
  CaptureSink sink;
  ParamServerOptions o;
  o.num_workers = 1;
  o.apply_threads = 2;
  o.inline_apply_bytes = 0;
  std::thread::id updater;
  o.before_update = [&](int, int, int64_t) { updater = std::this_thread::get_id(); };
  ParamServer server(o, &sink);
  Message init;
  init.header.set_op(pb::INIT_PARTITION);
  init.header.set_dtype(pb::FLOAT32);
  init.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(std::vector<float>{1, 2})));
  init.header.set_payload_bytes(8);
  init.header.mutable_partition_meta()->set_length(2);
  init.header.mutable_partition_meta()->set_lr_mult(1);
  *init.header.mutable_sgd() = test::FixedMomentumSgd();
  auto push = [&](int64_t clock) {
    Message m;
    m.header.set_op(pb::PUSH);
    m.header.set_clock(clock);
    m.header.set_dtype(pb::FLOAT32);
    m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(std::vector<float>{1, 1})));
    m.header.set_payload_bytes(8);
    pb::Header partial = m.header;
    server.Handle("w0", 0, std::move(m), partial);
  };
  pb::Header partial = init.header;
  server.Handle("w0", 0, std::move(init), partial);
  push(0);
  server.WaitIdle();
  EXPECT_NE(updater, std::this_thread::get_id()) << "the pool made the first update";
  server.StopApplyThreads();
  push(1);
  EXPECT_EQ(updater, std::this_thread::get_id()) << "after StopApplyThreads, Handle() made the update";
  EXPECT_EQ(server.Snapshot(0, 0).value().second, 2);
  server.StopApplyThreads();  // Idempotent.
}

}  // namespace
}  // namespace nereus

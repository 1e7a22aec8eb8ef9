// FactorExchange (worker/client/factor_exchange.h) without a network: what a
// worker sends, what it accepts from its peers, what it refuses (and that a
// refused message changes nothing), and the update it applies.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "tests/support/bytes_equal.h"
#include "worker/client/factor_exchange.h"

namespace nereus {
namespace {

Buffer Floats(const std::vector<float>& v) { return Buffer::CopyOf(v.data(), v.size() * sizeof(float)); }

// Plain SGD at rate 1: a step subtracts the gradient itself.
pb::SgdConfig FixedRateOne() {
  pb::SgdConfig sgd;
  sgd.set_base_lr(1.0f);
  sgd.set_lr_policy("fixed");
  return sgd;
}

// Tensor `id`, "ip1/0" of shape [2, 3] (batch 1), over these weights and
// this worker's factors.
FactorExchange::TensorInfo Ip1Tensor(int id, std::vector<float>* weights, std::vector<float>* left,
                                     std::vector<float>* right) {
  FactorExchange::TensorInfo t;
  t.id = id;
  t.name = "ip1/0";
  t.shape = {2, 3};
  t.batch = 1;
  t.data = weights->data();
  t.left = left->data();
  t.right = right->data();
  return t;
}

Message FactorsFrom(int tensor, int64_t clock, int64_t k, const std::vector<float>& l, const std::vector<float>& r,
                    uint64_t request_id) {
  Message m = FactorsMessage(tensor, clock, Factors{k, Floats(l), Floats(r)});
  m.header.set_request_id(request_id);
  return m;
}

class ExchangeFixture : public ::testing::Test {
 protected:
  // 3 workers (this is worker 0), 2 servers; tensor 1 "ip1/0" is a 2 x 3
  // weight with one factor row per worker.
  ExchangeFixture()
      : exchange_(
            &requests_,
            [this](const Endpoint& to, Message m) {
              replies_.emplace_back(to, std::move(m));
              return Status::OK();
            },
            [](const Endpoint& from, int* rank) {
              static const std::map<Endpoint, int> workers = {{"w0", 0}, {"w1", 1}, {"w2", 2}};
              auto it = workers.find(from);
              if (it == workers.end()) return false;
              *rank = it->second;
              return true;
            }) {
    exchange_.Configure(FixedRateOne(), 3, 0, 2, {Ip1Tensor(1, &weights_, &left_, &right_)});
  }

  std::string LastError() {
    EXPECT_FALSE(replies_.empty());
    if (replies_.empty()) return "";
    EXPECT_EQ(replies_.back().second.header.op(), pb::ERROR);
    EXPECT_EQ(replies_.back().second.header.error_op(), pb::FACTORS);
    return replies_.back().second.header.error();
  }

  RequestTable requests_;
  std::vector<std::pair<Endpoint, Message>> replies_;
  std::vector<float> weights_ = {10, 20, 30, 40, 50, 60};
  std::vector<float> left_ = {1, 2};  // This worker's factors: [1 2]^T [3 0 -3].
  std::vector<float> right_ = {3, 0, -3};
  FactorExchange exchange_;
};

TEST_F(ExchangeFixture, SendsOneMessagePerOtherWorkerWithTheSameCreditAndPriorityAsPushes) {
  auto push = std::make_shared<Handle::State>(1);
  std::vector<QueuedMessage> out;
  auto sent = exchange_.BuildSends(1, 0, uint64_t{4} << 32, push, &out);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(*sent, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].server, 2 + 1);  // Destinations after the 2 servers: workers 1 and 2.
  EXPECT_EQ(out[1].server, 2 + 2);
  for (const QueuedMessage& q : out) {
    EXPECT_EQ(q.priority, uint64_t{4} << 32);
    EXPECT_EQ(q.bytes, 20u);  // (1 x 2 + 1 x 3) floats.
    EXPECT_EQ(q.msg.header.op(), pb::FACTORS);
    EXPECT_EQ(q.msg.header.tensor(), 1);
    EXPECT_EQ(q.msg.header.factor_rows(), 1);
    EXPECT_EQ(q.msg.header.request_id(), q.request_id);
    ASSERT_EQ(q.msg.payload.size(), 2u);
    EXPECT_EQ(q.msg.payload[0].floats()[1], 2.0f);
    EXPECT_EQ(q.msg.payload[1].floats()[2], -3.0f);
  }
  // The factors were copied: the trainer may overwrite its buffers now.
  left_[1] = 99;
  EXPECT_EQ(out[0].msg.payload[0].floats()[1], 2.0f);
  Request r;
  ASSERT_TRUE(requests_.Take(out[1].request_id, &r));
  EXPECT_EQ(r.credit, 20u);
  EXPECT_EQ(r.server, 4);
  EXPECT_EQ(r.what, "factors of \"ip1/0\" to worker 2");
  // A second hand-over of the same clock is refused.
  EXPECT_FALSE(exchange_.BuildSends(1, 0, 0, push, &out).ok());
}

TEST_F(ExchangeFixture, BadFactorsAreRefusedAndChangeNothing) {
  auto push = std::make_shared<Handle::State>(1);
  std::vector<QueuedMessage> out;
  ASSERT_TRUE(exchange_.BuildSends(1, 0, 0, push, &out).ok());

  // Wrong-size left factor (3 floats for 1 x 2).
  exchange_.OnFactors("w1", FactorsFrom(1, 0, 1, {1, 1, 1}, {1, 1, 1}, 71));
  EXPECT_EQ(replies_.back().first, "w1");
  EXPECT_EQ(replies_.back().second.header.request_id(), 71u);
  EXPECT_EQ(LastError(), "factors of \"ip1/0\" for clock 0: left factor frame has 12 bytes, expected 8 (1 x 2 floats)");
  // Wrong-size right factor.
  exchange_.OnFactors("w1", FactorsFrom(1, 0, 1, {1, 1}, {1, 1}, 72));
  EXPECT_EQ(LastError(),
            "factors of \"ip1/0\" for clock 0: right factor frame has 8 bytes, expected 12 (1 x 3 floats)");
  // A tensor that is not sent as factors (unknown layer).
  exchange_.OnFactors("w1", FactorsFrom(5, 0, 1, {1, 1}, {1, 1, 1}, 73));
  EXPECT_EQ(LastError(), "FACTORS for tensor 5, which is not a sufficient-factor tensor of this job");
  // From a node that is not another worker.
  exchange_.OnFactors("server0", FactorsFrom(1, 0, 1, {1, 1}, {1, 1, 1}, 74));
  EXPECT_EQ(LastError(), "FACTORS from server0, which is not another worker of this job");
  exchange_.OnFactors("w0", FactorsFrom(1, 0, 1, {1, 1}, {1, 1, 1}, 75));
  EXPECT_EQ(LastError(), "FACTORS from w0, which is not another worker of this job");
  // A clock BSP cannot have produced yet.
  exchange_.OnFactors("w1", FactorsFrom(1, 2, 1, {1, 1}, {1, 1, 1}, 76));
  EXPECT_EQ(LastError(),
            "factors of ip1/0 for clock 2 from worker 1: this worker has applied 0 update(s) and accepts clocks 0 "
            "and 1 only (BSP)");
  EXPECT_EQ(replies_.size(), 6u);
  EXPECT_EQ(exchange_.applied(1), 0);

  // The good ones: worker 1 [0 1]^T [1 1 1], worker 2 [2 0]^T [0 0 6].
  exchange_.OnFactors("w1", FactorsFrom(1, 0, 1, {0, 1}, {1, 1, 1}, 77));
  EXPECT_EQ(replies_.back().second.header.op(), pb::FACTORS_ACK);
  EXPECT_EQ(replies_.back().second.header.request_id(), 77u);
  // ... a duplicate is refused ...
  exchange_.OnFactors("w1", FactorsFrom(1, 0, 1, {5, 5}, {5, 5, 5}, 78));
  EXPECT_EQ(LastError(), "factors of ip1/0 for clock 0 from worker 1 came twice");
  exchange_.OnFactors("w2", FactorsFrom(1, 0, 1, {2, 0}, {0, 0, 6}, 79));
  EXPECT_EQ(replies_.back().second.header.op(), pb::FACTORS_ACK);

  // sum = [[3 0 -3], [6 0 -6]] + [[0 0 0], [1 1 1]] + [[0 0 12], [0 0 0]] = [[3 0 9], [7 1 -5]];
  // lr 1, no momentum or decay: w -= sum / 3 (exact in float: multiples of 1/3 are not, so compare to the
  // same float expression the servers use: sum * (1/3)).
  ASSERT_TRUE(exchange_.Advance(1, 1).ok());
  EXPECT_EQ(exchange_.applied(1), 1);
  const float third = 1.0f / 3.0f;
  const float sum[6] = {3, 0, 9, 7, 1, -5};
  const float before[6] = {10, 20, 30, 40, 50, 60};
  float expected[6];
  for (int i = 0; i < 6; ++i) expected[i] = before[i] - sum[i] * third;
  EXPECT_TRUE(test::BytesEqual(weights_.data(), 6, expected, 6, "weights"));
  // Repeated calls return at once.
  ASSERT_TRUE(exchange_.Advance(1, 1).ok());
  EXPECT_EQ(exchange_.applied(1), 1);
}

TEST_F(ExchangeFixture, AdvanceWithoutOwnFactorsFailsInsteadOfWaiting) {
  Status st = exchange_.Advance(1, 1);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("never handed over"), std::string::npos) << st;
}

TEST_F(ExchangeFixture, AbortWakesAWaitingAdvanceWithTheReason) {
  auto push = std::make_shared<Handle::State>(1);
  std::vector<QueuedMessage> out;
  ASSERT_TRUE(exchange_.BuildSends(1, 0, 0, push, &out).ok());
  Status result;
  std::thread waiter([&] { result = exchange_.Advance(1, 1); });  // Waits for workers 1 and 2.
  exchange_.Abort(AbortedError("worker 2 (tcp://127.0.0.1:5) is dead: no heartbeat for 3.0 s"));
  waiter.join();
  EXPECT_EQ(result.code(), StatusCode::kAborted);
  EXPECT_EQ(result.message(), "worker 2 (tcp://127.0.0.1:5) is dead: no heartbeat for 3.0 s");
  EXPECT_EQ(exchange_.applied(1), 0);
}

// ClientInternals::sfb_emulated_rebuild (benchmarks whose emulated device
// rebuilds): a clock completes as usual, but its update is not computed.
TEST(EmulatedRebuildTest, ACompleteClockCountsAsAppliedAndTheWeightsStay) {
  RequestTable requests;
  int acks = 0;
  FactorExchange exchange(
      &requests,
      [&](const Endpoint&, Message m) {
        acks += m.header.op() == pb::FACTORS_ACK;
        return Status::OK();
      },
      [](const Endpoint& from, int* rank) {
        *rank = from == "w1" ? 1 : -1;
        return from == "w1";
      });
  std::vector<float> weights = {10, 20, 30, 40, 50, 60}, left = {1, 2}, right = {3, 0, -3};
  exchange.Configure(FixedRateOne(), 2, 0, 1, {Ip1Tensor(0, &weights, &left, &right)}, /*rebuild=*/false);
  auto push = std::make_shared<Handle::State>(1);
  std::vector<QueuedMessage> out;
  ASSERT_TRUE(exchange.BuildSends(0, 0, 0, push, &out).ok());
  ASSERT_EQ(out.size(), 1u);  // Factors still go to the other worker.
  exchange.OnFactors("w1", FactorsFrom(0, 0, 1, {0, 1}, {1, 1, 1}, 7));
  EXPECT_EQ(acks, 1);
  ASSERT_TRUE(exchange.Advance(0, 1).ok());
  EXPECT_EQ(exchange.applied(0), 1);
  EXPECT_EQ(weights, (std::vector<float>{10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(exchange.apply_us(), 0u);
}

}  // namespace
}  // namespace nereus

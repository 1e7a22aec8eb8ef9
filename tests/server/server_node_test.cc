// ServerNode start-up: a worker may send data as soon as it has its own
// REGISTER_REPLY, before the server has handled its own. Here a fake
// coordinator (which also plays worker 0, so everything it sends travels on
// one connection, in order) sends INIT_PARTITION and PUSH before the server's
// REGISTER_REPLY. The server must keep them and handle them, in order, once
// it is ready: not block its receive thread (the REGISTER_REPLY behind them
// would never be read) and not refuse them as "not initialized".
#include "server/server_node.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "common/net/transport.h"
#include "tests/support/fixtures.h"

namespace nereus {
namespace {

// Messages the fake coordinator received (heartbeats left out).
class Inbox {
 public:
  void Put(StatusOr<Message> m) {
    if (m.ok() && m->header.op() == pb::HEARTBEAT) return;
    std::lock_guard<std::mutex> lock(mu_);
    q_.push_back(std::move(m));
    cv_.notify_all();
  }
  StatusOr<Message> Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return !q_.empty(); }))
      return DeadlineExceededError("nothing received within 30 s");
    StatusOr<Message> m = std::move(q_.front());
    q_.pop_front();
    return m;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StatusOr<Message>> q_;
};

Buffer Floats(std::vector<float> v) { return Buffer::Of(std::make_shared<const std::vector<float>>(std::move(v))); }

// A ServerNode run on its own thread against a fake coordinator: what the
// node sends arrives in inbox_; TearDown shuts the node down and joins it,
// however the test ended.
class ServerNodeTest : public ::testing::Test {
 protected:
  void StartServer(int startup_timeout_s) {
    coordinator_ = NewZmqTransport(ZmqTransportOptions());
    ASSERT_TRUE(coordinator_
                    ->Start("tcp://127.0.0.1:0", [this](const Endpoint&, StatusOr<Message> m,
                                                        const pb::Header&) { inbox_.Put(std::move(m)); })
                    .ok());
    self_ = coordinator_->endpoint();
    NodeOptions no;
    no.coordinator = self_;
    no.role = pb::SERVER;
    no.rank = 0;
    no.startup_timeout_s = startup_timeout_s;
    server_ = std::make_unique<ServerNode>(no);
    run_ = std::thread([this] { run_status_ = server_->Run(); });
  }
  // The next message must be the node's REGISTER: remembers its endpoint.
  void ExpectRegister(int n) {
    auto reg = inbox_.Next();
    ASSERT_TRUE(reg.ok()) << "REGISTER #" << n << ": " << reg.status() << " (the node gave up waiting)";
    ASSERT_EQ(reg->header.op(), pb::REGISTER) << n;
    ASSERT_EQ(reg->header.nodes_size(), 1);
    server_ep_ = reg->header.nodes(0).endpoint();
  }
  // A job of one server and one worker, the worker being this fake
  // coordinator's endpoint.
  Status SendRegisterReply() {
    Message reply;
    reply.header.set_op(pb::REGISTER_REPLY);
    reply.header.mutable_job()->set_num_servers(1);
    reply.header.mutable_job()->set_num_workers(1);
    reply.header.mutable_job()->set_partition_bytes(1 << 20);
    reply.header.mutable_job()->set_consistency(pb::BSP);
    reply.header.mutable_job()->set_heartbeat_interval_ms(1000);
    reply.header.mutable_job()->set_heartbeat_timeout_ms(60000);
    test::AddNode(&reply.header, pb::SERVER, 0, server_ep_);
    test::AddNode(&reply.header, pb::WORKER, 0, self_);
    return coordinator_->Send(server_ep_, std::move(reply));
  }
  // Shuts the node down; its Run's status.
  Status Stop() {
    if (!server_ep_.empty()) {
      Message shutdown;
      shutdown.header.set_op(pb::SHUTDOWN);
      (void)coordinator_->Send(server_ep_, std::move(shutdown));
      server_ep_.clear();
    }
    if (run_.joinable()) run_.join();
    return run_status_;
  }
  void TearDown() override { (void)Stop(); }

  Inbox inbox_;
  std::unique_ptr<Transport> coordinator_;
  Endpoint self_;
  Endpoint server_ep_;
  std::unique_ptr<ServerNode> server_;
  Status run_status_ = InternalError("Run did not return");
  std::thread run_;
};

TEST_F(ServerNodeTest, DataBeforeOwnRegisterReplyIsHandledInOrder) {
  StartServer(10);
  ExpectRegister(1);
  if (HasFatalFailure()) return;
  // 1. INIT_PARTITION of tensor 0 partition 0 = {1, 2, 3, 4}.
  Message init = test::InitPartitionMessage(11, 0, {1, 2, 3, 4}, test::SgdFromText("base_lr: 0.5 lr_policy: 'fixed'"));
  init.header.mutable_partition_meta()->set_tensor_name("t");
  ASSERT_TRUE(coordinator_->Send(server_ep_, std::move(init)).ok());
  // 2. PUSH of clock 0 with a pull of clock 1 riding on it.
  Message push;
  push.header.set_op(pb::PUSH);
  push.header.set_request_id(12);
  push.header.set_dtype(pb::FLOAT32);
  push.header.set_sender_role(pb::WORKER);
  push.header.set_pull_request_id(13);
  push.payload.push_back(Floats({1, 1, 2, 2}));
  ASSERT_TRUE(coordinator_->Send(server_ep_, std::move(push)).ok());
  // 3. Only now the server's REGISTER_REPLY.
  ASSERT_TRUE(SendRegisterReply().ok());

  std::vector<pb::Op> ops;
  std::vector<float> weights;
  int registers = 0;
  while (ops.size() < 3) {
    auto m = inbox_.Next();
    ASSERT_TRUE(m.ok()) << m.status() << " (after " << ops.size() << " replies)";
    // The node repeats its REGISTER every second until it is answered: on a
    // loaded machine one more can arrive before the reply reached it.
    if (m->header.op() == pb::REGISTER && ops.empty()) {
      ASSERT_LT(++registers, 30) << "the node kept registering after its REGISTER_REPLY";
      continue;
    }
    ops.push_back(m->header.op());
    ASSERT_NE(m->header.op(), pb::ERROR) << m->header.error();
    if (m->header.op() == pb::PULL_REPLY) {
      EXPECT_EQ(m->header.request_id(), 13u);
      EXPECT_EQ(m->header.clock(), 1);
      ASSERT_EQ(m->payload.size(), 1u);
      ASSERT_EQ(m->payload[0].size(), 4 * sizeof(float));
      weights.assign(m->payload[0].floats(), m->payload[0].floats() + 4);
    }
  }
  EXPECT_EQ(ops, (std::vector<pb::Op>{pb::INIT_ACK, pb::PUSH_ACK, pb::PULL_REPLY}));
  // Caffe's step with momentum 0: w - 0.5 * g, exact in binary.
  EXPECT_EQ(weights, (std::vector<float>{0.5f, 1.5f, 2.0f, 3.0f}));
  const Status st = Stop();
  EXPECT_TRUE(st.ok()) << st;
}

// A restarted node's REGISTER that the coordinator held (REGISTER_HELD) is
// let in silently once the member it replaces is found dead, and the job is
// then formed again: every other node rolls back and registers anew, which
// takes as long as a fresh start. The node waits a whole --startup_timeout_s
// after the coordinator's last word, not only until its start-up timeout
// counted from the first REGISTER ran out. (CI failed this way: the node gave
// up 1.1 s after being let in, while the coordinator waited for a worker.)
// Here --startup_timeout_s=3; the fake coordinator holds the second REGISTER
// (about 1 s in, hold 0), stays silent, and answers only the fourth (about
// 3 s in), which a node counting from its first REGISTER never sends.
TEST_F(ServerNodeTest, AHeldRegistrationWaitsAWholeStartupTimeoutAfterTheCoordinatorsLastWord) {
  StartServer(3);
  for (int n = 1; n <= 4; ++n) {
    ExpectRegister(n);
    if (HasFatalFailure()) return;
    if (n == 2) {
      Message held;
      held.header.set_op(pb::REGISTER_HELD);
      held.header.set_sender_role(pb::COORDINATOR);
      held.header.set_hold_ms(0);
      held.header.set_error("probing server 0 at tcp://127.0.0.1:1");
      ASSERT_TRUE(coordinator_->Send(server_ep_, std::move(held)).ok());
    }
  }
  ASSERT_TRUE(SendRegisterReply().ok());
  const Status st = Stop();
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace nereus

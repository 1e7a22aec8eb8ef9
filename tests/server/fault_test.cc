// Failures as real processes: a killed worker, malformed messages, a node that
// never shows up.
#include <gtest/gtest.h>
#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <regex>

#include "common/net/node.h"
#include "nereus/client.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/raw_worker_job.h"
#include "worker/client/options_proto.h"

namespace nereus {
namespace test {
namespace {

TEST(FaultTest, KilledWorkerAbortsEveryoneNamingIt) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(2, 3, kCrashHeartbeat);
  spec.worker_flags = {"--tensors=5000,100x100", "--iterations=1000000", "--compute_ms=5", "--display=0"};
  spec.external_workers = {0};  // This test is worker 0.
  LocalCluster cluster(spec, dir);

  // Outlive the client, whose pulls write into them.
  std::vector<float> a(5000, 0.0f), b(10000, 0.0f), ga(5000, 0.001f), gb(10000, 0.001f);
  auto client = Client::Connect(test::TestWorkerOptions(cluster.coordinator_address(), 0));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->RegisterTensor({"t0", {5000}}).ok());
  ASSERT_TRUE((*client)->RegisterTensor({"t1", {100, 100}}).ok());
  // Worker 0's solver must match what the synthetic workers send (they are
  // the same flags' defaults); its values initialize the servers.
  ASSERT_TRUE((*client)->Init(SgdConfigFromProto(test::SyntheticWorkerDefaultSgd()), {a.data(), b.data()}).ok());
  Status st;
  int64_t clock = 0;
  for (; clock < 5; ++clock) {
    ASSERT_TRUE((*client)->Push(0, ga.data(), clock).Wait().ok());
    ASSERT_TRUE((*client)->Push(1, gb.data(), clock).Wait().ok());
    ASSERT_TRUE((*client)->Pull(0, a.data(), clock + 1).Wait().ok());
  }
  cluster.worker(1).Signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  // Worker 1 may have pushed clock 5 before it died (it had the weights of
  // clock 5), so the pull of clock 6 may still complete; that of clock 7,
  // which needs its push of clock 6, never can: it must fail, naming the
  // dead worker.
  Status pull;
  for (; clock < 7 && pull.ok(); ++clock) {
    (*client)->Push(0, ga.data(), clock).Wait().IgnoreError();
    pull = (*client)->Pull(0, a.data(), clock + 1).Wait();
  }
  EXPECT_FALSE(pull.ok());
  EXPECT_NE(pull.message().find("worker 1"), std::string::npos) << pull;
  std::string report;
  // Every process ends (a hang would not): the heartbeat timeout (10 s)
  // after the kill, more on a loaded machine.
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  std::printf("every process ended %.1f s after the kill\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count());
  auto codes = cluster.codes();
  // Coordinator, servers 0 and 1, workers 1 (killed) and 2.
  ASSERT_EQ(codes.size(), 5u);
  EXPECT_EQ(codes[0], 1) << report;
  EXPECT_EQ(codes[1], 1) << report;
  EXPECT_EQ(codes[2], 1) << report;
  EXPECT_EQ(codes[3], 128 + SIGKILL);
  EXPECT_EQ(codes[4], 1) << report;
  for (Subprocess* p : {&cluster.coordinator(), &cluster.server(0), &cluster.server(1), &cluster.worker(2)})
    EXPECT_NE(p->Log().find("worker 1 (tcp://127.0.0.1:"), std::string::npos) << p->Log();
}

// A worker that cannot go on (its trainer failed) tells the job: every
// process ends at once, its error naming that worker and why. The job waits
// 20 s for a silent node, so without the worker's word the others would
// only end after that, calling it dead ("is dead: no heartbeat"), not failed.
TEST(FaultTest, AWorkerThatFailsEndsTheJobAtOnceNamingItAndWhy) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(1, 2, kPatientHeartbeat);
  spec.worker_flags = {"--tensors=5000", "--iterations=1000000", "--compute_ms=5", "--display=0"};
  spec.external_workers = {0};  // This test is worker 0.
  LocalCluster cluster(spec, dir);
  std::vector<float> w(5000, 0.0f), g(5000, 0.001f);  // Outlive the client, whose pulls write into them.
  auto client = Client::Connect(test::TestWorkerOptions(cluster.coordinator_address(), 0));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->RegisterTensor({"t0", {5000}}).ok());
  ASSERT_TRUE((*client)->Init(SgdConfigFromProto(test::SyntheticWorkerDefaultSgd()), {w.data()}).ok());
  for (int64_t clock = 0; clock < 3; ++clock) {
    ASSERT_TRUE((*client)->Push(0, g.data(), clock).Wait().ok());
    ASSERT_TRUE((*client)->Pull(0, w.data(), clock + 1).Wait().ok());
  }
  (*client)->Fail(InvalidArgumentError("iteration 3: record 27 is not a Datum"));
  // Its own waits now return why.
  const Status pull = (*client)->Pull(0, w.data(), 4).Wait();
  EXPECT_FALSE(pull.ok());
  EXPECT_NE(pull.message().find("iteration 3: record 27 is not a Datum"), std::string::npos) << pull;
  client->reset();  // The ABORT leaves as the client's transport stops.
  // Had the word not reached the job, the others would end 20 s after
  // worker 0 fell silent, calling it dead: the logs below tell which.
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (std::optional<int> code : cluster.codes()) EXPECT_EQ(code, 1) << report;
  for (Subprocess* p : {&cluster.coordinator(), &cluster.server(0), &cluster.worker(1)}) {
    EXPECT_TRUE(std::regex_search(p->Log(), std::regex("worker 0 \\(tcp://127\\.0\\.0\\.1:[0-9]+\\) failed: iteration "
                                                       "3: record 27 is not a Datum")))
        << p->Log();
    // Not the death of a silent node ("worker 0 (...) is dead: no heartbeat
    // for 20.0 s"); a slow coordinator's warning may be there.
    EXPECT_EQ(p->Log().find("is dead: no heartbeat"), std::string::npos) << p->Log();
  }
}

// An ABORT from a stranger is refused and the job runs on to its end.
TEST(FaultTest, AnAbortFromAStrangerIsRefused) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(1, 1, kPatientHeartbeat);
  spec.worker_flags = {"--tensors=100", "--iterations=40", "--compute_ms=5", "--display=0"};
  LocalCluster cluster(spec, dir);
  ASSERT_TRUE(cluster.coordinator().WaitForLog("job started", std::chrono::seconds(60))) << cluster.coordinator().Log();
  std::unique_ptr<Transport> stranger = NewZmqTransport(ZmqTransportOptions{});
  ASSERT_TRUE(stranger->Start("tcp://127.0.0.1:0", [](const Endpoint&, StatusOr<Message>, const pb::Header&) {}).ok());
  Message abort;
  abort.header.set_op(pb::ABORT);
  abort.header.set_sender_role(pb::WORKER);
  abort.header.set_sender_rank(0);
  abort.header.set_error("everything is on fire");
  ASSERT_TRUE(stranger->Send("tcp://" + cluster.coordinator_address(), std::move(abort)).ok());
  ASSERT_TRUE(cluster.coordinator().WaitForLog("refused a message (ABORT): the sender is not a member of this job",
                                               std::chrono::seconds(60)))
      << cluster.coordinator().Log();
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (std::optional<int> code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  stranger->Stop();
}

TEST(FaultTest, StartupTimeoutNamesTheMissingNode) {
  TempDir dir;
  ClusterSpec spec = test::JobOf(1, 2, {"--startup_timeout_s=4"});
  spec.worker_flags = {"--startup_timeout_s=20"};
  spec.server_flags = {"--startup_timeout_s=20"};
  spec.external_workers = {1};  // Never started.
  // The coordinator's 4 s must not include server 0's and worker 0's own
  // start: under load (flake_hunt.sh, beside a CI run) worker 0 had not yet
  // registered when its 2 s ran out, so the coordinator named worker 0 too, and
  // worker 0, never told, waited its own 20 s.
  spec.coordinator_last = true;
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(40), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_NE(code, 0) << report;
  for (Subprocess* p : {&cluster.coordinator(), &cluster.server(0), &cluster.worker(0)})
    EXPECT_NE(p->Log().find("start-up timed out after 4 s (--startup_timeout_s): missing worker 1"), std::string::npos)
        << p->Log();
}

// A REGISTER that is lost on the way (this coordinator ignores the first, as
// a connection that broke before the real one listened would lose it) is
// repeated until the coordinator answers, so the job still starts.
TEST(FaultTest, NodeRepeatsRegisterUntilTheCoordinatorAnswers) {
  std::mutex mu;
  int registers = 0;
  std::unique_ptr<Transport> coordinator = NewZmqTransport(ZmqTransportOptions{});
  Transport* c = coordinator.get();
  ASSERT_TRUE(coordinator
                  ->Start("tcp://127.0.0.1:0",
                          [&](const Endpoint& from, StatusOr<Message> m, const pb::Header&) {
                            if (!m.ok() || m->header.op() != pb::REGISTER) return;
                            int n;
                            {
                              std::lock_guard<std::mutex> lock(mu);
                              n = ++registers;
                            }
                            if (n != 2) return;
                            Message reply;
                            reply.header.set_op(pb::REGISTER_REPLY);
                            reply.header.set_sender_role(pb::COORDINATOR);
                            reply.header.mutable_job()->set_num_servers(0);
                            reply.header.mutable_job()->set_num_workers(1);
                            AddNode(&reply.header, pb::WORKER, 0, from);
                            ASSERT_TRUE(c->Send(from, std::move(reply)).ok());
                          })
                  .ok());
  Node node(TestWorkerNodeOptions(coordinator->endpoint(), 0, 20));
  const Status st = node.Start([](const Endpoint&, StatusOr<Message>, const pb::Header&) {}, [](const Status&) {});
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(node.rank(), 0);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(registers, 2);
}

// The coordinator's side of the same: a node that registered, but whose
// address book was lost, repeats REGISTER after the job has started and is
// sent the same book again (not refused as a stranger or a second node).
TEST(FaultTest, CoordinatorAnswersARepeatedRegisterWithTheSameAddressBook) {
  TempDir dir;
  LocalCluster cluster(test::OneServerAndTheTestAsWorker(), dir);
  test::Inbox replies;
  std::unique_ptr<Transport> worker = NewZmqTransport(ZmqTransportOptions{});
  ASSERT_TRUE(worker->Start("tcp://127.0.0.1:0", replies.Handler()).ok());
  const Endpoint coordinator = "tcp://" + cluster.coordinator_address();
  Message reg;
  reg.header.set_op(pb::REGISTER);
  reg.header.set_sender_role(pb::WORKER);
  reg.header.set_sender_rank(0);
  AddNode(&reg.header, pb::WORKER, 0, worker->endpoint());
  // Heartbeats are not sent by this bare transport; only REGISTER_REPLY or ERROR come.
  ASSERT_TRUE(worker->Send(coordinator, reg).ok());
  const Message first = replies.Next(std::chrono::seconds(20));
  ASSERT_EQ(first.header.op(), pb::REGISTER_REPLY) << first.header.error();
  ASSERT_TRUE(worker->Send(coordinator, reg).ok());
  const Message second = replies.Next(std::chrono::seconds(20));
  ASSERT_EQ(second.header.op(), pb::REGISTER_REPLY) << second.header.error();
  EXPECT_EQ(second.header.SerializeAsString(), first.header.SerializeAsString());
  ASSERT_EQ(first.header.nodes_size(), 2);

  Message done;
  done.header.set_op(pb::DONE);
  done.header.set_sender_role(pb::WORKER);
  done.header.set_sender_rank(0);
  ASSERT_TRUE(worker->Send(coordinator, std::move(done)).ok());
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  worker->Stop();
}

// Epochs: a node in epoch 1 drops a member's data of another epoch, stamps
// its own messages with epoch 1, ignores a ROLLBACK that is not newer, and
// turns a newer one into a ROLLBACK status for its owner.
TEST(FaultTest, NodeDropsDataOfAnotherEpochAndRollsBackOnlyOnANewerOne) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Message> at_peer;  // What the node sends its peer.
  std::unique_ptr<Transport> peer = NewZmqTransport(ZmqTransportOptions{});
  ASSERT_TRUE(peer->Start("tcp://127.0.0.1:0",
                          [&](const Endpoint&, StatusOr<Message> m, const pb::Header&) {
                            if (!m.ok()) return;
                            std::lock_guard<std::mutex> lock(mu);
                            at_peer.push_back(std::move(m).value());
                            cv.notify_all();
                          })
                  .ok());
  std::unique_ptr<Transport> coordinator = NewZmqTransport(ZmqTransportOptions{});
  Transport* c = coordinator.get();
  const Endpoint peer_ep = peer->endpoint();
  ASSERT_TRUE(coordinator
                  ->Start("tcp://127.0.0.1:0",
                          [&, c](const Endpoint& from, StatusOr<Message> m, const pb::Header&) {
                            if (!m.ok() || m->header.op() != pb::REGISTER) return;
                            Message reply;
                            reply.header.set_op(pb::REGISTER_REPLY);
                            reply.header.set_sender_role(pb::COORDINATOR);
                            reply.header.set_epoch(1);
                            pb::JobConfig* job = reply.header.mutable_job();
                            job->set_num_servers(0);
                            job->set_num_workers(2);
                            job->set_epoch(1);
                            job->set_heartbeat_interval_ms(1000);
                            job->set_heartbeat_timeout_ms(60000);
                            for (int r = 0; r < 2; ++r) AddNode(&reply.header, pb::WORKER, r, r == 0 ? from : peer_ep);
                            (void)c->Send(from, std::move(reply));
                          })
                  .ok());
  std::deque<uint32_t> data_epochs;  // Epochs of the data the node let through.
  Status aborted;
  int aborts = 0;
  Node node(TestWorkerNodeOptions(coordinator->endpoint(), 0, 20));
  ASSERT_TRUE(node.Start(
                      [&](const Endpoint&, StatusOr<Message> m, const pb::Header&) {
                        if (!m.ok()) return;
                        std::lock_guard<std::mutex> lock(mu);
                        data_epochs.push_back(m->header.epoch());
                        cv.notify_all();
                      },
                      [&](const Status& why) {
                        std::lock_guard<std::mutex> lock(mu);
                        aborted = why;
                        ++aborts;
                        cv.notify_all();
                      })
                  .ok());
  EXPECT_EQ(node.job().epoch(), 1u);

  // The peer sends epoch 0, then epoch 1, on one connection (in order).
  for (uint32_t epoch : {0u, 1u}) {
    Message m;
    m.header.set_op(pb::PING);
    m.header.set_sender_role(pb::WORKER);
    m.header.set_sender_rank(1);
    m.header.set_epoch(epoch);
    ASSERT_TRUE(peer->Send(node.endpoint(), std::move(m)).ok());
  }
  // The node's own messages carry its epoch.
  Message pong;
  pong.header.set_op(pb::PONG);
  ASSERT_TRUE(node.Send(peer_ep, std::move(pong)).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return !data_epochs.empty() && !at_peer.empty(); }));
    EXPECT_EQ(data_epochs, std::deque<uint32_t>{1u});  // Epoch 0's came first and was dropped.
    EXPECT_EQ(at_peer.front().header.epoch(), 1u);
  }

  // ROLLBACK to epoch 1 (not newer) is ignored; to epoch 2 it ends the node's epoch.
  for (uint32_t epoch : {1u, 2u}) {
    Message m;
    m.header.set_op(pb::ROLLBACK);
    m.header.set_sender_role(pb::COORDINATOR);
    m.header.set_epoch(epoch);
    m.header.set_error("worker 1 rejoined");
    ASSERT_TRUE(c->Send(node.endpoint(), std::move(m)).ok());
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return aborts > 0; }));
    EXPECT_EQ(aborts, 1);
    EXPECT_TRUE(IsRollback(aborted)) << aborted;
    EXPECT_EQ(aborted.message(), "the job rolls back to its newest checkpoint (epoch 2): worker 1 rejoined");
  }
  EXPECT_TRUE(IsRollback(node.aborted()));
  coordinator->Stop();
  peer->Stop();
}

TEST(FaultTest, WorkerWithoutCoordinatorGivesUpNamingTheAddress) {
  TempDir dir;
  const int port = test::FreePort();
  auto w = test::Subprocess::Start(
      {test::BinaryPath("nereus_worker"), "--coordinator=127.0.0.1:" + std::to_string(port), "--startup_timeout_s=1"},
      dir.File("w.log"));
  auto code = w->WaitFor(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(w->Log().find("no answer from the coordinator at tcp://127.0.0.1:" + std::to_string(port) + " within 1 s"),
            std::string::npos)
      << w->Log();
}

TEST(FaultTest, BadFlagsExitNonZeroNamingTheFlag) {
  TempDir dir;
  struct Case {
    std::vector<std::string> argv;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{test::BinaryPath("nereus_server"), "--role=coordinator", "--consistency=eventual"},
       "--consistency must be bsp, ssp or async, got \"eventual\""},
      {{test::BinaryPath("nereus_server"), "--role=replica"}, "--role must be server or coordinator"},
      {{test::BinaryPath("nereus_server"), "--role=coordinator", "--num_workers=0"}, "--num_workers must be >= 1"},
      {{test::BinaryPath("nereus_worker"), "--schedule=fast"},
       "--schedule must be sequential, wfbp, priority or full, got \"fast\""},
      {{test::BinaryPath("nereus_worker"), "--streams=0"}, "--streams must be >= 1"},
      {{test::BinaryPath("nereus_worker"), "--tensors=10x0"}, "bad tensor shape \"10x0\""},
      {{test::BinaryPath("nereus_worker"), "--no_such_flag=1"}, "no_such_flag"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    auto p = Subprocess::Start(cases[i].argv, dir.File("bad" + std::to_string(i) + ".log"));
    auto code = p->WaitFor(std::chrono::seconds(20));
    ASSERT_TRUE(code.has_value()) << cases[i].expect;
    EXPECT_NE(*code, 0) << cases[i].expect;
    EXPECT_NE(p->Log().find(cases[i].expect), std::string::npos) << p->Log();
  }
}

std::string Serialize(pb::Header h) {
  std::string s;
  CHECK(h.SerializeToString(&s));
  return s;
}

TEST(FaultTest, ServerAnswersMalformedMessagesWithErrorsAndKeepsItsParameters) {
  RawWorkerJob job;
  ASSERT_TRUE(job.worker.Start().ok());
  const Endpoint server = job.worker.node().server(0);

  // A valid partition: tensor 0 partition 0, 8 floats.
  const std::vector<float> initial = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(
      job.worker.node()
          .Send(server, test::InitPartitionMessage(1, 0, initial, test::SgdFromText("base_lr: 0.5 lr_policy: 'fixed'")))
          .ok());
  ASSERT_EQ(job.worker.Next().header.op(), pb::INIT_ACK);

  auto grad = std::make_shared<std::vector<float>>(8, 1.0f);
  auto push_header = [&](uint64_t id) {
    pb::Header h;
    h.set_version(pb::PROTOCOL_VERSION_CURRENT);
    h.set_op(pb::PUSH);
    h.set_request_id(id);
    h.set_dtype(pb::FLOAT32);
    h.set_payload_bytes(32);
    h.set_sender_role(pb::WORKER);
    return h;
  };
  struct Case {
    std::string name;
    std::vector<Buffer> frames;
    std::string expect;
  };
  std::vector<Case> cases;
  {
    pb::Header h = push_header(10);
    h.set_error(std::string(40, 'x'));  // A long field for the truncation to cut.
    std::string s = Serialize(h);
    s.resize(s.size() - 20);
    cases.push_back({"truncated header", {Buffer::CopyOf(s.data(), s.size()), Buffer::Of(grad)}, "does not parse"});
  }
  {
    std::string s = Serialize(push_header(11));
    cases.push_back({"payload length disagrees",
                     {Buffer::CopyOf(s.data(), s.size()), Buffer::Of(grad).Slice(0, 28)},
                     "header says payload_bytes=32 but 1 payload frame(s) carry 28 bytes"});
  }
  {
    pb::Header h = push_header(12);
    h.set_tensor(5);
    std::string s = Serialize(h);
    cases.push_back(
        {"unknown tensor", {Buffer::CopyOf(s.data(), s.size()), Buffer::Of(grad)}, "unknown tensor 5 partition 0"});
  }
  {
    pb::Header h = push_header(13);
    h.set_dtype(pb::DTYPE_UNSPECIFIED);
    std::string s = Serialize(h);
    cases.push_back({"wrong dtype", {Buffer::CopyOf(s.data(), s.size()), Buffer::Of(grad)}, "unsupported dtype"});
  }
  {
    pb::Header h = push_header(14);
    h.set_version(9);
    std::string s = Serialize(h);
    cases.push_back({"other protocol version",
                     {Buffer::CopyOf(s.data(), s.size()), Buffer::Of(grad)},
                     "peer speaks version 9, this node speaks version 1"});
  }
  {
    pb::Header h = push_header(15);
    h.set_payload_bytes(16);
    std::string s = Serialize(h);
    cases.push_back({"wrong shape",
                     {Buffer::CopyOf(s.data(), s.size()), Buffer::Of(grad).Slice(0, 16)},
                     "holds 8 floats (32 bytes) but the payload has 16 bytes"});
  }
  for (auto& c : cases) {
    ASSERT_TRUE(job.worker.node().transport()->SendFrames(server, c.frames).ok());
    Message reply = job.worker.Next();
    EXPECT_EQ(reply.header.op(), pb::ERROR) << c.name;
    EXPECT_NE(reply.header.error().find(c.expect), std::string::npos) << c.name << ": " << reply.header.error();
  }
  // The parameters are unchanged and the server still serves.
  ASSERT_TRUE(job.worker.node().Send(server, PullMessage(20, 0, 0)).ok());
  Message weights = job.worker.Next();
  ASSERT_EQ(weights.header.op(), pb::PULL_REPLY);
  EXPECT_EQ(weights.header.clock(), 0);
  ASSERT_EQ(weights.payload_bytes(), 32u);
  EXPECT_EQ(std::memcmp(weights.payload[0].data(), initial.data(), 32), 0);
  // A valid push after all that is applied normally: w -= 0.5 * 1.
  ASSERT_TRUE(
      job.worker.node()
          .transport()
          ->SendFrames(server, {Buffer::CopyOf(Serialize(push_header(21)).data(), Serialize(push_header(21)).size()),
                                Buffer::Of(grad)})
          .ok());
  EXPECT_EQ(job.worker.Next().header.op(), pb::PUSH_ACK);
  ASSERT_TRUE(job.worker.node().Send(server, PullMessage(0, 0, 1)).ok());
  Message after = job.worker.Next();
  ASSERT_EQ(after.header.op(), pb::PULL_REPLY);
  EXPECT_EQ(after.payload[0].floats()[0], 0.5f);
  EXPECT_EQ(after.payload[0].floats()[7], 7.5f);

  ASSERT_TRUE(job.worker.node().Finish().ok());
  std::string report;
  ASSERT_TRUE(job.cluster.WaitAll(std::chrono::seconds(15), &report)) << report;
  for (auto code : job.cluster.codes()) EXPECT_EQ(code, 0) << report;
}

}  // namespace
}  // namespace test
}  // namespace nereus

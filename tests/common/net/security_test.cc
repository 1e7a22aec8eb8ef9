// Hostile peers and CURVE: refusal logs, frame limits, identities, a network
// fuzz of a live server, and a job that admits only its own keys. Multi-
// process tests run the coordinator and server as real processes on
// 127.0.0.1; the test itself joins as the worker.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <zmq.hpp>

#include "common/net/curve_keys.h"
#include "common/net/node.h"
#include "common/net/refusal_log.h"
#include "common/net/transport.h"
#include "server/param_server.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/raw_worker_job.h"

namespace nereus {
namespace test {
namespace {

// ---------------------------------------------------------------- unit level

TEST(RefusalLogTest, EscapesIdentitiesAsPrintableAscii) {
  EXPECT_EQ(EscapeBytes("tcp://127.0.0.1:5"), "tcp://127.0.0.1:5");
  EXPECT_EQ(EscapeBytes(std::string("a\0b\n\xff\\", 6)), "a\\x00b\\x0a\\xff\\x5c");
  EXPECT_EQ(EscapeBytes(std::string(10, 'z'), 4), "zzzz...(10 bytes)");
}

TEST(RefusalLogTest, LogsOncePerPeerPerIntervalAndCountsTheRest) {
  RefusalLog log("test", std::chrono::hours(1), /*max_peers=*/2);
  EXPECT_TRUE(log.Refuse("a", "refused"));
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(log.Refuse("a", "refused"));
  EXPECT_TRUE(log.Refuse("b", "refused"));
  // A third peer, beyond max_peers: shares one entry with every later one.
  EXPECT_TRUE(log.Refuse("c", "refused"));
  EXPECT_FALSE(log.Refuse("d", "refused"));
  EXPECT_FALSE(log.Refuse(std::string("\x01\x02", 2), "refused"));
  EXPECT_EQ(log.total(), 1004u);
}

TEST(RefusalLogTest, LogsAgainAfterTheInterval) {
  RefusalLog log("test", std::chrono::milliseconds(0));
  EXPECT_TRUE(log.Refuse("a", "refused"));
  EXPECT_TRUE(log.Refuse("a", "refused"));
}

// A raw DEALER with a chosen routing identity.
zmq::socket_t Dealer(zmq::context_t& ctx, const std::string& identity, const std::string& to) {
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::routing_id, identity);
  s.set(zmq::sockopt::linger, 0);
  s.connect(to);
  return s;
}

// A transport on 127.0.0.1 whose received messages can be waited for.
class Inbox {
 public:
  explicit Inbox(ZmqTransportOptions o = {}) : t_(NewZmqTransport(o)) {
    CHECK(t_->Start("tcp://127.0.0.1:0", [this](const Endpoint& from, StatusOr<Message> m, const pb::Header&) {
              std::lock_guard<std::mutex> lock(mu_);
              got_.push_back({from, m.ok() ? "" : m.status().message(), m.ok() ? m->header.request_id() : 0});
              cv_.notify_all();
            }).ok());
  }
  struct Got {
    Endpoint from;
    std::string error;  // Empty: decoded.
    uint64_t request_id;
  };
  // The next message, or a Got with from "timeout" after 10 s.
  Got Next() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !got_.empty(); })) return {"timeout", "", 0};
    Got g = got_.front();
    got_.pop_front();
    return g;
  }
  // The next message is request `request_id`, decoded, from `from`.
  void ExpectNext(const Endpoint& from, uint64_t request_id) {
    const Got g = Next();
    EXPECT_EQ(g.from, from);
    EXPECT_EQ(g.error, "");
    EXPECT_EQ(g.request_id, request_id);
  }
  // A raw DEALER of identity `identity` connected to this transport.
  zmq::socket_t Connect(const std::string& identity) { return Dealer(ctx_, identity, endpoint()); }
  size_t pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_.size();
  }
  const Endpoint& endpoint() const { return t_->endpoint(); }

 private:
  zmq::context_t ctx_{1};  // Connect's; first: closed last.
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Got> got_;
  std::unique_ptr<Transport> t_;  // Last: stopped first.
};

std::string HeaderBytes(pb::Op op, uint64_t request_id, uint64_t payload_bytes = 0) {
  pb::Header h;
  h.set_version(pb::PROTOCOL_VERSION_CURRENT);
  h.set_op(op);
  h.set_request_id(request_id);
  h.set_payload_bytes(payload_bytes);
  std::string s;
  CHECK(h.SerializeToString(&s));
  return s;
}

TEST(TransportLimitsTest, TooManyFramesAreDrainedAndRefusedNamingTheLimit) {
  ZmqTransportOptions o;
  o.max_frames = 8;
  Inbox inbox(o);
  auto d = inbox.Connect("tcp://127.0.0.1:1");
  const std::string h = HeaderBytes(pb::PUSH, 7);
  d.send(zmq::buffer(h), zmq::send_flags::sndmore);
  for (int i = 0; i < 19; ++i) d.send(zmq::str_buffer("x"), i < 18 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  Inbox::Got g = inbox.Next();
  EXPECT_EQ(g.from, "tcp://127.0.0.1:1");
  EXPECT_EQ(g.error, "message too large: 20 frames of " + std::to_string(h.size() + 19) +
                         " bytes in all exceed the limit of 8 frames or 4294967296 bytes");
  // The next message from the same peer is whole again.
  d.send(zmq::buffer(HeaderBytes(pb::PULL, 8)), zmq::send_flags::none);
  inbox.ExpectNext("tcp://127.0.0.1:1", 8);
}

TEST(TransportLimitsTest, AnOversizedFrameDropsTheConnectionAndNothingArrives) {
  ZmqTransportOptions o;
  o.max_frame_bytes = 4096;
  Inbox inbox(o);
  auto big = inbox.Connect("tcp://127.0.0.1:2");
  const std::string h = HeaderBytes(pb::PUSH, 1, 8192);
  std::string payload(8192, 'p');
  big.send(zmq::buffer(h), zmq::send_flags::sndmore);
  big.send(zmq::buffer(payload), zmq::send_flags::none);
  auto small = inbox.Connect("tcp://127.0.0.1:3");
  small.send(zmq::buffer(HeaderBytes(pb::PULL, 2)), zmq::send_flags::none);
  inbox.ExpectNext("tcp://127.0.0.1:3", 2);
  EXPECT_EQ(inbox.pending(), 0u);
}

TEST(TransportLimitsTest, AnIdentityNamingAnotherHostIsDropped) {
  Inbox inbox;
  // Each of these would make the receiver connect to an address the sender
  // chose (or is no endpoint at all): all dropped before any handler.
  std::vector<zmq::socket_t> liars;
  for (const std::string& id : {std::string("tcp://10.9.8.7:80"), std::string("tcp://127.0.0.1:notaport"),
                                std::string("\x00\x01\xfe garbage", 12), std::string("ipc:///tmp/x:1")}) {
    liars.push_back(inbox.Connect(id));
    liars.back().send(zmq::buffer(HeaderBytes(pb::PULL, 1)), zmq::send_flags::none);
  }
  // Sent after the liars' messages on connections that were opened later.
  auto honest = inbox.Connect("tcp://127.0.0.1:4");
  for (uint64_t id = 2; id < 5; ++id) honest.send(zmq::buffer(HeaderBytes(pb::PULL, id)), zmq::send_flags::none);
  for (uint64_t id = 2; id < 5; ++id) inbox.ExpectNext("tcp://127.0.0.1:4", id);
  EXPECT_EQ(inbox.pending(), 0u);
}

// The same peer connecting again (restarted at its address, or reconnected)
// while the receiver still holds its first connection takes over from it:
// what it sends arrives. Under ZeroMQ's default the second connection stayed
// open and everything on it was dropped: a server stopped while its
// coordinator was killed and restarted never heard the new coordinator.
TEST(TransportLimitsTest, ASecondConnectionUnderAnIdentityTakesOverFromTheFirst) {
  Inbox inbox;
  std::vector<zmq::socket_t> connections;  // The first stays open.
  for (uint64_t id = 1; id <= 2; ++id) {
    connections.push_back(inbox.Connect("tcp://127.0.0.1:5"));
    connections.back().send(zmq::buffer(HeaderBytes(pb::PULL, id)), zmq::send_flags::none);
    inbox.ExpectNext("tcp://127.0.0.1:5", id);
  }
  EXPECT_EQ(inbox.pending(), 0u);
}

// A node bound to a second address of its host (127.0.0.2 here; a cluster's
// second network in practice) connects from that address, so its messages
// pass the identity check: the kernel would otherwise pick 127.0.0.1 as the
// source (route to 127.0.0.1), and every message would be dropped.
TEST(TransportLimitsTest, ANodeBoundToASecondAddressSendsFromIt) {
  Inbox inbox;
  std::unique_ptr<Transport> sender = NewZmqTransport({});
  ASSERT_TRUE(sender->Start("tcp://127.0.0.2:0", [](const Endpoint&, StatusOr<Message>, const pb::Header&) {}).ok());
  ASSERT_EQ(sender->endpoint().rfind("tcp://127.0.0.2:", 0), 0u) << sender->endpoint();
  Message m;
  m.header.set_op(pb::PULL);
  m.header.set_request_id(42);
  ASSERT_TRUE(sender->Send(inbox.endpoint(), std::move(m)).ok());
  inbox.ExpectNext(sender->endpoint(), 42);
  sender->Stop();
}

// Host-local aggregation groups the workers by the host of their endpoints,
// in rank order: the first is the host's aggregating worker.
TEST(NodeTest, HostGroupsAreTheWorkersOfOneHostInRankOrder) {
  EXPECT_EQ(HostOf("tcp://10.0.0.2:7001"), "10.0.0.2");
  EXPECT_EQ(HostOf("127.0.0.1:80"), "127.0.0.1");
  EXPECT_EQ(HostOf("tcp://[::1]:7001"), "[::1]");
  EXPECT_EQ(HostOf("tcp://hostA"), "hostA");
  const std::vector<std::string> workers = {"tcp://10.0.0.2:7001", "tcp://10.0.0.1:7001", "tcp://10.0.0.2:7002",
                                            "tcp://10.0.0.3:7001", "tcp://10.0.0.1:7002"};
  EXPECT_EQ(HostGroupOf(workers, 0), (std::vector<int>{0, 2}));
  EXPECT_EQ(HostGroupOf(workers, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(HostGroupOf(workers, 1), (std::vector<int>{1, 4}));
  EXPECT_EQ(HostGroupOf(workers, 4), (std::vector<int>{1, 4}));
  EXPECT_EQ(HostGroupOf(workers, 3), (std::vector<int>{3}));
}

TEST(NodeTest, WildcardBindIsRefusedAndPublicBindWarns) {
  Status st = CheckBindHost("0.0.0.0", false);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--bind_host=0.0.0.0 is a wildcard"), std::string::npos) << st;
  EXPECT_TRUE(CheckBindHost("127.0.0.1", false).ok());
  EXPECT_TRUE(CheckBindHost("10.1.2.3", false).ok());  // Warns (see docs/SECURITY.md).
  EXPECT_TRUE(IsLoopbackHost("127.0.0.5"));
  EXPECT_FALSE(IsLoopbackHost("10.1.2.3"));
}

TEST(CurveKeysTest, KeygenWritesPairsThatLoadAndMismatchesAreNamed) {
  TempDir dir;
  const std::string keys = dir.File("keys");
  ASSERT_TRUE(WriteJobKeys(keys, 2, 3).ok());
  auto k = LoadCurveKeys(keys, "worker-2");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->members.size(), 6u);  // coordinator, 2 servers, 3 workers.
  EXPECT_EQ(k->members.at(k->node_public), "worker-2");
  EXPECT_EQ(k->job_public.size(), 40u);
  EXPECT_EQ(WriteJobKeys(keys, 1, 1).code(), StatusCode::kFailedPrecondition);  // Never overwrites.
  auto missing = LoadCurveKeys(keys, "worker-3");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(keys + "/worker-3.public"), std::string::npos) << missing.status();
  // A secret that is not its public key's.
  std::ofstream(keys + "/worker-0.secret", std::ios::trunc) << test::ReadFile(keys + "/worker-1.secret");
  auto mismatch = LoadCurveKeys(keys, "worker-0");
  EXPECT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("worker-0.secret does not belong to"), std::string::npos)
      << mismatch.status();
}

// ----------------------------------------------------------- multi-process

constexpr int kFloats = 64;

pb::SgdConfig TestSgd() {
  pb::SgdConfig sgd;
  sgd.set_base_lr(0.1f);
  sgd.set_lr_policy("fixed");
  sgd.set_momentum(0.9f);
  sgd.set_weight_decay(0.001f);
  return sgd;
}

std::vector<float> Initial() {
  std::vector<float> v(kFloats);
  for (int i = 0; i < kFloats; ++i) v[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  return v;
}

std::vector<float> Gradient(int clock) {
  std::vector<float> v(kFloats);
  for (int i = 0; i < kFloats; ++i) v[i] = 0.01f * static_cast<float>((i * 13 + clock * 5) % 11) - 0.05f;
  return v;
}

Message InitMessage() {
  Message m;
  m.header.set_op(pb::INIT_PARTITION);
  m.header.set_request_id(1);
  m.header.set_dtype(pb::FLOAT32);
  auto* meta = m.header.mutable_partition_meta();
  meta->set_length(kFloats);
  meta->set_lr_mult(1);
  meta->set_decay_mult(1);
  *m.header.mutable_sgd() = TestSgd();
  m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(Initial())));
  return m;
}

Message PushMessage(int clock) {
  Message m;
  m.header.set_op(pb::PUSH);
  m.header.set_request_id(100 + clock);
  m.header.set_dtype(pb::FLOAT32);
  m.header.set_clock(clock);
  m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(Gradient(clock))));
  return m;
}

Message PullMessage(int clock) {
  Message m;
  m.header.set_op(pb::PULL);
  m.header.set_request_id(200 + clock);
  m.header.set_clock(clock);
  return m;
}

// The weights after pushes for clocks 0..clocks-1 with no one else around:
// the same ParamServer code, in this process.
std::vector<float> Reference(int clocks) {
  struct Sink : ReplySink {
    void Reply(const Endpoint&, Message) override {}
  } sink;
  ParamServer server(ParamServerOptions{}, &sink);
  auto decode = [](Message m) {
    const std::string h = EncodeHeader(&m);
    return DecodeMessage(Buffer::CopyOf(h.data(), h.size()), m.payload);
  };
  pb::Header none;
  server.Handle("w", 0, decode(InitMessage()), none);
  for (int c = 0; c < clocks; ++c) server.Handle("w", 0, decode(PushMessage(c)), none);
  auto snap = server.Snapshot(0, 0);
  CHECK(snap.ok());
  CHECK_EQ(snap->second, clocks);
  return snap->first;
}

// Init, `clocks` pushes and a pull of the result through the real server.
std::vector<float> TrainThrough(RawWorker* w, int first_clock, int clocks) {
  for (int c = first_clock; c < first_clock + clocks; ++c) {
    Message ack = w->Call(PushMessage(c));
    EXPECT_EQ(ack.header.op(), pb::PUSH_ACK) << ack.header.error();
  }
  Message r = w->Call(PullMessage(first_clock + clocks));
  EXPECT_EQ(r.header.op(), pb::PULL_REPLY) << r.header.error();
  EXPECT_EQ(r.header.clock(), first_clock + clocks);
  if (r.payload_bytes() != kFloats * sizeof(float)) return {};
  return std::vector<float>(r.payload[0].floats(), r.payload[0].floats() + kFloats);
}

size_t VmHwmKb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}

// Speaks ZMTP 3.0 (NULL mechanism) over a plain TCP socket, as a DEALER with
// `identity`, then announces one frame of `announced` bytes and sends up to
// `send` bytes of it. Returns how many the peer took before closing.
uint64_t LyingFrame(const std::string& endpoint, const std::string& identity, uint64_t announced, uint64_t send) {
  const size_t colon = endpoint.rfind(':');
  const int port = std::stoi(endpoint.substr(colon + 1));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  std::string greeting(64, '\0');
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;
  std::memcpy(&greeting[12], "NULL", 4);
  std::string ready;
  ready += '\x05';
  ready += "READY";
  auto prop = [&](const std::string& k, const std::string& v) {
    ready += static_cast<char>(k.size());
    ready += k;
    const uint32_t n = htonl(static_cast<uint32_t>(v.size()));
    ready.append(reinterpret_cast<const char*>(&n), 4);
    ready += v;
  };
  prop("Socket-Type", "DEALER");
  prop("Identity", identity);
  std::string out = greeting;
  out += '\x04';
  out += static_cast<char>(ready.size());
  out += ready;
  out += '\x02';  // A long message frame, no more frames.
  for (int i = 7; i >= 0; --i) out += static_cast<char>((announced >> (8 * i)) & 0xff);
  CHECK_EQ(::send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
  std::vector<char> block(1 << 20, 'z');
  uint64_t sent = 0;
  while (sent < send) {
    const ssize_t n = ::send(fd, block.data(), std::min<uint64_t>(block.size(), send - sent), MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<uint64_t>(n);
  }
  close(fd);
  return sent;
}

// Garbage: random and mutated messages. `member_identity`, when not empty, is
// used for the mutated requests (a stranger on this host using a member's
// endpoint with a stream suffix); every such request carries at least one
// fault that must get it refused, so the weights may not change.
class Garbage {
 public:
  explicit Garbage(uint32_t seed) : rng_(seed) {}

  // One multipart message.
  std::vector<std::string> Next(bool must_be_invalid) {
    std::vector<std::string> frames;
    const int kind = Pick(6);
    if (kind == 0) {  // Random bytes, random frame count.
      const int n = 1 + Pick(5);
      for (int i = 0; i < n; ++i) frames.push_back(RandomBytes(Pick(64)));
      return frames;
    }
    pb::Header h;
    h.set_version(pb::PROTOCOL_VERSION_CURRENT);
    const pb::Op ops[] = {pb::PUSH, pb::PULL, pb::INIT_PARTITION, pb::PING, pb::REGISTER, pb::ERROR, pb::PULL_REPLY};
    h.set_op(ops[Pick(7)]);
    h.set_request_id(1000000 + Pick(1000));
    h.set_tensor(Pick(3) == 0 ? 0 : static_cast<int32_t>(rng_()));
    h.set_partition(Pick(3) == 0 ? 0 : static_cast<int32_t>(rng_()));
    h.set_clock(Pick(2) ? Pick(4) : static_cast<int64_t>(rng_()) << Pick(40));
    h.set_dtype(Pick(8) ? pb::FLOAT32 : pb::DTYPE_UNSPECIFIED);
    h.set_priority(static_cast<int32_t>(rng_()));
    if (Pick(4) == 0) h.set_pull_request_id(rng_());
    if (h.op() == pb::INIT_PARTITION) {
      h.mutable_partition_meta()->set_length(Pick(2) ? kFloats : (uint64_t{1} << 62) + Pick(3));
      *h.mutable_sgd() = TestSgd();
      if (Pick(2)) h.mutable_sgd()->set_lr_policy(RandomBytes(6));
    }
    if (Pick(5) == 0) {  // A merged message with lying parts.
      const int parts = Pick(4);
      for (int i = 0; i < parts; ++i) {
        pb::Part* p = h.add_parts();
        p->set_tensor(Pick(2));
        p->set_clock(Pick(3) - 1);
        p->set_payload_bytes(Pick(2) ? kFloats * 4 : rng_());
      }
    }
    if (Pick(6) == 0) h.set_error(RandomBytes(20));  // Not UTF-8.
    std::vector<std::string> payload;
    const int frames_n = Pick(3);
    uint64_t bytes = 0;
    for (int i = 0; i < frames_n; ++i) {
      payload.push_back(std::string(Pick(2) ? kFloats * 4 : Pick(300), '\x01'));
      bytes += payload.back().size();
    }
    h.set_payload_bytes(Pick(4) ? bytes : rng_());  // Sometimes a lie.
    if (must_be_invalid) {
      // At least one fault the server must refuse, whatever else is right.
      // Tensors >= 7 and clocks >= 1000 are never valid in the test's job
      // (its only partition is tensor 0 partition 0, at clock 1; pushes may run 64
      // ahead); header tensor and clock only count in an unmerged message.
      switch (Pick(5)) {
        case 0:
          h.set_version(2 + Pick(100));
          break;
        case 1:
          h.set_payload_bytes(bytes + 1 + Pick(1000));
          break;
        case 2:
          h.clear_parts();
          h.set_tensor(7 + Pick(1000));
          break;
        case 3:
          h.clear_parts();
          h.set_clock(Pick(2) ? -1 - static_cast<int64_t>(Pick(1000))
                              : 1000 + (static_cast<int64_t>(rng_()) << Pick(40)));
          break;
        default:
          h.set_dtype(pb::DTYPE_UNSPECIFIED);
          break;
      }
    }
    std::string s;
    CHECK(h.SerializeToString(&s));
    // Byte-level damage only where any outcome is fine (it could repair a fault).
    if (!must_be_invalid && Pick(6) == 0) s.resize(Pick(static_cast<int>(s.size()) + 1));  // Truncated.
    if (!must_be_invalid && Pick(6) == 0 && !s.empty())
      s[Pick(static_cast<int>(s.size()))] ^= static_cast<char>(1 + Pick(255));
    frames.push_back(s);
    for (auto& p : payload) frames.push_back(std::move(p));
    return frames;
  }

  int Pick(int n) { return n <= 0 ? 0 : static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  std::string RandomBytes(int n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng_());
    return s;
  }

 private:
  std::mt19937 rng_;
};

void SendAll(zmq::socket_t& s, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

TEST(HostileInputTest, HundredThousandBadMessagesLeaveTheServerServingAndItsWeightsAsWithout) {
  RawWorkerJob job;
  ASSERT_TRUE(job.worker.Start().ok());
  const Endpoint server = job.worker.node().server(0);
  ASSERT_EQ(job.worker.Call(InitMessage()).header.op(), pb::INIT_ACK);
  Message ack = job.worker.Call(PushMessage(0));
  ASSERT_EQ(ack.header.op(), pb::PUSH_ACK) << ack.header.error();

  [[maybe_unused]] const size_t hwm_before = VmHwmKb(job.cluster.server(0).pid());
  // A frame announced at 1 GiB, of which 300 MiB are sent: refused at its
  // size, never allocated (the server's peak memory does not grow by it).
  LyingFrame(server, "tcp://127.0.0.1:9", uint64_t{1} << 30, uint64_t{300} << 20);
  LyingFrame(server, "tcp://127.0.0.1:9", ~uint64_t{0} >> 1, 1 << 20);

  zmq::context_t ctx(1);
  std::vector<zmq::socket_t> strangers;
  const std::string port = std::to_string(test::FreePort());
  strangers.push_back(Dealer(ctx, "tcp://127.0.0.1:" + port, server));               // Not a member.
  strangers.push_back(Dealer(ctx, "tcp://10.1.2.3:80", server));                     // Not its host.
  strangers.push_back(Dealer(ctx, std::string("\x00\xff\x01 binary", 10), server));  // Not an endpoint.
  strangers.push_back(Dealer(ctx, "tcp://127.0.0.1:" + port, job.cluster.coordinator_address().insert(0, "tcp://")));
  // Uses worker 0's endpoint: heard as worker 0 (without CURVE, a process on
  // the same host can do that); its requests are all invalid.
  zmq::socket_t impostor = Dealer(ctx, job.worker.node().endpoint() + "#9", server);
  for (auto& s : strangers) s.set(zmq::sockopt::sndhwm, 0);
  impostor.set(zmq::sockopt::sndhwm, 0);
  Garbage g(20261124);
  constexpr int kMessages = 100000;
  for (int i = 0; i < kMessages; ++i) {
    if (i % 2 == 0) {
      SendAll(impostor, g.Next(/*must_be_invalid=*/true));
    } else {
      SendAll(strangers[g.Pick(static_cast<int>(strangers.size()))], g.Next(false));
    }
  }
  // Huge frame counts: over the 65536-frame limit, drained and refused.
  for (int m = 0; m < 2; ++m) {
    SendAll(impostor, {HeaderBytes(pb::PUSH, 5)});
    std::vector<std::string> many(70000, "");
    many[0] = HeaderBytes(pb::PUSH, 6);
    SendAll(impostor, many);
  }
  // The real worker goes on: its pushes and pulls work, and the weights are
  // exactly those of a run without the garbage.
  std::vector<float> weights = TrainThrough(&job.worker, 1, 2);
  EXPECT_TRUE(test::BytesEqual(weights, Reference(3), "weights after 3 clocks"));
  [[maybe_unused]] const size_t hwm_after = VmHwmKb(job.cluster.server(0).pid());
#ifndef NEREUS_SANITIZED_BUILD  // A sanitizer's allocator and shadow memory make RSS meaningless here.
  EXPECT_LT(hwm_after, hwm_before + 100 * 1024) << "server peak RSS grew from " << hwm_before << " kB to " << hwm_after;
#endif

  ASSERT_TRUE(job.worker.node().Finish().ok());
  std::string report;
  ASSERT_TRUE(job.cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
  for (auto code : job.cluster.codes()) EXPECT_EQ(code, 0) << report;
  // Closed once the server is gone, so that none of its ERROR replies (never
  // read here) is still arriving: libzmq 4.3.4 can assert (EAGAIN in
  // session_base.cpp's clean_pipes, its issue #3442) when a socket closes
  // while a multipart message is half through its session.
  for (auto& s : strangers) s.close();
  impostor.close();

  // Refusals are logged, rate-limited, escaped, and name the reason.
  const std::string log = job.cluster.server(0).Log();
  EXPECT_NE(log.find("the sender is not a member of this job"), std::string::npos);
  EXPECT_NE(log.find("its routing identity names host 10.1.2.3 but it comes from 127.0.0.1"), std::string::npos);
  EXPECT_NE(log.find("from \\x00\\xff\\x01 binary: refused a message: its routing identity is not a tcp://host:port "
                     "endpoint"),
            std::string::npos);
  const size_t lines = std::count(log.begin(), log.end(), '\n');
  EXPECT_LT(lines, 200u) << "the server logged " << lines << " lines for " << kMessages << " bad messages";
  for (char c : log) ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "raw byte " << int(c) << " in the log";
  const std::string clog = job.cluster.coordinator().Log();
  EXPECT_LT(std::count(clog.begin(), clog.end(), '\n'), 100) << clog;
}

// ---------------------------------------------------------------- CURVE

enum class Handshake { kRefused, kSucceeded, kNoOutcome };

// Waits (blocking on a socket's monitor `mon`, at most 10 s per event) until
// its connection attempt has failed its handshake or been dropped.
Handshake WaitHandshake(zmq::socket_t& mon) {
  mon.set(zmq::sockopt::rcvtimeo, 10000);
  while (true) {
    zmq::message_t ev, addr;
    if (!mon.recv(ev)) return Handshake::kNoOutcome;
    (void)mon.recv(addr);
    uint16_t id;
    std::memcpy(&id, ev.data(), 2);
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) return Handshake::kSucceeded;
    if (id & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
              ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED))
      return Handshake::kRefused;
  }
}

// Connects to `server` as worker 0's identity with `keys` (none: no CURVE),
// sends a push of clock 1 and a pull, and waits for the handshake's outcome.
// On a slow machine (ThreadSanitizer) libzmq sometimes gives a refused peer no
// event at all, and a connection can sit in its handshake (libzmq's own
// tests allow both: zeromq/libzmq#2698, #2733); such an attempt is retried
// from a fresh context and socket, up to three times (CI once saw all three
// retries on one context stall). Never succeeding is not enough: the server
// must refuse, so that its log names the refusal.
Handshake Intrude(const std::string& identity, const Endpoint& server, const std::optional<CurveKeys>& keys,
                  const std::string& name) {
  Handshake outcome = Handshake::kNoOutcome;
  for (int attempt = 0; attempt < 3 && outcome == Handshake::kNoOutcome; ++attempt) {
    zmq::context_t ctx(1);
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::routing_id, identity);
    s.set(zmq::sockopt::linger, 0);
    if (keys) {
      s.set(zmq::sockopt::curve_serverkey, keys->job_public);
      s.set(zmq::sockopt::curve_publickey, keys->node_public);
      s.set(zmq::sockopt::curve_secretkey, keys->node_secret);
    }
    const std::string mon = "inproc://" + name + "." + std::to_string(attempt);
    EXPECT_EQ(zmq_socket_monitor(s.handle(), mon.c_str(), ZMQ_EVENT_ALL), 0);
    zmq::socket_t mon_sock(ctx, zmq::socket_type::pair);
    mon_sock.set(zmq::sockopt::linger, 0);
    mon_sock.connect(mon);  // Before any event: the monitor drops what nobody reads.
    s.connect(server);
    Message push = PushMessage(1);
    const std::string h = EncodeHeader(&push);
    s.send(zmq::buffer(h), zmq::send_flags::sndmore);
    s.send(zmq::buffer(push.payload[0].data(), push.payload[0].size()), zmq::send_flags::none);
    s.send(zmq::buffer(HeaderBytes(pb::PULL, 201)), zmq::send_flags::none);
    outcome = WaitHandshake(mon_sock);
    if (outcome == Handshake::kNoOutcome) LOG(WARNING) << name << ": no handshake outcome in 10 s; trying again";
    // The monitor stops before its socket closes, then the sockets, then the context.
    zmq_socket_monitor(s.handle(), nullptr, 0);
    mon_sock.close();
    s.close();
  }
  return outcome;
}

TEST(CurveTest, OnlyTheJobsKeysRegisterPushOrPullAndTheWeightsStayTheirs) {
  TempDir dir;
  const std::string keys = test::MakeCurveKeys(dir, "keys", 1, 1);
  const std::string other = test::MakeCurveKeys(dir, "other", 1, 1);  // Another job's keys.
  // The job's server key but an unknown key of one's own.
  const std::string forged = dir.File("forged");
  ASSERT_TRUE(WriteJobKeys(forged, 1, 1).ok());
  for (const char* f : {"job.public", "job.secret"})
    std::ofstream(forged + "/" + f, std::ios::trunc) << test::ReadFile(keys + "/" + f);

  ClusterSpec spec = test::JobOf(1, 1);
  spec.external_workers = {0};
  spec.coordinator_flags = {"--curve_dir=" + keys};
  spec.server_flags = {"--curve_dir=" + keys};
  LocalCluster cluster(spec, dir);

  // Register as worker 0 without keys, with another job's, with a forged one.
  std::vector<std::optional<CurveKeys>> wrong = {std::nullopt};
  for (const std::string& d : {other, forged}) {
    auto k = LoadCurveKeys(d, "worker-0");
    ASSERT_TRUE(k.ok()) << k.status();
    wrong.push_back(*k);
  }
  for (size_t i = 0; i < wrong.size(); ++i) {
    RawWorker intruder(cluster.coordinator_address(), wrong[i], /*timeout_s=*/2);
    Status st = intruder.Start();
    EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << i << ": " << st;
  }
  // The real worker 0 still gets its rank: no intruder took it.
  auto mine = LoadCurveKeys(keys, "worker-0");
  ASSERT_TRUE(mine.ok()) << mine.status();
  RawWorker w(cluster.coordinator_address(), *mine);
  ASSERT_TRUE(w.Start().ok());
  const Endpoint server = w.node().server(0);
  ASSERT_EQ(w.Call(InitMessage()).header.op(), pb::INIT_ACK);
  ASSERT_EQ(w.Call(PushMessage(0)).header.op(), pb::PUSH_ACK);

  // Push (clock 1) and pull in worker 0's name without the job's keys.
  for (size_t i = 0; i < wrong.size(); ++i)
    EXPECT_EQ(Intrude(w.node().endpoint() + "#5", server, wrong[i], "intruder" + std::to_string(i)),
              Handshake::kRefused)
        << i;
  // Nothing of theirs arrived: clock 1 is the real worker's own push.
  std::vector<float> weights = TrainThrough(&w, 1, 1);
  EXPECT_TRUE(test::BytesEqual(weights, Reference(2), "weights after 2 clocks"));

  ASSERT_TRUE(w.node().Finish().ok());
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;
  const std::string forged_public = test::ReadFile(forged + "/worker-0.public").substr(0, 40);
  for (Subprocess* p : {&cluster.coordinator(), &cluster.server(0)}) {
    const std::string log = p->Log();
    // The forged key reaches ZAP and is refused by name, with the address.
    EXPECT_NE(log.find("from 127.0.0.1: refused a connection: CURVE public key " + forged_public +
                       " is not one of the job's (--curve_dir)"),
              std::string::npos)
        << log;
    // A peer without CURVE is refused at the handshake, with its address.
    // (Which side sees the mismatch first varies: the reason is ZeroMQ's.)
    // The address is read from the socket when the security thread sees the
    // connection's ACCEPTED event; on a slow machine ZeroMQ may have closed
    // it by then, and the line says so rather than guess.
    EXPECT_TRUE(log.find("from 127.0.0.1: refused a connection (from port ") != std::string::npos ||
                log.find("from an unknown address: refused a connection (from port ?)") != std::string::npos)
        << log;
    EXPECT_NE(log.find("): its handshake failed"), std::string::npos) << log;
  }
}

TEST(CurveTest, AJobOfRealProcessesRunsWithKeysAndRefusesAKeylessWorker) {
  TempDir dir;
  const std::string keys = test::MakeCurveKeys(dir, "keys", 1, 2);
  ClusterSpec spec = test::JobOf(1, 2, {"--curve_dir=" + keys});
  spec.server_flags = {"--curve_dir=" + keys};
  spec.worker_flags = {"--curve_dir=" + keys, "--tensors=1000,20x30", "--iterations=5", "--display=0"};
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(60), &report)) << report;
  for (auto code : cluster.codes()) EXPECT_EQ(code, 0) << report;

  // --curve_dir without an explicit rank is refused, naming the flag.
  auto p = Subprocess::Start({test::BinaryPath("nereus_worker"), "--curve_dir=" + keys, "--startup_timeout_s=1"},
                             dir.File("norank.log"));
  auto code = p->WaitFor(std::chrono::seconds(20));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  EXPECT_NE(p->Log().find("--curve_dir needs an explicit --rank"), std::string::npos) << p->Log();
}

}  // namespace
}  // namespace test
}  // namespace nereus

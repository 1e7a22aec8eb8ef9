// What many tests need and would otherwise each write again: named solver
// settings, a ReplySink that keeps a server's replies, a worker that sends raw
// messages, float files, numbers from a JSON summary. Header-only.
#ifndef NEREUS_TESTS_SUPPORT_FIXTURES_H_
#define NEREUS_TESTS_SUPPORT_FIXTURES_H_

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "common/net/message.h"
#include "common/net/node.h"
#include "nereus/options.h"
#include "proto/nereus.pb.h"
#include "server/param_server.h"

namespace nereus {
namespace test {

// --- Solver settings, by what they exercise ---------------------------------
// (the wire form the servers apply; a test driving a Client converts them
// with SgdConfigFromProto, worker/client/options_proto.h)

// `text` in protobuf's text format; a typo fails the test.
inline pb::SgdConfig SgdFromText(const std::string& text) {
  pb::SgdConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
  return c;
}

// Fixed rate 0.1 and momentum 0.5, no decay: a step is easy to work by hand.
inline pb::SgdConfig FixedMomentumSgd() { return SgdFromText("base_lr: 0.1 lr_policy: 'fixed' momentum: 0.5"); }

// Caffe's "inv" policy, momentum and L2 decay: every term of the SGD step
// moves the weights. The synthetic workers take the same settings as flags:
// InvDecaySgdFlags().
inline pb::SgdConfig InvDecaySgd() {
  return SgdFromText(
      "base_lr: 0.05 lr_policy: 'inv' gamma: 0.001 power: 0.75 momentum: 0.9 weight_decay: 0.001 "
      "regularization_type: 'L2'");
}
inline std::vector<std::string> InvDecaySgdFlags() {
  return {"--lr_policy=inv", "--base_lr=0.05", "--gamma=0.001",
          "--power=0.75",    "--momentum=0.9", "--weight_decay=0.001"};
}

// nereus_worker's solver flags at their defaults (with --iterations=1000000):
// what a test's own client must Init with to join a job of synthetic
// workers, since every worker of a job must agree on the solver when tensors
// travel as sufficient factors.
inline pb::SgdConfig SyntheticWorkerDefaultSgd() {
  return SgdFromText(
      "base_lr: 0.01 lr_policy: 'fixed' gamma: 0.1 power: 0.75 stepsize: 10 max_iter: 1000000 momentum: 0.9 "
      "weight_decay: 0.0005 regularization_type: 'L2' type: SOLVER_SGD delta: 1e-8 momentum2: 0.999 "
      "rms_decay: 0.99");
}

// --- Joining a job -------------------------------------------------------------

// The options of the test's own client joining the job at `coordinator` as
// worker `rank` (an external worker of the test's ClusterSpec).
inline ClientOptions TestWorkerOptions(const std::string& coordinator, int rank) {
  ClientOptions o;
  o.coordinator = coordinator;
  o.rank = rank;
  o.startup_timeout_s = 30;
  return o;
}

// --- Messages of a fake coordinator or worker -------------------------------------

// Adds a member to the node list of a REGISTER or a REGISTER_REPLY.
inline void AddNode(pb::Header* h, pb::Role role, int rank, const Endpoint& endpoint) {
  pb::NodeInfo* n = h->add_nodes();
  n->set_role(role);
  n->set_rank(rank);
  n->set_endpoint(endpoint);
}

// --- Messages to a ParamServer ------------------------------------------------

// `op` of tensor `tensor` (its partition 0) for `clock`, carrying `values`.
inline Message FloatsMessage(pb::Op op, uint64_t request_id, int tensor, int64_t clock, std::vector<float> values) {
  Message m;
  m.header.set_op(op);
  m.header.set_request_id(request_id);
  m.header.set_tensor(tensor);
  m.header.set_clock(clock);
  m.header.set_dtype(pb::FLOAT32);
  m.payload.push_back(Buffer::Of(std::make_shared<std::vector<float>>(std::move(values))));
  m.header.set_payload_bytes(m.payload_bytes());
  return m;
}

// PULL of tensor `tensor`'s partition 0 for `clock`.
inline Message PullMessage(uint64_t request_id, int tensor, int64_t clock) {
  Message m;
  m.header.set_op(pb::PULL);
  m.header.set_request_id(request_id);
  m.header.set_tensor(tensor);
  m.header.set_clock(clock);
  return m;
}

// INIT_PARTITION of tensor `tensor`'s partition 0 holding `values` (lr_mult and
// decay_mult 1), with the solver settings `sgd`.
inline Message InitPartitionMessage(uint64_t request_id, int tensor, std::vector<float> values,
                                    const pb::SgdConfig& sgd) {
  const uint64_t length = values.size();
  Message m = FloatsMessage(pb::INIT_PARTITION, request_id, tensor, 0, std::move(values));
  auto* meta = m.header.mutable_partition_meta();
  meta->set_tensor(tensor);
  meta->set_length(length);
  meta->set_lr_mult(1);
  meta->set_decay_mult(1);
  *m.header.mutable_sgd() = sgd;
  return m;
}

// The options of a bare Node joining the job at `coordinator` as worker
// `rank`.
inline NodeOptions TestWorkerNodeOptions(const std::string& coordinator, int rank, int startup_timeout_s = 30) {
  NodeOptions o;
  o.coordinator = coordinator;
  o.role = pb::WORKER;
  o.rank = rank;
  o.startup_timeout_s = startup_timeout_s;
  return o;
}

// --- A server's replies -------------------------------------------------------

// Keeps every reply a ParamServer sends, with its destination, in order.
class CaptureSink : public ReplySink {
 public:
  struct Captured {
    Endpoint to;
    Message msg;
  };
  void Reply(const Endpoint& to, Message msg) override { replies.push_back({to, std::move(msg)}); }
  const Message& Last() const { return replies.back().msg; }
  std::vector<Captured> replies;
};

// --- Ordering threads ---------------------------------------------------------

// A gate a test opens: a thread calling Wait() blocks until Open(), and the
// test can wait, with AwaitArrival(), until some thread has reached it.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    arrived_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void AwaitArrival() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return arrived_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool arrived_ = false;
  bool open_ = false;
};

// The messages a test's bare Transport or Node receives, in order, and
// bounded waits for them.
class Inbox {
 public:
  // For Transport::Start or Node::Start: keeps every message decoded.
  ReceiveHandler Handler() {
    return [this](const Endpoint&, StatusOr<Message> m, const pb::Header&) {
      if (!m.ok()) return;
      std::lock_guard<std::mutex> lock(mu_);
      messages_.push_back(std::move(m).value());
      cv_.notify_all();
    };
  }
  // The next message, or an empty one after `timeout`.
  Message Next(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return !messages_.empty(); })) return Message();
    Message m = std::move(messages_.front());
    messages_.pop_front();
    return m;
  }
  // The next message with request id `id` (those before it are dropped), or
  // an empty one after `timeout`.
  Message NextWithId(uint64_t id, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      while (!messages_.empty()) {
        Message m = std::move(messages_.front());
        messages_.pop_front();
        if (m.header.request_id() == id) return m;
      }
      if (!cv_.wait_until(lock, deadline, [this] { return !messages_.empty(); })) return Message();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Message> messages_;
};

// The test's own worker 0: a bare Node that joins a job and sends exactly the
// messages or frames given (node().Send, node().transport()->SendFrames), to
// see what the servers make of them.
class RawWorker {
 public:
  explicit RawWorker(const std::string& coordinator, std::optional<CurveKeys> curve = std::nullopt,
                     int startup_timeout_s = 30) {
    NodeOptions o = TestWorkerNodeOptions(coordinator, 0, startup_timeout_s);
    o.transport.curve = std::move(curve);
    node_ = std::make_unique<Node>(o);
  }
  Status Start() {
    return node_->Start(replies_.Handler(), [](const Status&) {});
  }
  // The next reply, or an empty message after 10 s.
  Message Next() { return replies_.Next(std::chrono::seconds(10)); }
  // Sends `m` to server 0 and returns the reply with the same request id
  // (others, e.g. answers to garbage sent in this worker's name, are
  // dropped), or an empty message after 20 s.
  Message Call(Message m) {
    const uint64_t id = m.header.request_id();
    Status sent = node_->Send(node_->server(0), std::move(m));
    EXPECT_TRUE(sent.ok()) << sent;
    return replies_.NextWithId(id, std::chrono::seconds(20));
  }
  Node& node() { return *node_; }

 private:
  Inbox replies_;
  std::unique_ptr<Node> node_;  // Last: stopped first.
};

// --- Files and summaries --------------------------------------------------------

// The floats of a raw little-endian float file (--weights_out of the synthetic
// worker). A file that cannot be read fails the test, naming it.
inline std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::copy(bytes.data(), bytes.data() + v.size() * sizeof(float), reinterpret_cast<char*>(v.data()));
  return v;
}

// The number of `"key": NUMBER` in a JSON text (a --summary_json, a bench
// row). A key that is not there (or not a number) fails the test, naming the
// key and the text, and gives NaN.
inline double JsonNumber(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\": ?([-+0-9.eE]+)");
  if (!std::regex_search(json, m, re)) {
    ADD_FAILURE() << "no number \"" << key << "\" in " << json;
    return NAN;
  }
  return std::stod(m[1]);
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_FIXTURES_H_

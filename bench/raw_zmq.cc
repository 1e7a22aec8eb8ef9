#include "bench/raw_zmq.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "bench/bench.h"
#include "common/sgd.h"
#include "common/shard_map.h"

namespace nereus {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void NoFree(void*, void*) {}

// The whole of a raw message's header.
struct RawHeader {
  uint32_t op;
  uint32_t chunk;
  uint64_t seq;  // The worker's operation, echoed.
};
enum : uint32_t { kPushMsg = 1, kAckMsg = 2, kPullMsg = 3, kReplyMsg = 4, kStopMsg = 5 };

zmq::message_t HeaderFrame(uint32_t op, uint32_t chunk, uint64_t seq) {
  const RawHeader h{op, chunk, seq};
  return zmq::message_t(&h, sizeof(h));
}

RawHeader ReadHeader(const zmq::message_t& m) {
  RawHeader h{};
  CHECK_EQ(m.size(), sizeof(h)) << "raw baseline: bad header frame";
  std::memcpy(&h, m.data(), sizeof(h));
  return h;
}

// A server node: its own context, a ROUTER, one thread that answers.
class RawServer {
 public:
  // `update`: also apply the update (see RawFair).
  RawServer(const std::vector<ChunkPlacement>& chunks, uint64_t elements, int workers, const pb::SgdConfig* update)
      : chunks_(chunks),
        weights_(elements, 0.5f),
        workers_(workers),
        update_(update != nullptr),
        ctx_(1),
        sock_(ctx_, zmq::socket_type::router) {
    if (update_) {
      sgd_ = *update;
      for (const ChunkPlacement& c : chunks_) {
        UpdatedChunk u;
        u.weights =
            std::make_shared<std::vector<float>>(weights_.begin() + c.offset, weights_.begin() + c.offset + c.length);
        u.history.assign(c.length, 0.0f);
        updated_.push_back(std::move(u));
      }
    }
    sock_.set(zmq::sockopt::rcvhwm, 0);
    sock_.set(zmq::sockopt::sndhwm, 0);
    sock_.bind("tcp://127.0.0.1:*");
    endpoint_ = sock_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Loop(); });
  }
  // Returns once every worker has sent STOP.
  ~RawServer() { thread_.join(); }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void Loop() {
    // Received gradients are kept until the same worker's next one for the
    // chunk replaces (and frees) them, as a server keeps a push's frame until
    // the chunk's update.
    std::map<std::string, std::vector<zmq::message_t>> kept;
    int stops = 0;
    while (stops < workers_) {
      zmq::message_t id, hdr, payload;
      (void)sock_.recv(id);
      (void)sock_.recv(hdr);
      if (hdr.more()) (void)sock_.recv(payload);
      const RawHeader h = ReadHeader(hdr);
      switch (h.op) {
        case kPushMsg: {
          auto& slots = kept[id.to_string()];
          if (slots.size() < chunks_.size()) slots.resize(chunks_.size());
          slots.at(h.chunk) = std::move(payload);
          sock_.send(id, zmq::send_flags::sndmore);
          sock_.send(HeaderFrame(kAckMsg, h.chunk, h.seq), zmq::send_flags::none);
          if (update_ && ++updated_.at(h.chunk).pushes == workers_) Update(h.chunk, kept);
          break;
        }
        case kPullMsg: {
          const ChunkPlacement& c = chunks_.at(h.chunk);
          sock_.send(id, zmq::send_flags::sndmore);
          sock_.send(HeaderFrame(kReplyMsg, h.chunk, h.seq), zmq::send_flags::sndmore);
          if (update_) {
            // Zero-copy, holding this version: the next update goes elsewhere.
            const std::shared_ptr<std::vector<float>>& v = updated_.at(h.chunk).weights;
            zmq::message_t w(v->data(), v->size() * sizeof(float), &ReleaseVersion,
                             new std::shared_ptr<std::vector<float>>(v));
            sock_.send(w, zmq::send_flags::none);
          } else {
            zmq::message_t w(weights_.data() + c.offset, c.length * sizeof(float), &NoFree, nullptr);
            sock_.send(w, zmq::send_flags::none);
          }
          break;
        }
        case kStopMsg:
          ++stops;
          break;
        default:
          LOG(FATAL) << "raw baseline: unknown op " << h.op;
      }
    }
  }

  // A chunk's weights under --raw_update, kept as ParamServer keeps them.
  struct UpdatedChunk {
    std::shared_ptr<std::vector<float>> weights, spare;
    std::vector<float> history;
    int pushes = 0;  // Since the last update.
  };

  static void ReleaseVersion(void*, void* hint) { delete static_cast<std::shared_ptr<std::vector<float>>*>(hint); }

  // Every worker's gradient of `chunk` is in: one SGD step on their average
  // in worker order (the newest each has sent), with the functions
  // ParamServer::Apply calls (SgdStepAveraged, UpdateHeldWeights).
  void Update(uint32_t chunk, const std::map<std::string, std::vector<zmq::message_t>>& kept) {
    UpdatedChunk& u = updated_.at(chunk);
    u.pushes = 0;
    std::vector<const float*> srcs;
    for (const auto& [worker, slots] : kept)
      if (chunk < slots.size() && slots[chunk].size() == u.history.size() * sizeof(float))
        srcs.push_back(slots[chunk].data<float>());
    CHECK(!srcs.empty());
    UpdateHeldWeights(&u.weights, &u.spare, [&](const float* in, float* out) {
      SgdStepAveraged(sgd_, sgd_.base_lr(), 1.0f, 1.0f, srcs.data(), srcs.size(), in, out, u.history.data(),
                      u.history.size());
    });
  }

  const std::vector<ChunkPlacement> chunks_;
  std::vector<float> weights_;
  const int workers_;
  const bool update_;
  pb::SgdConfig sgd_;
  std::vector<UpdatedChunk> updated_;  // By chunk; empty unless update_.
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::string endpoint_;
  std::thread thread_;
};

// A worker node: its own context, a DEALER to each server, driven by one
// thread that sends and polls (no hand-off).
class RawWorker {
 public:
  // `pull_buffers`: destinations of plain pulls, reused round robin.
  RawWorker(const std::vector<std::string>& servers, const std::vector<ChunkPlacement>& chunks, uint64_t elements,
            int pull_buffers)
      : chunks_(chunks), grad_(elements, 1e-3f), weights_(elements, 0.5f), ctx_(1) {
    for (int i = 0; i < pull_buffers; ++i) dst_.emplace_back(elements);
    for (const std::string& ep : servers) {
      socks_.emplace_back(ctx_, zmq::socket_type::dealer);
      socks_.back().set(zmq::sockopt::rcvhwm, 0);
      socks_.back().set(zmq::sockopt::sndhwm, 0);
      socks_.back().set(zmq::sockopt::linger, -1);
      socks_.back().connect(ep);
    }
  }
  ~RawWorker() {
    for (auto& s : socks_) s.send(HeaderFrame(kStopMsg, 0, 0), zmq::send_flags::none);
  }

  // `iters` operations, at most `window` in flight.
  void Run(RawOp op, int iters, int window) {
    for (int i = 0; i < iters; ++i) {
      while (static_cast<int>(remaining_.size()) >= window) ReceiveSome();
      Issue(op, next_seq_++);
    }
    while (!remaining_.empty()) ReceiveSome();
  }

  // One pull of chunk 0, timed in microseconds.
  double PullRtt() {
    const auto t0 = Clock::now();
    Run(RawOp::kPull, 1, 1);
    return Seconds(t0, Clock::now()) * 1e6;
  }

 private:
  void Issue(RawOp op, uint64_t seq) {
    int expect = 0;
    float* dst = op == RawOp::kPull && !dst_.empty() ? dst_[seq % dst_.size()].data() : weights_.data();
    dst_of_[seq] = dst;
    for (uint32_t i = 0; i < chunks_.size(); ++i) {
      const ChunkPlacement& c = chunks_[i];
      zmq::socket_t& s = socks_[c.server];
      if (op != RawOp::kPull) {
        s.send(HeaderFrame(kPushMsg, i, seq), zmq::send_flags::sndmore);
        zmq::message_t g(grad_.data() + c.offset, c.length * sizeof(float), &NoFree, nullptr);
        s.send(g, zmq::send_flags::none);
        ++expect;
      }
    }
    for (uint32_t i = 0; op != RawOp::kPush && i < chunks_.size(); ++i) {
      socks_[chunks_[i].server].send(HeaderFrame(kPullMsg, i, seq), zmq::send_flags::none);
      ++expect;
    }
    remaining_[seq] = expect;
  }

  // Blocks until at least one reply came; handles every reply waiting.
  void ReceiveSome() {
    std::vector<zmq::pollitem_t> items;
    for (auto& s : socks_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
    for (size_t k = 0; k < socks_.size(); ++k) {
      if (!(items[k].revents & ZMQ_POLLIN)) continue;
      zmq::message_t hdr;
      while (socks_[k].recv(hdr, zmq::recv_flags::dontwait)) {
        const RawHeader h = ReadHeader(hdr);
        if (h.op == kReplyMsg) {
          zmq::message_t payload;
          (void)socks_[k].recv(payload);
          const ChunkPlacement& c = chunks_.at(h.chunk);
          CHECK_EQ(payload.size(), c.length * sizeof(float));
          std::memcpy(dst_of_.at(h.seq) + c.offset, payload.data(), payload.size());
        }
        auto it = remaining_.find(h.seq);
        CHECK(it != remaining_.end()) << "raw baseline: reply to an unknown operation";
        if (--it->second == 0) {
          remaining_.erase(it);
          dst_of_.erase(h.seq);
        }
      }
    }
  }

  const std::vector<ChunkPlacement> chunks_;
  std::vector<float> grad_, weights_;
  std::vector<std::vector<float>> dst_;  // Pull destinations, reused round robin.
  zmq::context_t ctx_;
  std::vector<zmq::socket_t> socks_;
  uint64_t next_seq_ = 1;
  std::map<uint64_t, int> remaining_;  // Operation -> replies still due.
  std::map<uint64_t, float*> dst_of_;
};

struct RawJob {
  std::vector<std::unique_ptr<RawServer>> servers;
  std::vector<std::unique_ptr<RawWorker>> workers;
};

StatusOr<std::unique_ptr<RawJob>> StartRawJob(int servers, int workers, uint64_t bytes, uint64_t chunk_bytes,
                                              int pull_buffers, const pb::SgdConfig* update = nullptr) {
  if (bytes % sizeof(float) != 0) return InvalidArgumentError("raw baseline: bytes must be a multiple of 4");
  const uint64_t elements = bytes / sizeof(float);
  ASSIGN_OR_RETURN(ShardMap map, ShardMap::Build({elements}, chunk_bytes, servers));
  const std::vector<ChunkPlacement>& chunks = map.chunks(0);
  auto job = std::make_unique<RawJob>();
  std::vector<std::string> eps;
  for (int s = 0; s < servers; ++s) {
    job->servers.push_back(std::make_unique<RawServer>(chunks, elements, workers, update));
    eps.push_back(job->servers.back()->endpoint());
  }
  for (int w = 0; w < workers; ++w) {
    job->workers.push_back(std::make_unique<RawWorker>(eps, chunks, elements, pull_buffers));
    job->workers.back()->Run(RawOp::kPull, 1, 1);  // Connected both ways before timing.
  }
  return job;
}

}  // namespace

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

StatusOr<RawResult> RawFair(RawOp op, int servers, int workers, uint64_t bytes, uint64_t chunk_bytes, int iters,
                            int window, const pb::SgdConfig* update) {
  ASSIGN_OR_RETURN(auto job,
                   StartRawJob(servers, workers, bytes, chunk_bytes, op == RawOp::kPull ? window : 0, update));
  RawResult r;
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (auto& w : job->workers)
    threads.emplace_back([&, w = w.get()] { w->Run(op, iters, op == RawOp::kPushPull ? 1 : window); });
  for (auto& t : threads) t.join();
  r.wall_s = Seconds(t0, Clock::now());
  r.cpu_s = ProcessCpuSeconds() - cpu0;
  const double moved = static_cast<double>(bytes) * workers * iters * (op == RawOp::kPushPull ? 2 : 1);
  r.gbps = 8.0 * moved / r.wall_s / 1e9;
  job->workers.clear();  // Sends STOP; then the servers' threads end.
  job->servers.clear();
  return r;
}

struct RawRttJob::Impl {
  std::unique_ptr<RawJob> job;
};

StatusOr<std::unique_ptr<RawRttJob>> RawRttJob::Start(uint64_t bytes) {
  ASSIGN_OR_RETURN(auto job, StartRawJob(1, 1, bytes, bytes, 1));
  std::unique_ptr<RawRttJob> r(new RawRttJob);
  r->impl_ = std::make_unique<Impl>();
  r->impl_->job = std::move(job);
  return r;
}

RawRttJob::RawRttJob() = default;

// The worker (declared after the servers in RawJob) goes first: its STOP ends
// the server's thread.
RawRttJob::~RawRttJob() = default;

double RawRttJob::PullMicros() { return impl_->job->workers[0]->PullRtt(); }

RawResult RawStream(int senders, int receivers, uint64_t bytes, int iters) {
  zmq::context_t ctx(1);
  std::vector<zmq::socket_t> pulls;
  std::vector<std::string> eps;
  for (int r = 0; r < receivers; ++r) {
    pulls.emplace_back(ctx, zmq::socket_type::pull);
    pulls.back().set(zmq::sockopt::rcvhwm, 0);
    pulls.back().bind("tcp://127.0.0.1:*");
    eps.push_back(pulls.back().get(zmq::sockopt::last_endpoint));
  }
  std::vector<float> payload(bytes / sizeof(float), 1.0f);
  std::vector<std::thread> threads;
  // Sender s deals its messages round robin starting at receiver s % R; each
  // receiver expects exactly its share, which differs by one between
  // receivers when iters % R != 0 (issue 7: assuming it did not hung here).
  std::vector<uint64_t> expected(receivers, 0);
  for (int s = 0; s < senders; ++s)
    for (int r = 0; r < receivers; ++r) expected[r] += RoundRobinShare(iters, receivers, r, s % receivers);
  const double cpu0 = ProcessCpuSeconds();
  const auto start = Clock::now();
  for (int r = 0; r < receivers; ++r) {
    threads.emplace_back([&, r] {
      zmq::message_t m;
      for (uint64_t i = 0; i < expected[r]; ++i) (void)pulls[r].recv(m);
    });
  }
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&, s] {
      std::vector<zmq::socket_t> push;
      for (int r = 0; r < receivers; ++r) {
        push.emplace_back(ctx, zmq::socket_type::push);
        push.back().set(zmq::sockopt::sndhwm, 0);
        push.back().connect(eps[r]);
      }
      for (int i = 0; i < iters; ++i) {
        zmq::message_t m(payload.data(), bytes, &NoFree, nullptr);
        push[(s + i) % receivers].send(m, zmq::send_flags::none);
      }
      for (auto& p : push) p.set(zmq::sockopt::linger, -1);
    });
  }
  for (auto& t : threads) t.join();
  RawResult r;
  r.wall_s = Seconds(start, Clock::now());
  r.cpu_s = ProcessCpuSeconds() - cpu0;
  r.gbps = 8.0 * bytes * senders * iters / r.wall_s / 1e9;
  return r;
}

}  // namespace bench
}  // namespace nereus

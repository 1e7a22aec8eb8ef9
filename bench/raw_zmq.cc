#include "bench/raw_zmq.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "bench/bench.h"
#include "common/base/clock.h"
#include "common/base/mutex.h"
#include "common/net/shard_map.h"
#include "common/update/sgd.h"

namespace nereus {
namespace bench {
namespace {

using Clock = SteadyClock;

void NoFree(void*, void*) {}

// The whole of a raw message's header.
struct RawHeader {
  uint16_t op;
  uint16_t worker;  // The sender's rank (a worker's streams each have their own ZeroMQ identity).
  uint32_t partition;
  uint64_t seq;  // The worker's operation, echoed.
};
enum : uint16_t { kPushMsg = 1, kAckMsg = 2, kPullMsg = 3, kReplyMsg = 4, kStopMsg = 5 };

zmq::message_t HeaderFrame(uint16_t op, uint32_t partition, uint64_t seq, uint16_t worker = 0) {
  const RawHeader h{op, worker, partition, seq};
  return zmq::message_t(&h, sizeof(h));
}

RawHeader ReadHeader(const zmq::message_t& m) {
  RawHeader h{};
  CHECK_EQ(m.size(), sizeof(h)) << "raw baseline: bad header frame";
  std::memcpy(&h, m.data(), sizeof(h));
  return h;
}

// A server node: its own context, a ROUTER, and a thread that receives,
// acks and answers. With an update and apply_threads > 0, the update is made
// on apply_threads threads of its own, as a Nereus server makes it on its
// pool (ParamServer): the receive thread hands a partition whose gradients are
// all in to them and goes on reading; a pull of a partition being updated waits
// for the update to end (its weights are the update's meanwhile); an apply
// thread that is done says so on an eventfd the receive thread polls beside
// the ROUTER, and the receive thread sends the waiting replies (a ZeroMQ
// socket is used by one thread). apply_threads 0: the update on the receive
// thread right after the ack (the earlier baseline).
class RawServer {
 public:
  // `update`: also apply the update (see RawFair).
  RawServer(const std::vector<PartitionPlacement>& partitions, uint64_t elements, int workers,
            const pb::SgdConfig* update, int apply_threads)
      : partitions_(partitions),
        weights_(elements, 0.5f),
        workers_(workers),
        update_(update != nullptr),
        ctx_(1),
        sock_(ctx_, zmq::socket_type::router) {
    if (update_) {
      sgd_ = *update;
      for (const PartitionPlacement& c : partitions_) {
        UpdatedPartition u;
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
    if (update_ && apply_threads > 0) {
      done_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      CHECK_GE(done_fd_, 0) << "eventfd: " << std::strerror(errno);
      for (int i = 0; i < apply_threads; ++i) appliers_.emplace_back([this] { ApplyLoop(); });
    }
    thread_ = std::thread([this] { Loop(); });
  }
  // Returns once every worker has sent STOP and every update is made.
  ~RawServer() {
    thread_.join();
    {
      MutexLock lock(&mu_);
      stop_appliers_ = true;
    }
    jobs_cv_.SignalAll();
    for (std::thread& t : appliers_) t.join();
    if (done_fd_ >= 0) close(done_fd_);
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  // One round of a partition's gradients: each worker's next push of it.
  struct Round {
    std::vector<zmq::message_t> grads;  // By worker index.
    int count = 0;
  };
  // A partition's weights under --raw_update, kept as ParamServer keeps them.
  struct UpdatedPartition {
    std::shared_ptr<std::vector<float>> weights, spare;
    std::vector<float> history;
    std::map<uint64_t, Round> rounds;  // By round: the workers' n-th pushes of the partition.
    bool applying = false;             // weights/spare/history are an apply thread's.
    std::vector<std::pair<std::string, uint64_t>> waiting_pulls;  // (worker identity, seq)
  };
  struct Job {
    uint32_t partition;
    std::vector<const float*> srcs;
  };

  void Loop() {
    // Without an update, received gradients are kept until the same worker's
    // next one for the partition replaces (and frees) them, as a server keeps a
    // push's frame until the partition's update. With one, until the update.
    std::map<std::string, std::vector<zmq::message_t>> kept;
    std::map<int, std::vector<uint64_t>> pushes_of;  // Worker -> pushes of each partition so far.
    int stops = 0;
    std::vector<zmq::pollitem_t> items = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
    if (done_fd_ >= 0) items.push_back({nullptr, done_fd_, ZMQ_POLLIN, 0});
    while (stops < workers_ || in_flight_ > 0) {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
      if (items.size() > 1 && (items[1].revents & ZMQ_POLLIN)) OnUpdatesDone();
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      zmq::message_t id, hdr, payload;
      // Every message waiting, so the eventfd is not starved.
      while (sock_.recv(id, zmq::recv_flags::dontwait)) {
        (void)sock_.recv(hdr);
        if (hdr.more()) (void)sock_.recv(payload);
        const RawHeader h = ReadHeader(hdr);
        const std::string who = id.to_string();
        switch (h.op) {
          case kPushMsg: {
            sock_.send(id, zmq::send_flags::sndmore);
            sock_.send(HeaderFrame(kAckMsg, h.partition, h.seq), zmq::send_flags::none);
            if (!update_) {
              auto& slots = kept[who];
              if (slots.size() < partitions_.size()) slots.resize(partitions_.size());
              slots.at(h.partition) = std::move(payload);
              break;
            }
            const int idx = h.worker;
            CHECK_LT(idx, workers_) << "raw baseline: a worker rank out of range";
            auto& n = pushes_of[idx];
            if (n.size() < partitions_.size()) n.resize(partitions_.size(), 0);
            Round& r = updated_.at(h.partition).rounds[n[h.partition]++];
            if (r.grads.empty()) r.grads.resize(workers_);
            r.grads[idx] = std::move(payload);
            ++r.count;
            StartUpdate(h.partition);
            break;
          }
          case kPullMsg: {
            if (update_ && updated_.at(h.partition).applying) {
              updated_[h.partition].waiting_pulls.emplace_back(who, h.seq);
              break;
            }
            Reply(who, h.partition, h.seq);
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
  }

  void Reply(const std::string& to, uint32_t partition, uint64_t seq) {
    const PartitionPlacement& c = partitions_.at(partition);
    sock_.send(zmq::buffer(to), zmq::send_flags::sndmore);
    sock_.send(HeaderFrame(kReplyMsg, partition, seq), zmq::send_flags::sndmore);
    if (update_) {
      // Zero-copy, holding this version: the next update goes elsewhere.
      const std::shared_ptr<std::vector<float>>& v = updated_.at(partition).weights;
      zmq::message_t w(v->data(), v->size() * sizeof(float), &ReleaseVersion,
                       new std::shared_ptr<std::vector<float>>(v));
      sock_.send(w, zmq::send_flags::none);
    } else {
      zmq::message_t w(weights_.data() + c.offset, c.length * sizeof(float), &NoFree, nullptr);
      sock_.send(w, zmq::send_flags::none);
    }
  }

  // The partition's oldest round, if every worker's gradient is in and no update
  // of the partition is being made: on the receive thread, or handed over.
  void StartUpdate(uint32_t partition) {
    UpdatedPartition& u = updated_.at(partition);
    if (u.applying || u.rounds.empty() || u.rounds.begin()->second.count < workers_) return;
    Job job{partition, {}};
    for (const zmq::message_t& g : u.rounds.begin()->second.grads) job.srcs.push_back(g.data<float>());
    if (appliers_.empty()) {
      Update(job);
      u.rounds.erase(u.rounds.begin());
      return;
    }
    u.applying = true;
    ++in_flight_;
    {
      MutexLock lock(&mu_);
      jobs_.push_back(std::move(job));
    }
    jobs_cv_.Signal();
  }

  // Receive thread: the apply threads' finished updates.
  void OnUpdatesDone() {
    uint64_t n;
    (void)!read(done_fd_, &n, sizeof(n));
    std::vector<uint32_t> done;
    {
      MutexLock lock(&mu_);
      done.swap(done_);
    }
    for (uint32_t partition : done) {
      UpdatedPartition& u = updated_.at(partition);
      u.applying = false;
      --in_flight_;
      u.rounds.erase(u.rounds.begin());  // Frees the gradient frames.
      for (const auto& [to, seq] : u.waiting_pulls) Reply(to, partition, seq);
      u.waiting_pulls.clear();
      StartUpdate(partition);
    }
  }

  void ApplyLoop() {
    MutexLock lock(&mu_);
    while (true) {
      while (!stop_appliers_ && jobs_.empty()) jobs_cv_.Wait(&mu_);
      if (jobs_.empty()) return;
      Job job = std::move(jobs_.front());
      jobs_.pop_front();
      mu_.Unlock();
      Update(job);
      mu_.Lock();
      done_.push_back(job.partition);
      const uint64_t one = 1;
      (void)!write(done_fd_, &one, sizeof(one));
    }
  }

  static void ReleaseVersion(void*, void* hint) { delete static_cast<std::shared_ptr<std::vector<float>>*>(hint); }

  // Every worker's gradient of `job.partition` is in: one SGD step on their
  // average in worker order, with the functions ParamServer makes its
  // updates with (SgdStepAveraged, UpdateHeldWeights).
  void Update(const Job& job) {
    UpdatedPartition& u = updated_.at(job.partition);
    UpdateHeldWeights(&u.weights, &u.spare, [&](const float* in, float* out) {
      SgdStepAveraged(sgd_, sgd_.base_lr(), 1.0f, 1.0f, job.srcs.data(), job.srcs.size(), in, out, u.history.data(),
                      u.history.size());
    });
  }

  const std::vector<PartitionPlacement> partitions_;
  std::vector<float> weights_;
  const int workers_;
  const bool update_;
  pb::SgdConfig sgd_;
  std::vector<UpdatedPartition> updated_;  // By partition; empty unless update_.
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::string endpoint_;
  int in_flight_ = 0;  // Receive thread: updates handed over and not yet done.
  int done_fd_ = -1;   // eventfd: an apply thread finished an update.
  Mutex mu_;
  CondVar jobs_cv_;
  std::deque<Job> jobs_ NEREUS_GUARDED_BY(mu_);
  std::vector<uint32_t> done_ NEREUS_GUARDED_BY(mu_);  // Partitions whose update is made.
  bool stop_appliers_ NEREUS_GUARDED_BY(mu_) = false;
  std::vector<std::thread> appliers_;
  std::thread thread_;
};

// A worker node: its own context, `streams` DEALERs to each server (partition i
// on stream i % streams, as a Nereus client spreads partitions over its
// --streams connections), driven by one thread that sends and polls (no
// hand-off).
class RawWorker {
 public:
  // `pull_buffers`: destinations of plain pulls, reused round robin.
  RawWorker(int rank, const std::vector<std::string>& servers, const std::vector<PartitionPlacement>& partitions,
            uint64_t elements, int pull_buffers, int streams)
      : rank_(static_cast<uint16_t>(rank)),
        partitions_(partitions),
        grad_(elements, 1e-3f),
        weights_(elements, 0.5f),
        streams_(std::max(1, streams)),
        ctx_(1) {
    for (int i = 0; i < pull_buffers; ++i) dst_.emplace_back(elements);
    for (const std::string& ep : servers) {
      for (int k = 0; k < streams_; ++k) {
        socks_.emplace_back(ctx_, zmq::socket_type::dealer);
        socks_.back().set(zmq::sockopt::rcvhwm, 0);
        socks_.back().set(zmq::sockopt::sndhwm, 0);
        socks_.back().set(zmq::sockopt::linger, -1);
        socks_.back().connect(ep);
      }
    }
  }
  ~RawWorker() {
    // One STOP per server, on its first stream (the server counts workers).
    for (size_t s = 0; s < socks_.size(); s += streams_)
      socks_[s].send(HeaderFrame(kStopMsg, 0, 0), zmq::send_flags::none);
  }

  // `iters` operations, at most `window` in flight.
  void Run(RawOp op, int iters, int window) {
    for (int i = 0; i < iters; ++i) {
      while (static_cast<int>(remaining_.size()) >= window) ReceiveSome();
      Issue(op, next_seq_++);
    }
    while (!remaining_.empty()) ReceiveSome();
  }

  // One pull of partition 0, timed in microseconds.
  double PullRtt() {
    const auto t0 = Clock::now();
    Run(RawOp::kPull, 1, 1);
    return Seconds(t0, Clock::now()) * 1e6;
  }

  // Every stream answered a pull: connected both ways.
  void Connect() {
    for (size_t s = 0; s < socks_.size(); ++s) {
      const uint64_t seq = next_seq_++;
      dst_of_[seq] = weights_.data();
      remaining_[seq] = 1;
      // Partition 0's request on each connection (its reply lands in weights_).
      socks_[s].send(HeaderFrame(kPullMsg, 0, seq), zmq::send_flags::none);
      while (!remaining_.empty()) ReceiveSome();
    }
  }

 private:
  zmq::socket_t& Stream(uint32_t partition) {
    return socks_[partitions_[partition].server * streams_ + partition % streams_];
  }

  void Issue(RawOp op, uint64_t seq) {
    int expect = 0;
    float* dst = op == RawOp::kPull && !dst_.empty() ? dst_[seq % dst_.size()].data() : weights_.data();
    dst_of_[seq] = dst;
    for (uint32_t i = 0; i < partitions_.size(); ++i) {
      const PartitionPlacement& c = partitions_[i];
      zmq::socket_t& s = Stream(i);
      if (op != RawOp::kPull) {
        s.send(HeaderFrame(kPushMsg, i, seq, rank_), zmq::send_flags::sndmore);
        zmq::message_t g(grad_.data() + c.offset, c.length * sizeof(float), &NoFree, nullptr);
        s.send(g, zmq::send_flags::none);
        ++expect;
      }
    }
    for (uint32_t i = 0; op != RawOp::kPush && i < partitions_.size(); ++i) {
      Stream(i).send(HeaderFrame(kPullMsg, i, seq), zmq::send_flags::none);
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
          const PartitionPlacement& c = partitions_.at(h.partition);
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

  const uint16_t rank_;
  const std::vector<PartitionPlacement> partitions_;
  std::vector<float> grad_, weights_;
  std::vector<std::vector<float>> dst_;  // Pull destinations, reused round robin.
  const int streams_;
  zmq::context_t ctx_;
  std::vector<zmq::socket_t> socks_;  // Server s, stream k: socks_[s * streams_ + k].
  uint64_t next_seq_ = 1;
  std::map<uint64_t, int> remaining_;  // Operation -> replies still due.
  std::map<uint64_t, float*> dst_of_;
};

struct RawJob {
  std::vector<std::unique_ptr<RawServer>> servers;
  std::vector<std::unique_ptr<RawWorker>> workers;
  ~RawJob() {
    workers.clear();  // Sends STOP; then the servers' threads end.
    servers.clear();
  }
};

StatusOr<std::unique_ptr<RawJob>> StartRawJob(int servers, int workers, uint64_t bytes, uint64_t partition_bytes,
                                              int pull_buffers, const pb::SgdConfig* update = nullptr, int streams = 1,
                                              int apply_threads = 0) {
  if (bytes % sizeof(float) != 0) return InvalidArgumentError("raw baseline: bytes must be a multiple of 4");
  const uint64_t elements = bytes / sizeof(float);
  ASSIGN_OR_RETURN(ShardMap map, ShardMap::Build({elements}, partition_bytes, servers));
  const std::vector<PartitionPlacement>& partitions = map.partitions(0);
  auto job = std::make_unique<RawJob>();
  std::vector<std::string> eps;
  for (int s = 0; s < servers; ++s) {
    job->servers.push_back(std::make_unique<RawServer>(partitions, elements, workers, update, apply_threads));
    eps.push_back(job->servers.back()->endpoint());
  }
  for (int w = 0; w < workers; ++w) {
    job->workers.push_back(std::make_unique<RawWorker>(w, eps, partitions, elements, pull_buffers, streams));
    job->workers.back()->Connect();  // Connected both ways before timing.
  }
  return job;
}

}  // namespace

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

StatusOr<RawFairResult> RawFair(const RawFairOptions& o) {
  ASSIGN_OR_RETURN(auto job, StartRawJob(o.servers, o.workers, o.bytes, o.partition_bytes, o.window, o.update,
                                         o.streams, o.apply_threads));
  // Runs `op` on every worker at once (each on a thread of its own).
  auto timed = [&](RawOp op, int iters) {
    RawResult r;
    const double cpu0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (auto& w : job->workers)
      threads.emplace_back([&, w = w.get()] { w->Run(op, iters, op == RawOp::kPushPull ? 1 : o.window); });
    for (auto& t : threads) t.join();
    r.wall_s = Seconds(t0, Clock::now());
    r.cpu_s = ProcessCpuSeconds() - cpu0;
    const double moved = static_cast<double>(o.bytes) * o.workers * iters * (op == RawOp::kPushPull ? 2 : 1);
    r.gbps = 8.0 * moved / r.wall_s / 1e9;
    return r;
  };
  if (o.warmup > 0) timed(RawOp::kPushPull, o.warmup);
  RawFairResult out;
  out.push = timed(RawOp::kPush, o.iters);
  out.pull = timed(RawOp::kPull, o.iters);
  out.pushpull = timed(RawOp::kPushPull, o.iters);
  return out;
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

// ~RawJob: the worker goes first, its STOP ends the server's thread.
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
  // receivers when iters % R != 0 (assuming it did not once hung here).
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

// nereus_bench transport: Nereus push/pull throughput and round-trip time
// against raw ZeroMQ on the same machine, measured in the same run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>

#include <gflags/gflags.h>
#include <zmq.hpp>

#include "bench/bench.h"
#include "bench/local_job.h"

DEFINE_string(sizes, "4096,262144,4194304,67108864", "transport: tensor sizes in bytes.");
DEFINE_double(seconds, 1.0, "transport: approximate time spent on each measurement.");
DECLARE_uint64(partition_bytes);
DEFINE_int32(rtt_samples, 2000, "transport: round trips timed for the 4 KB latency.");
DEFINE_int32(repeats, 3,
             "transport: each measurement (ours and raw, interleaved) is repeated this many times and the best kept, "
             "so a burst of load from other tenants of a shared machine does not decide a ratio.");

namespace nereus {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int Iterations(uint64_t bytes) {
  // Enough bytes for ~FLAGS_seconds at a few GB/s, at least 4 messages.
  const double target = FLAGS_seconds * 2e9;
  return static_cast<int>(std::clamp<double>(target / static_cast<double>(bytes), 4, 20000));
}

void NoFree(void*, void*) {}

// W sender threads stream `iters` messages of `bytes` each to S receivers
// (round robin), zero-copy, PUSH/PULL. Returns aggregate Gbit/s.
double RawStream(int senders, int receivers, uint64_t bytes, int iters) {
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
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  const uint64_t per_receiver = static_cast<uint64_t>(senders) * iters / receivers;
  for (int r = 0; r < receivers; ++r) {
    threads.emplace_back([&, r] {
      zmq::message_t m;
      for (uint64_t i = 0; i < per_receiver; ++i) (void)pulls[r].recv(m);
    });
  }
  const auto start = Clock::now();
  for (int s = 0; s < senders; ++s) {
    threads.emplace_back([&] {
      std::vector<zmq::socket_t> push;
      for (int r = 0; r < receivers; ++r) {
        push.emplace_back(ctx, zmq::socket_type::push);
        push.back().set(zmq::sockopt::sndhwm, 0);
        push.back().connect(eps[r]);
      }
      for (int i = 0; i < iters; ++i) {
        zmq::message_t m(payload.data(), bytes, &NoFree, nullptr);
        push[i % receivers].send(m, zmq::send_flags::none);
      }
      for (auto& p : push) p.set(zmq::sockopt::linger, -1);
    });
  }
  for (auto& t : threads) t.join();
  const double s = Seconds(start, Clock::now());
  return 8.0 * bytes * senders * iters / s / 1e9;
}

// Median DEALER/ROUTER round trip of a `bytes` message, microseconds. Each
// side has its own context (and I/O thread), as two nodes of a job do.
double RawRtt(uint64_t bytes, int samples) {
  zmq::context_t ctx(1), peer_ctx(1);
  zmq::socket_t router(peer_ctx, zmq::socket_type::router);
  router.bind("tcp://127.0.0.1:*");
  const std::string ep = router.get(zmq::sockopt::last_endpoint);
  std::thread echo([&] {
    for (int i = 0; i < samples + 10; ++i) {
      zmq::message_t id, body;
      (void)router.recv(id);
      (void)router.recv(body);
      router.send(id, zmq::send_flags::sndmore);
      router.send(body, zmq::send_flags::none);
    }
  });
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.connect(ep);
  std::vector<char> payload(bytes, 1);
  std::vector<double> us;
  for (int i = 0; i < samples + 10; ++i) {
    const auto t0 = Clock::now();
    dealer.send(zmq::buffer(payload.data(), payload.size()), zmq::send_flags::none);
    zmq::message_t reply;
    (void)dealer.recv(reply);
    if (i >= 10) us.push_back(Seconds(t0, Clock::now()) * 1e6);
  }
  echo.join();
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

pb::SgdConfig BenchSgd() {
  pb::SgdConfig sgd;
  sgd.set_base_lr(1e-6f);
  sgd.set_lr_policy("fixed");
  sgd.set_momentum(0.9f);
  return sgd;
}

struct Measured {
  double push_gbps, pull_gbps, pushpull_gbps;
};

// Nereus throughput for one size and topology.
StatusOr<Measured> NereusThroughput(int servers, int workers, uint64_t bytes, int iters) {
  LocalJobOptions o;
  o.servers = servers;
  o.workers = workers;
  o.job.set_chunk_bytes(FLAGS_partition_bytes);
  // Pushes may run this far ahead of the slowest worker.
  ASSIGN_OR_RETURN(auto job, LocalJob::Start(o));
  const size_t n = bytes / sizeof(float);
  std::vector<std::vector<float>> w(workers, std::vector<float>(n, 0.5f)), g(workers, std::vector<float>(n, 1e-3f));
  {
    std::vector<Status> st(workers);
    std::vector<std::thread> ts;
    for (int r = 0; r < workers; ++r)
      ts.emplace_back([&, r] {
        auto id = job->worker(r).RegisterTensor({"t", {static_cast<int64_t>(n)}});
        st[r] = id.ok() ? job->worker(r).Init(BenchSgd(), {w[r].data()}) : id.status();
      });
    for (auto& t : ts) t.join();
    for (auto& s : st) RETURN_IF_ERROR(s);
  }
  // Runs `body(rank)` on every worker at once; returns the wall time.
  auto timed = [&](auto body) -> StatusOr<double> {
    std::vector<Status> st(workers);
    std::vector<std::thread> ts;
    const auto t0 = Clock::now();
    for (int r = 0; r < workers; ++r) ts.emplace_back([&, r] { st[r] = body(r); });
    for (auto& t : ts) t.join();
    const double s = Seconds(t0, Clock::now());
    for (auto& x : st) RETURN_IF_ERROR(x);
    return s;
  };
  int64_t clock = 0;
  Measured m{};
  constexpr int kWindow = 4;  // Operations in flight per worker.
  // push: clocks clock..clock+iters-1, a window of pushes in flight.
  ASSIGN_OR_RETURN(double push_s, timed([&](int r) -> Status {
    std::vector<Handle> inflight;
    for (int i = 0; i < iters; ++i) {
      // Workers push independently; keep them within the server's window of
      // clocks ahead (a barrier costs a few small messages).
      if (workers > 1 && i > 0 && i % 32 == 0) RETURN_IF_ERROR(job->worker(r).Barrier("push" + std::to_string(i)));
      if (inflight.size() == kWindow) {
        RETURN_IF_ERROR(inflight.front().Wait());
        inflight.erase(inflight.begin());
      }
      inflight.push_back(job->worker(r).Push(0, g[r].data(), clock + i));
    }
    for (auto& h : inflight) RETURN_IF_ERROR(h.Wait());
    return Status::OK();
  }));
  clock += iters;
  m.push_gbps = 8.0 * bytes * workers * iters / push_s / 1e9;
  // pull: the current version, a window of pulls in flight (into separate buffers).
  ASSIGN_OR_RETURN(double pull_s, timed([&](int r) -> Status {
    std::vector<std::vector<float>> dst(kWindow, std::vector<float>(n));
    std::vector<Handle> inflight(kWindow);
    for (int i = 0; i < iters; ++i) {
      RETURN_IF_ERROR(inflight[i % kWindow].Wait());
      inflight[i % kWindow] = job->worker(r).Pull(0, dst[i % kWindow].data(), clock);
    }
    for (auto& h : inflight) RETURN_IF_ERROR(h.Wait());
    return Status::OK();
  }));
  m.pull_gbps = 8.0 * bytes * workers * iters / pull_s / 1e9;
  // push+pull: the training pattern, one clock at a time.
  ASSIGN_OR_RETURN(double pp_s, timed([&](int r) -> Status {
    for (int i = 0; i < iters; ++i) {
      Handle push = job->worker(r).Push(0, g[r].data(), clock + i);
      Handle pull = job->worker(r).Pull(0, w[r].data(), clock + i + 1);
      RETURN_IF_ERROR(push.Wait());
      RETURN_IF_ERROR(pull.Wait());
    }
    return Status::OK();
  }));
  m.pushpull_gbps = 8.0 * 2 * bytes * workers * iters / pp_s / 1e9;
  RETURN_IF_ERROR(job->Finish());
  return m;
}

StatusOr<double> NereusRtt(int samples) {
  LocalJobOptions o;
  ASSIGN_OR_RETURN(auto job, LocalJob::Start(o));
  std::vector<float> w(1024, 0.0f);
  ASSIGN_OR_RETURN(int id, job->worker(0).RegisterTensor({"t", {1024}}));
  RETURN_IF_ERROR(job->worker(0).Init(BenchSgd(), {w.data()}));
  std::vector<double> us;
  for (int i = 0; i < samples + 10; ++i) {
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(job->worker(0).Pull(id, w.data(), 0).Wait());
    if (i >= 10) us.push_back(Seconds(t0, Clock::now()) * 1e6);
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  RETURN_IF_ERROR(job->Finish());
  return us[us.size() / 2];
}

}  // namespace

int RunTransport() {
  std::vector<uint64_t> sizes;
  for (const std::string& s : SplitCsv(FLAGS_sizes)) sizes.push_back(std::stoull(s));
  std::vector<Record> records;
  std::printf("%-9s %10s %4s %4s %10s %10s %7s\n", "op", "bytes", "S", "W", "nereus", "raw zmq", "ratio");
  for (auto [servers, workers] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}}) {
    for (uint64_t bytes : sizes) {
      const int iters = Iterations(bytes);
      double raw = 0;
      std::optional<Measured> m;
      for (int rep = 0; rep < std::max(1, FLAGS_repeats); ++rep) {
        raw = std::max(raw, RawStream(workers, servers, bytes, iters));
        auto once = NereusThroughput(servers, workers, bytes, iters);
        if (!once.ok()) {
          LOG(ERROR) << "transport bench: " << once.status();
          return 1;
        }
        if (!m) {
          m = *once;
        } else {
          m->push_gbps = std::max(m->push_gbps, once->push_gbps);
          m->pull_gbps = std::max(m->pull_gbps, once->pull_gbps);
          m->pushpull_gbps = std::max(m->pushpull_gbps, once->pushpull_gbps);
        }
      }
      for (auto [op, gbps] : std::vector<std::pair<const char*, double>>{
               {"push", m->push_gbps}, {"pull", m->pull_gbps}, {"pushpull", m->pushpull_gbps}}) {
        std::printf("%-9s %10llu %4d %4d %7.2f Gb %7.2f Gb %7.3f\n", op, static_cast<unsigned long long>(bytes), servers,
                    workers, gbps, raw, gbps / raw);
        Record r;
        r.Set("op", op).Set("bytes", bytes).Set("servers", servers).Set("workers", workers);
        r.Set("gbps", gbps).Set("raw_gbps", raw);
        records.push_back(r);
      }
      std::fflush(stdout);
    }
  }
  double raw_us = 1e30;
  StatusOr<double> us = 1e30;
  for (int rep = 0; rep < std::max(1, FLAGS_repeats); ++rep) {
    raw_us = std::min(raw_us, RawRtt(4096, FLAGS_rtt_samples));
    auto once = NereusRtt(FLAGS_rtt_samples);
    if (!once.ok()) {
      LOG(ERROR) << "transport bench: " << once.status();
      return 1;
    }
    us = std::min(*us, *once);
  }
  std::printf("%-9s %10d %4d %4d %7.1f us %7.1f us %7.3f\n", "rtt", 4096, 1, 1, *us, raw_us, *us / raw_us);
  Record r;
  r.Set("op", "rtt").Set("bytes", 4096).Set("servers", 1).Set("workers", 1).Set("us", *us).Set("raw_us", raw_us);
  records.push_back(r);
  return WriteJson(records) ? 0 : 1;
}

}  // namespace bench
}  // namespace nereus

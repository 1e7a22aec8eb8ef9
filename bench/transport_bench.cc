// nereus_bench transport: Nereus push/pull throughput and round-trip time
// against raw ZeroMQ on the same machine, measured in the same run.
#include <gflags/gflags.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <tuple>
#include <zmq.hpp>

#include "bench/bench.h"
#include "bench/harness/local_job.h"
#include "bench/harness/watchdog.h"
#include "bench/raw_zmq.h"
#include "common/base/clock.h"
#include "common/net/curve_keys.h"
#include "server/server_flags.h"
#include "worker/client/options_proto.h"

DEFINE_string(sizes, "4096,262144,4194304,67108864", "transport: tensor sizes in bytes.");
DEFINE_double(seconds, 1.0, "transport: approximate time spent on each measurement.");
DECLARE_uint64(partition_bytes);
DECLARE_string(json);
DECLARE_int32(streams);
DEFINE_int32(min_iterations, 4, "transport: operations per measurement at least (large sizes get this many).");
DEFINE_bool(curve, false,
            "transport: also measure Nereus with CURVE (every connection encrypted and authenticated, as with "
            "--curve_dir) and print its throughput next to plain TCP's, measured in the same run.");
DEFINE_int32(rtt_samples, 2000,
             "transport: round trips timed for the 4 KB latency, of Nereus and of raw ZeroMQ each, the two "
             "alternated one by one with both jobs up.");
DEFINE_string(raw_baseline, "fair",
              "transport: the raw ZeroMQ baseline. fair: raw ZeroMQ moving the same partitions between the same nodes "
              "with the same buffer handling and window as a Nereus job, minus Nereus (see bench/raw_zmq.h); "
              "stream: zero-copy PUSH/PULL streaming of the tensor's size one way (an upper bound).");
DEFINE_bool(raw_update, true,
            "transport: with --raw_baseline=fair, also measure it with the update a parameter server must make "
            "(the workers' gradients averaged and one SGD step with momentum per partition, on --apply_threads threads "
            "beside the receive thread, as a Nereus server makes it; pulls still answered at once but for a partition "
            "being updated) and print it as raw+upd with our ratio to it: the share of the gap to raw ZeroMQ that "
            "is the update itself rather than Nereus.");
DEFINE_int32(warmup_clocks, 2,
             "transport: push+pull clocks each job (Nereus and raw alike) makes before its timed phases, after "
             "every connection has carried a request.");
DEFINE_int32(repeats, 3,
             "transport: each measurement (ours and raw, interleaved) is repeated this many times and the best kept, "
             "so a burst of load from other tenants of a shared machine does not decide a ratio.");

namespace nereus {
namespace bench {
namespace {

using Clock = SteadyClock;

int Iterations(uint64_t bytes) {
  // Enough bytes for ~FLAGS_seconds at a few GB/s, at least --min_iterations.
  const double target = FLAGS_seconds * 2e9;
  const double lo = std::max(1, FLAGS_min_iterations);
  return static_cast<int>(std::clamp<double>(target / static_cast<double>(bytes), lo, std::max(lo, 20000.0)));
}

constexpr int kWindow = 4;  // Push or pull operations in flight per worker.

// One operation's figures.
struct OpFigures {
  double gbps = 0;
  double cpu_s_per_gb = 0;  // Process CPU seconds (every thread) per GB of tensor bytes moved.
};
struct Measured {
  OpFigures push, pull, pushpull;
};

// Nereus throughput for one size and topology. `phase` names this
// measurement; each of its steps is a watchdog phase.
StatusOr<Measured> NereusThroughput(int servers, int workers, uint64_t bytes, int iters, Watchdog* wd,
                                    const std::string& phase, const std::string& curve_dir = "") {
  wd->Phase(phase + ": job start and INIT");
  LocalJobOptions o;
  o.curve_dir = curve_dir;
  o.servers = servers;
  o.workers = workers;
  o.job.set_partition_bytes(FLAGS_partition_bytes);
  // A real job's connections: --streams from each worker to each server
  // (kFull spreads partitions over them) and from each server back.
  o.client.streams = FLAGS_streams;
  o.server_transport.streams_per_peer = FLAGS_streams;
  ASSIGN_OR_RETURN(o.server_apply_threads, ApplyThreadsFromFlags());
  ASSIGN_OR_RETURN(auto job, LocalJob::Start(o));
  const size_t n = bytes / sizeof(float);
  std::vector<std::vector<float>> w(workers, std::vector<float>(n, 0.5f)), g(workers, std::vector<float>(n, 1e-3f));
  {
    std::vector<Status> st(workers);
    std::vector<std::thread> ts;
    for (int r = 0; r < workers; ++r)
      ts.emplace_back([&, r] {
        auto id = job->worker(r).RegisterTensor({"t", {static_cast<int64_t>(n)}});
        st[r] = id.ok() ? job->worker(r).Init(SgdConfigFromProto(BenchSgd()), {w[r].data()}) : id.status();
      });
    for (auto& t : ts) t.join();
    for (auto& s : st) RETURN_IF_ERROR(s);
  }
  // Pull destinations, allocated (and touched) before any timing.
  std::vector<std::vector<std::vector<float>>> dsts(workers);
  // Runs `body(rank)` on every worker at once; `moved` tensor bytes in all.
  auto timed = [&](double moved, auto body) -> StatusOr<OpFigures> {
    std::vector<Status> st(workers);
    std::vector<std::thread> ts;
    const double cpu0 = ProcessCpuSeconds();
    const auto t0 = Clock::now();
    for (int r = 0; r < workers; ++r) ts.emplace_back([&, r] { st[r] = body(r); });
    for (auto& t : ts) t.join();
    const double s = Seconds(t0, Clock::now());
    const double cpu = ProcessCpuSeconds() - cpu0;
    for (auto& x : st) RETURN_IF_ERROR(x);
    return OpFigures{8.0 * moved / s / 1e9, cpu / (moved / 1e9)};
  };
  const double tensor_bytes = static_cast<double>(bytes) * workers * iters;
  int64_t clock = 0;
  Measured m{};
  wd->Phase(phase + ": warm-up");
  // Every connection carries a request, then --warmup_clocks push+pulls, as
  // the raw baseline's job (RawFair) does before its timed phases.
  {
    std::vector<Status> st(workers);
    std::vector<std::thread> ts;
    for (int r = 0; r < workers; ++r)
      ts.emplace_back([&, r] {
        for (int i = 0; i < FLAGS_warmup_clocks && st[r].ok(); ++i) {
          Handle push = job->worker(r).Push(0, g[r].data(), clock + i);
          Handle pull = job->worker(r).Pull(0, w[r].data(), clock + i + 1);
          st[r] = push.Wait();
          if (st[r].ok()) st[r] = pull.Wait();
        }
      });
    for (auto& t : ts) t.join();
    for (auto& x : st) RETURN_IF_ERROR(x);
    clock += std::max(0, FLAGS_warmup_clocks);
  }
  wd->Phase(phase + ": push");
  // push: clocks clock..clock+iters-1, a window of pushes in flight.
  ASSIGN_OR_RETURN(m.push, timed(tensor_bytes, [&](int r) -> Status {
                     std::vector<Handle> inflight;
                     for (int i = 0; i < iters; ++i) {
                       // Workers push independently; keep them within the server's window of
                       // clocks ahead (a barrier costs a few small messages).
                       if (workers > 1 && i > 0 && i % 32 == 0)
                         RETURN_IF_ERROR(job->worker(r).Barrier("push" + std::to_string(i)));
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
  wd->Phase(phase + ": pull");
  for (auto& d : dsts) d.assign(kWindow, std::vector<float>(n, 0.0f));
  // pull: the current version, a window of pulls in flight (into separate buffers).
  ASSIGN_OR_RETURN(m.pull, timed(tensor_bytes, [&](int r) -> Status {
                     std::vector<std::vector<float>>& dst = dsts[r];
                     std::vector<Handle> inflight(kWindow);
                     for (int i = 0; i < iters; ++i) {
                       RETURN_IF_ERROR(inflight[i % kWindow].Wait());
                       inflight[i % kWindow] = job->worker(r).Pull(0, dst[i % kWindow].data(), clock);
                     }
                     for (auto& h : inflight) RETURN_IF_ERROR(h.Wait());
                     return Status::OK();
                   }));
  wd->Phase(phase + ": push+pull");
  // push+pull: the training pattern, one clock at a time.
  ASSIGN_OR_RETURN(m.pushpull, timed(2 * tensor_bytes, [&](int r) -> Status {
                     for (int i = 0; i < iters; ++i) {
                       Handle push = job->worker(r).Push(0, g[r].data(), clock + i);
                       Handle pull = job->worker(r).Pull(0, w[r].data(), clock + i + 1);
                       RETURN_IF_ERROR(push.Wait());
                       RETURN_IF_ERROR(pull.Wait());
                     }
                     return Status::OK();
                   }));
  wd->Phase(phase + ": job finish");
  RETURN_IF_ERROR(job->Finish());
  return m;
}

struct RttFigures {
  double us = 0, raw_us = 0;  // Medians.
};

// The 4 KB pull round trip of Nereus and of the fair raw baseline, both jobs
// up at once and their round trips alternated one by one (which goes first
// alternates too), so that both see the same moments of the machine: on a
// virtual machine an idle core's wake-up alone moves a round trip from about
// 20 us to about 100 us, which separate blocks of samples caught
// differently (ratios of 0.30 and 1.16 in two back-to-back runs).
StatusOr<RttFigures> Rtt(int samples, Watchdog* wd, const std::string& phase) {
  wd->Phase(phase + ": jobs start and INIT");
  ASSIGN_OR_RETURN(auto raw, RawRttJob::Start(4096));
  LocalJobOptions o;
  ASSIGN_OR_RETURN(auto job, LocalJob::Start(o));
  std::vector<float> w(1024, 0.0f);
  ASSIGN_OR_RETURN(int id, job->worker(0).RegisterTensor({"t", {1024}}));
  RETURN_IF_ERROR(job->worker(0).Init(SgdConfigFromProto(BenchSgd()), {w.data()}));
  std::vector<double> us, raw_us;
  wd->Phase(phase + ": round trips");
  for (int i = 0; i < samples + 10; ++i) {
    double ours_once = 0, raw_once = 0;
    for (int k = 0; k < 2; ++k) {
      if ((i + k) % 2 == 0) {
        const auto t0 = Clock::now();
        RETURN_IF_ERROR(job->worker(0).Pull(id, w.data(), 0).Wait());
        ours_once = Seconds(t0, Clock::now()) * 1e6;
      } else {
        raw_once = raw->PullMicros();
      }
    }
    if (i < 10) continue;  // Warm-up.
    us.push_back(ours_once);
    raw_us.push_back(raw_once);
  }
  wd->Phase(phase + ": jobs finish");
  RETURN_IF_ERROR(job->Finish());
  return RttFigures{Median(us), Median(raw_us)};
}

// A scratch directory of CURVE keys for --curve, removed at exit.
class CurveKeyDir {
 public:
  CurveKeyDir() {
    char tmpl[] = "/tmp/nereus_bench_keys.XXXXXX";
    CHECK(mkdtemp(tmpl) != nullptr) << "mkdtemp: " << std::strerror(errno);
    path_ = std::string(tmpl) + "/keys";
    Status st = WriteJobKeys(path_, 2, 2);
    CHECK(st.ok()) << st;
  }
  ~CurveKeyDir() { std::filesystem::remove_all(std::filesystem::path(path_).parent_path()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

int RunTransport(BenchContext& ctx) {
  Watchdog* wd = ctx.watchdog;
  std::vector<uint64_t> sizes;
  for (const std::string& s : SplitCsv(FLAGS_sizes)) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || v < sizeof(float) || v % sizeof(float) != 0) {
      LOG(ERROR) << "--sizes: \"" << s << "\" is not a positive multiple of 4 bytes";
      return 2;
    }
    sizes.push_back(v);
  }
  if (FLAGS_rtt_samples < 1) {
    LOG(ERROR) << "--rtt_samples must be >= 1, got " << FLAGS_rtt_samples;
    return 2;
  }
  const bool fair = FLAGS_raw_baseline == "fair";
  if (!fair && FLAGS_raw_baseline != "stream") {
    LOG(ERROR) << "--raw_baseline must be fair or stream, got \"" << FLAGS_raw_baseline << "\"";
    return 2;
  }
  std::optional<CurveKeyDir> keys;
  if (FLAGS_curve) keys.emplace();
  JsonRows json(FLAGS_json);
  std::printf("raw baseline: %s (bench/raw_zmq.h); cpu = process CPU seconds per GB of tensor bytes moved\n",
              FLAGS_raw_baseline.c_str());
  const bool with_update = fair && FLAGS_raw_update;
  auto threads = ApplyThreadsFromFlags();
  if (!threads.ok()) {
    LOG(ERROR) << threads.status().message();
    return 2;
  }
  const int apply_threads = *threads;
  if (FLAGS_streams < 1) {
    LOG(ERROR) << "--streams must be >= 1, got " << FLAGS_streams;
    return 2;
  }
  std::printf(
      "both: %d connection(s) per worker and server (--streams), updates on %d apply thread(s) "
      "(--apply_threads), %d warm-up push+pull clock(s) per job (--warmup_clocks)\n",
      FLAGS_streams, apply_threads, FLAGS_warmup_clocks);
  if (with_update)
    std::printf("raw+upd = the fair baseline plus the update a parameter server makes (see --raw_update)\n");
  std::printf("%-9s %10s %4s %4s %10s %10s %7s %9s %9s", "op", "bytes", "S", "W", "nereus", "raw zmq", "ratio",
              "cpu/GB", "raw cpu");
  if (with_update) std::printf(" %10s %7s", "raw+upd", "ratio");
  std::printf("\n");
  auto fail = [](const Status& st) {
    LOG(ERROR) << "transport bench: " << st;
    return 1;
  };
  auto best = [](OpFigures* into, const OpFigures& x) {
    if (x.gbps > into->gbps) *into = x;
  };
  for (auto [servers, workers] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}}) {
    for (uint64_t bytes : sizes) {
      const int iters = Iterations(bytes);
      Measured raw{}, upd{}, ours{}, curve{};
      for (int rep = 0; rep < std::max(1, FLAGS_repeats); ++rep) {
        const std::string what = std::to_string(servers) + "x" + std::to_string(workers) + " " + std::to_string(bytes) +
                                 " B, repeat " + std::to_string(rep + 1);
        if (fair) {
          const pb::SgdConfig sgd = BenchSgd();
          RawFairOptions ro;
          ro.servers = servers;
          ro.workers = workers;
          ro.bytes = bytes;
          ro.partition_bytes = FLAGS_partition_bytes;
          ro.iters = iters;
          ro.window = kWindow;
          ro.streams = FLAGS_streams;
          ro.apply_threads = apply_threads;
          ro.warmup = FLAGS_warmup_clocks;
          auto figures = [](const RawResult& r) { return OpFigures{r.gbps, r.cpu_s / (r.gbps * r.wall_s / 8.0)}; };
          wd->Phase("raw zmq " + what);
          auto r = RawFair(ro);
          if (!r.ok()) return fail(r.status());
          best(&raw.push, figures(r->push));
          best(&raw.pull, figures(r->pull));
          best(&raw.pushpull, figures(r->pushpull));
          if (FLAGS_raw_update) {
            wd->Phase("raw zmq+update " + what);
            ro.update = &sgd;
            r = RawFair(ro);
            if (!r.ok()) return fail(r.status());
            best(&upd.push, figures(r->push));
            best(&upd.pushpull, figures(r->pushpull));
            // A pull makes no update: its figure is the plain one's.
            upd.pull = raw.pull;
          }
        } else {
          wd->Phase("raw zmq stream " + what);
          const RawResult r = RawStream(workers, servers, bytes, iters);
          const OpFigures f{r.gbps, r.cpu_s / (r.gbps * r.wall_s / 8.0)};
          best(&raw.push, f);
          best(&raw.pull, f);
          best(&raw.pushpull, f);
        }
        auto once = NereusThroughput(servers, workers, bytes, iters, wd, "nereus " + what);
        if (!once.ok()) return fail(once.status());
        best(&ours.push, once->push);
        best(&ours.pull, once->pull);
        best(&ours.pushpull, once->pushpull);
        if (keys) {
          // Interleaved with the plain runs, so both see the same machine load.
          auto cv = NereusThroughput(servers, workers, bytes, iters, wd, "nereus+curve " + what, keys->path());
          if (!cv.ok()) return fail(cv.status());
          best(&curve.push, cv->push);
          best(&curve.pull, cv->pull);
          best(&curve.pushpull, cv->pushpull);
        }
      }
      const std::tuple<const char*, OpFigures, OpFigures, OpFigures> rows[] = {
          {"push", ours.push, raw.push, upd.push},
          {"pull", ours.pull, raw.pull, upd.pull},
          {"pushpull", ours.pushpull, raw.pushpull, upd.pushpull}};
      for (const auto& [op, mine, base, base_upd] : rows) {
        std::printf("%-9s %10llu %4d %4d %7.2f Gb %7.2f Gb %7.3f %9.3f %9.3f", op,
                    static_cast<unsigned long long>(bytes), servers, workers, mine.gbps, base.gbps,
                    mine.gbps / base.gbps, mine.cpu_s_per_gb, base.cpu_s_per_gb);
        if (with_update) std::printf(" %7.2f Gb %7.3f", base_upd.gbps, mine.gbps / base_upd.gbps);
        std::printf("\n");
        Record r;
        r.Set("op", op).Set("bytes", bytes).Set("servers", servers).Set("workers", workers);
        r.Set("gbps", mine.gbps).Set("raw_gbps", base.gbps).Set("ratio", mine.gbps / base.gbps);
        r.Set("cpu_s_per_gb", mine.cpu_s_per_gb).Set("raw_cpu_s_per_gb", base.cpu_s_per_gb);
        if (with_update) {
          r.Set("raw_update_gbps", base_upd.gbps).Set("ratio_to_raw_update", mine.gbps / base_upd.gbps);
          r.Set("raw_update_cpu_s_per_gb", base_upd.cpu_s_per_gb);
        }
        r.Set("raw_baseline", FLAGS_raw_baseline).Set("streams", FLAGS_streams).Set("apply_threads", apply_threads);
        if (!json.Add(r)) return 1;
      }
      if (keys) {
        // Second numeric column: plain Nereus (not raw ZeroMQ); ratio = CURVE / plain.
        const std::tuple<const char*, OpFigures, OpFigures> cv_rows[] = {{"push+cv", curve.push, ours.push},
                                                                         {"pull+cv", curve.pull, ours.pull},
                                                                         {"pp+cv", curve.pushpull, ours.pushpull}};
        for (const auto& [op, mine, plain] : cv_rows) {
          std::printf("%-9s %10llu %4d %4d %7.2f Gb %7.2f Gb %7.3f %9.3f %9.3f  (CURVE vs plain Nereus)\n", op,
                      static_cast<unsigned long long>(bytes), servers, workers, mine.gbps, plain.gbps,
                      mine.gbps / plain.gbps, mine.cpu_s_per_gb, plain.cpu_s_per_gb);
          Record r;
          r.Set("op", op).Set("bytes", bytes).Set("servers", servers).Set("workers", workers);
          r.Set("gbps", mine.gbps).Set("plain_gbps", plain.gbps).Set("ratio", mine.gbps / plain.gbps);
          r.Set("cpu_s_per_gb", mine.cpu_s_per_gb).Set("plain_cpu_s_per_gb", plain.cpu_s_per_gb).Set("curve", 1);
          if (!json.Add(r)) return 1;
        }
      }
      std::fflush(stdout);
    }
  }
  // The best of --repeats medians, each side's own best (as the throughputs).
  double raw_us = 1e30, us = 1e30;
  for (int rep = 0; rep < std::max(1, FLAGS_repeats); ++rep) {
    auto once = Rtt(FLAGS_rtt_samples, wd,
                    "4096 B round trips (nereus and raw zmq, alternated), repeat " + std::to_string(rep + 1));
    if (!once.ok()) return fail(once.status());
    us = std::min(us, once->us);
    raw_us = std::min(raw_us, once->raw_us);
  }
  wd->Idle();
  std::printf("%-9s %10d %4d %4d %7.1f us %7.1f us %7.3f\n", "rtt", 4096, 1, 1, us, raw_us, us / raw_us);
  Record r;
  r.Set("op", "rtt").Set("bytes", 4096).Set("servers", 1).Set("workers", 1).Set("us", us).Set("raw_us", raw_us);
  r.Set("ratio", us / raw_us).Set("raw_baseline", "fair");
  if (!json.Add(r)) return 1;
  if (!FLAGS_json.empty()) std::printf("wrote %s\n", FLAGS_json.c_str());
  return 0;
}

}  // namespace bench
}  // namespace nereus

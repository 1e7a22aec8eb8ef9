// nereus_bench apply: how fast one parameter server makes its updates with
// 0 (on the receive thread), 1, 2, ... apply threads (--apply_threads), next
// to this machine's memcpy bandwidth on 1 and on every core, measured in the
// same run. The bench's thread plays the server's receive thread: it hands a
// ParamServer every worker's push of every partition, clock after clock, as
// fast as it takes them (no network); an update reads the workers' gradients,
// the weights and the history and writes the weights and the history, so its
// memory traffic is (workers + 4) x the partition's bytes.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "bench/harness/local_job.h"
#include "bench/harness/watchdog.h"
#include "common/base/clock.h"
#include "server/apply_pool.h"
#include "server/param_server.h"

DEFINE_uint64(apply_bytes, 64 << 20, "apply: bytes of weights on the server (cut into --partition_bytes partitions).");
DEFINE_int32(apply_workers, 4, "apply: workers whose gradients every update averages.");
DEFINE_string(apply_threads_list, "0,1,2,cores",
              "apply: the --apply_threads values to measure, comma separated; \"cores\" is this process's cores.");
DEFINE_double(apply_seconds, 2, "apply: approximate time of each measurement (whole clocks, at least 2).");
DEFINE_int32(apply_repeats, 3,
             "apply: each measurement (and memcpy) repeated this many times, interleaved; best kept.");
DECLARE_uint64(partition_bytes);
DECLARE_string(json);

namespace nereus {
namespace bench {
namespace {

using Clock = SteadyClock;

class DropSink : public ReplySink {
 public:
  void Reply(const Endpoint&, Message) override {}
};

// Bytes copied per second by `threads` threads, each copying its own share
// of `bytes` (source and destination touched first), best of a few copies.
double MemcpyGBps(uint64_t bytes, int threads) {
  const size_t share = bytes / threads;
  std::vector<std::vector<char>> src(threads, std::vector<char>(share, 1)), dst(threads, std::vector<char>(share, 0));
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { std::memcpy(dst[t].data(), src[t].data(), share); });
    for (auto& t : ts) t.join();
    best = std::max(best, static_cast<double>(share) * threads / Seconds(t0, Clock::now()) / 1e9);
  }
  return best;
}

struct ApplyFigures {
  double seconds = 0;
  int clocks = 0;
  double updates_per_s = 0;
};

// One server with `threads` apply threads: `clocks` clocks of every
// worker's push of every partition, timed until the last update is made.
StatusOr<ApplyFigures> MeasureApply(int threads, uint64_t bytes, uint64_t partition, int workers, int clocks) {
  DropSink sink;
  ParamServerOptions o;
  o.num_workers = workers;
  o.apply_threads = threads;
  ParamServer server(o, &sink);
  const uint64_t partitions = (bytes + partition - 1) / partition;
  const uint64_t floats = partition / sizeof(float);
  auto handle = [&](Message m, int worker) {
    pb::Header partial = m.header;
    server.Handle("w" + std::to_string(worker), worker, std::move(m), partial);
  };
  for (uint64_t p = 0; p < partitions; ++p) {
    Message m;
    m.header.set_op(pb::INIT_PARTITION);
    m.header.set_tensor(static_cast<int>(p));
    m.header.set_dtype(pb::FLOAT32);
    m.payload.push_back(Buffer::Of(std::make_shared<const std::vector<float>>(floats, 0.5f)));
    m.header.set_payload_bytes(m.payload_bytes());
    auto* meta = m.header.mutable_partition_meta();
    meta->set_tensor(static_cast<int>(p));
    meta->set_length(floats);
    meta->set_lr_mult(1);
    meta->set_decay_mult(1);
    *m.header.mutable_sgd() = BenchSgd();
    handle(std::move(m), 0);
  }
  // Each worker's gradient of each partition, made (and touched) once and
  // pushed every clock.
  std::vector<std::vector<Buffer>> grads(workers);
  for (int w = 0; w < workers; ++w)
    for (uint64_t p = 0; p < partitions; ++p)
      grads[w].push_back(Buffer::Of(std::make_shared<const std::vector<float>>(floats, 1e-3f * (w + 1))));
  server.WaitIdle();
  const auto t0 = Clock::now();
  for (int c = 0; c < clocks; ++c) {
    // A server takes pushes at most 64 clocks ahead of its updates.
    if (c > 0 && c % 32 == 0) server.WaitIdle();
    for (uint64_t p = 0; p < partitions; ++p) {
      for (int w = 0; w < workers; ++w) {
        Message m;
        m.header.set_op(pb::PUSH);
        m.header.set_tensor(static_cast<int>(p));
        m.header.set_clock(c);
        m.header.set_dtype(pb::FLOAT32);
        m.payload.push_back(grads[w][p]);
        m.header.set_payload_bytes(m.payload_bytes());
        handle(std::move(m), w);
      }
    }
  }
  server.WaitIdle();
  ApplyFigures f;
  f.seconds = Seconds(t0, Clock::now());
  f.clocks = clocks;
  f.updates_per_s = static_cast<double>(partitions) * clocks / f.seconds;
  for (uint64_t p = 0; p < partitions; ++p) {
    auto snap = server.Snapshot(static_cast<int>(p), 0);
    if (!snap.ok()) return snap.status();
    if (snap->second != clocks)
      return InternalError("partition " + std::to_string(p) + " made " + std::to_string(snap->second) +
                           " updates, expected " + std::to_string(clocks));
  }
  return f;
}

}  // namespace

int RunApply(BenchContext& ctx) {
  Watchdog* wd = ctx.watchdog;
  const uint64_t partition = FLAGS_partition_bytes;
  if (partition < sizeof(float) || partition % sizeof(float) != 0 || FLAGS_apply_bytes < partition) {
    LOG(ERROR) << "apply: need --partition_bytes a positive multiple of 4 and --apply_bytes >= it";
    return 2;
  }
  if (FLAGS_apply_workers < 1 || FLAGS_apply_repeats < 1 || !(FLAGS_apply_seconds > 0)) {
    LOG(ERROR) << "apply: --apply_workers and --apply_repeats must be >= 1, --apply_seconds > 0";
    return 2;
  }
  const int cores = AvailableCores();
  std::vector<int> list;
  for (const std::string& v : SplitCsv(FLAGS_apply_threads_list)) {
    int t = -1;
    if (v == "cores") {
      t = cores;
    } else {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < 0 || x > 1024) {
        LOG(ERROR) << "--apply_threads_list: \"" << v << "\" is not a thread count (0..1024) or \"cores\"";
        return 2;
      }
      t = static_cast<int>(x);
    }
    if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
  }
  if (list.empty()) {
    LOG(ERROR) << "--apply_threads_list is empty";
    return 2;
  }
  const int W = FLAGS_apply_workers;
  const uint64_t partitions = (FLAGS_apply_bytes + partition - 1) / partition;
  const double weight_bytes = static_cast<double>(partitions) * partition;
  // Clocks for about --apply_seconds at one core's ~5 GB/s of gradients.
  const int clocks = std::max(2, static_cast<int>(FLAGS_apply_seconds * 5e9 / (weight_bytes * W)));
  std::printf(
      "apply: %llu partition(s) of %llu bytes, %d workers, %d clocks a measurement, %d core(s); GB/s = 1e9 "
      "bytes/s\n",
      static_cast<unsigned long long>(partitions), static_cast<unsigned long long>(partition), W, clocks, cores);
  std::vector<ApplyFigures> best(list.size());
  double memcpy_1 = 0, memcpy_n = 0;
  for (int rep = 0; rep < FLAGS_apply_repeats; ++rep) {
    wd->Phase("memcpy, repeat " + std::to_string(rep + 1));
    memcpy_1 = std::max(memcpy_1, MemcpyGBps(std::min<uint64_t>(FLAGS_apply_bytes, 256 << 20), 1));
    memcpy_n = std::max(memcpy_n, MemcpyGBps(std::min<uint64_t>(FLAGS_apply_bytes, 256 << 20), cores));
    for (size_t i = 0; i < list.size(); ++i) {
      wd->Phase("apply with " + std::to_string(list[i]) + " thread(s), repeat " + std::to_string(rep + 1));
      auto f = MeasureApply(list[i], FLAGS_apply_bytes, partition, W, clocks);
      if (!f.ok()) {
        LOG(ERROR) << "apply bench: " << f.status();
        return 1;
      }
      if (f->updates_per_s > best[i].updates_per_s) best[i] = *f;
    }
  }
  wd->Idle();
  std::printf("memcpy: %.2f GB/s copied on 1 thread, %.2f GB/s on %d (memory traffic twice that)\n", memcpy_1, memcpy_n,
              cores);
  std::printf("%8s %12s %14s %14s %12s %10s\n", "threads", "updates/s", "gradient GB/s", "weights GB/s", "traffic GB/s",
              "vs 1 thr");
  JsonRows json(FLAGS_json);
  double base = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const double u = best[i].updates_per_s;
    const double grad = u * partition * W / 1e9, weights = u * partition / 1e9;
    const double traffic = u * partition * (W + 4) / 1e9;
    if (list[i] == 1) base = grad;
    std::printf("%8d %12.1f %14.2f %14.2f %12.2f %10s\n", list[i], u, grad, weights, traffic,
                base > 0 ? (std::to_string(grad / base).substr(0, 5) + "x").c_str() : "-");
    Record r;
    r.Set("apply_threads", list[i]).Set("cores", cores).Set("workers", W).Set("partition_bytes", partition);
    r.Set("partitions", static_cast<unsigned long long>(partitions)).Set("clocks", best[i].clocks);
    r.Set("updates_per_s", u).Set("gradient_gbytes_per_s", grad).Set("weights_gbytes_per_s", weights);
    r.Set("memory_traffic_gbytes_per_s", traffic);
    r.Set("memcpy_gbytes_per_s_1", memcpy_1).Set("memcpy_gbytes_per_s_all", memcpy_n);
    if (!json.Add(r)) return 1;
  }
  if (!FLAGS_json.empty()) std::printf("wrote %s\n", FLAGS_json.c_str());
  return 0;
}

}  // namespace bench
}  // namespace nereus

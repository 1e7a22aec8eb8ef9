// Shared pieces of nereus_bench's subcommands.
#ifndef NEREUS_BENCH_BENCH_H_
#define NEREUS_BENCH_BENCH_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/harness/emulated_worker.h"
#include "common/base/status.h"

namespace nereus {
namespace bench {

// One JSON object with fields in insertion order.
class Record {
 public:
  Record& Set(const std::string& key, const std::string& v) { return Raw(key, Quote(v)); }
  Record& Set(const std::string& key, const char* v) { return Raw(key, Quote(v)); }
  Record& Set(const std::string& key, double v) {
    std::ostringstream os;
    os.precision(6);
    os << v;
    return Raw(key, os.str());
  }
  Record& Set(const std::string& key, int v) { return Raw(key, std::to_string(v)); }
  Record& Set(const std::string& key, long long v) { return Raw(key, std::to_string(v)); }
  Record& Set(const std::string& key, unsigned long long v) { return Raw(key, std::to_string(v)); }
  Record& Set(const std::string& key, unsigned long v) { return Raw(key, std::to_string(v)); }
  Record& Set(const std::string& key, long v) { return Raw(key, std::to_string(v)); }
  // A value that is JSON already (an array, an object).
  Record& Raw(const std::string& key, const std::string& json) {
    fields_.emplace_back(key, json);
    return *this;
  }
  std::string ToJson() const;

 private:
  static std::string Quote(const std::string& s);
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::vector<std::string> SplitCsv(const std::string& s);
// Writes `records` as a JSON array to --json (if set). False on I/O error.
bool WriteJson(const std::vector<Record>& records);

// The rows of one run, written to `path` (--json; empty: nowhere) as a JSON
// array after every Add, so whatever was measured before a run is cut short
// (a stuck phase, a crash) is on disk and the file is always valid JSON.
class JsonRows {
 public:
  explicit JsonRows(std::string path) : path_(std::move(path)) {}
  // Appends `r` and rewrites the file (a temporary renamed over it). False
  // (logged) on I/O error.
  bool Add(const Record& r);
  const std::vector<Record>& rows() const { return rows_; }

 private:
  std::string path_;
  std::vector<Record> rows_;
};

// How many of `items` dealt round robin over `ways` slots, the first to slot
// `start`, land in slot `slot`. Exact when items % ways != 0 (the shares then
// differ by one): never assume counts divide evenly.
inline uint64_t RoundRobinShare(uint64_t items, int ways, int slot, int start) {
  const uint64_t w = static_cast<uint64_t>(ways);
  const uint64_t pos = (static_cast<uint64_t>(slot) + w - static_cast<uint64_t>(start) % w) % w;
  return items / w + (pos < items % w ? 1 : 0);
}

// The median of `v` (of an even count, the upper of the middle two); 0 for
// none.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// A subcommand's check of a flag's value: the value, or nothing after logging
// the error (the subcommand then exits with status 2).
template <typename T>
std::optional<T> ValueOrLog(StatusOr<T> v) {
  if (v.ok()) return std::move(v).value();
  LOG(ERROR) << v.status().message();
  return std::nullopt;
}

// The emulated device and iterations of --device_gflops, --batch, --warmup,
// --iterations and --device_update_gbytes (pipeline_bench.cc defines them;
// pipeline, cluster and simulate share them); SFB layers rebuilt on the
// emulated device if rebuild_on_device (--sfb_rebuild=device).
EmulatedRun EmulatedRunFromFlags(bool rebuild_on_device = false);

class Watchdog;

// What every subcommand gets from main.
struct BenchContext {
  std::vector<std::string> args;  // The command line as given (flags included).
  Watchdog* watchdog = nullptr;   // Name each phase: watchdog->Phase("...").
};

int RunTransport(BenchContext& ctx);
// One server's updates on 0, 1, 2, ... apply threads beside memcpy (apply_bench.cc).
int RunApply(BenchContext& ctx);
int RunPipeline(BenchContext& ctx);
// The emulated multi-host cluster (cluster_bench.cc) and, internal, its
// worker process (not listed: started by cluster only).
int RunCluster(BenchContext& ctx);
int RunClusterWorker();
// A model's layers as the emulated workers see them (shrunk by --model_scale,
// per-layer seconds at --device_gflops and --batch), as JSON on stdout, for
// emulated workers written elsewhere (bench/torch/cluster_compare.py).
int RunModel(BenchContext& ctx);
// The event-driven simulator (simulate_bench.cc).
int RunSimulate(BenchContext& ctx);
// The trainer's own speed on the CPU or a GPU (train_bench.cc).
int RunTrain(BenchContext& ctx);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_BENCH_H_

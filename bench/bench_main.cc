// nereus_bench: synthetic throughput benchmarks.
//   nereus_bench transport [--json=FILE]   push/pull vs raw ZeroMQ
//   nereus_bench pipeline  [--json=FILE]   a model's iteration under a schedule
//   nereus_bench train     [--json=FILE]   the trainer's images/s, CPU or GPU
//   nereus_bench list                      the subcommands, one a line
// A new subcommand goes into kSubcommands below and gets a line in
// tests/bench/bench_smoke_test.py (bench_smoke_test fails until it has one).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/harness/watchdog.h"
#include "common/base/init_binary.h"

DEFINE_string(json, "", "Write the results as a JSON array to this file (rewritten after every row).");
DEFINE_double(phase_timeout_s, 300,
              "Every phase of a benchmark (one measurement, one job's start or end) must finish within this many "
              "seconds, or nereus_bench names the stuck phase and exits with status 3. 0 disables the bound.");

namespace nereus {
namespace bench {

std::string Record::Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Record::ToJson() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    out += (i ? ", " : "") + Quote(fields_[i].first) + ": " + fields_[i].second;
  return out + "}";
}

std::vector<std::string> SplitCsv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

bool WriteJson(const std::vector<Record>& records) {
  if (FLAGS_json.empty()) return true;
  std::ofstream out(FLAGS_json);
  out << "[\n";
  for (size_t i = 0; i < records.size(); ++i)
    out << "  " << records[i].ToJson() << (i + 1 < records.size() ? ",\n" : "\n");
  out << "]\n";
  if (!out) {
    LOG(ERROR) << "cannot write --json=" << FLAGS_json;
    return false;
  }
  std::printf("wrote %s\n", FLAGS_json.c_str());
  return true;
}

bool JsonRows::Add(const Record& r) {
  rows_.push_back(r);
  if (path_.empty()) return true;
  const std::string tmp = path_ + ".partial";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "[\n";
    for (size_t i = 0; i < rows_.size(); ++i) out << "  " << rows_[i].ToJson() << (i + 1 < rows_.size() ? ",\n" : "\n");
    out << "]\n";
    out.flush();
    if (!out) {
      LOG(ERROR) << "cannot write " << tmp << " (for --json=" << path_ << ")";
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    LOG(ERROR) << "cannot rename " << tmp << " to " << path_;
    return false;
  }
  return true;
}

namespace {

struct Subcommand {
  const char* name;
  int (*run)(BenchContext& ctx);
};

// Every subcommand of nereus_bench. `nereus_bench list` prints these names,
// and bench_smoke_test checks that each has a smoke run.
constexpr Subcommand kSubcommands[] = {
    {"transport", RunTransport}, {"pipeline", RunPipeline}, {"cluster", RunCluster},
    {"simulate", RunSimulate},   {"apply", RunApply},       {"model", RunModel},
#ifdef NEREUS_HAVE_TRAINER
    {"train", RunTrain},
#endif
};

}  // namespace

}  // namespace bench
}  // namespace nereus

int main(int argc, char** argv) {
  // The pipeline bench re-runs itself inside a namespace with the same flags:
  // keep them before gflags removes them from argv.
  std::vector<std::string> original(argv, argv + argc);
  nereus::InitBinary(
      "Nereus benchmarks.\n"
      "  nereus_bench list\n"
      "      the subcommands, one a line.\n"
      "  nereus_bench transport [--json=FILE] [--sizes=...]\n"
      "      push, pull and push+pull throughput (1x1 and 2x2) and the 4 KB round trip,\n"
      "      each next to raw ZeroMQ measured in the same run (ratio = nereus / raw).\n"
      "  nereus_bench apply [--apply_bytes=B] [--apply_workers=W] [--apply_threads_list=0,1,2,cores]\n"
      "      one server's updates (average of W gradients and an SGD step per partition) per second with\n"
      "      each number of apply threads, next to memcpy's bandwidth on 1 and on every core, same run.\n"
      "  nereus_bench pipeline --model=vgg19|vgg19_22k|resnet50|... --workers=N --servers=M --schedule=MODE|all\n"
      "                        [--link_mbit=R | --link_list=R1,R2] [--sfb=off,auto] [--batch=K]\n"
      "                        [--device_gflops=G] [--sfb_rebuild=cpu,device] [--model_scale=F] [--rounds=N]\n"
      "                        [--json=FILE]\n"
      "      workers emulate the model's per-layer compute (FLOPs / --device_gflops, slept) and push and\n"
      "      pull through real servers; fully connected weights carry sufficient factors (K = --batch rows),\n"
      "      so --sfb (a list runs each mode in turn) decides how they travel, and --sfb_rebuild where they\n"
      "      are rebuilt (this CPU, or the emulated device as on a GPU); --model_scale shrinks the model as\n"
      "      cluster's does (partition and credit bytes as given). Bytes are the clients'\n"
      "      counters; lower bound = max(compute, every worker's bytes, once each, * 8 / link rate): with\n"
      "      --link_mbit every byte crosses the one shaped link.\n"
      "  nereus_bench cluster --hosts=N --link_mbit=R [--latency_us=L] --model=M --schedule=S [--model_scale=F]\n"
      "      an emulated cluster: N network namespaces on one bridge, each link shaped to R Mbit/s both ways,\n"
      "      one nereus_server and one emulated worker process per host (root only; exit status 77 where\n"
      "      namespaces cannot be made). Everything made is removed at the end, also on SIGINT/SIGTERM.\n"
      "      --host_command=CMD runs CMD on every host instead (another system on the same links).\n"
      "  nereus_bench model --model=M [--model_scale=F] [--batch=K] [--device_gflops=G]\n"
      "      the model's layers as the emulated workers see them: tensor shapes (shrunk), sufficient-factor\n"
      "      rows, forward and backward seconds, as one JSON object on stdout.\n"
      "  nereus_bench simulate --model=M --schedule=S --host_list=... --link_list=... [--alpha_us=A]\n"
      "      [--beta_ns=B] [--apply_ns_per_byte=C] [--model_scale=F]\n"
      "      event-driven prediction of the iteration time of the same job, one CSV line a configuration.\n"
      "  nereus_bench train --model=lenet,cifar10_full,caffenet,vgg19,resnet50 [--gpu=N] [--batch=32]\n"
      "                     [--warmup=5] [--iterations=8] [--model_dir=worker/trainer/models] [--json=FILE]\n"
      "      the trainer's training iterations (forward, backward, update) on synthetic data, standalone on\n"
      "      the CPU or GPU N: ms per iteration, images/s, forward and backward apart. --net_dir=DIR writes\n"
      "      each model's synthetic net to DIR/<model>.prototxt instead, for scripts/gpu_job_bench.py.",
      &argc, &argv);
  if (argc < 2) {
    LOG(ERROR) << "name a benchmark: transport, pipeline, ... (nereus_bench list; see --help)";
    return 2;
  }
  const std::string what = argv[1];
  std::string names;
  for (const auto& sub : nereus::bench::kSubcommands) names += (names.empty() ? "" : ", ") + std::string(sub.name);
  if (what == "list") {
    for (const auto& sub : nereus::bench::kSubcommands) std::printf("%s\n", sub.name);
    return 0;
  }
  if (what == "cluster_worker") return nereus::bench::RunClusterWorker();  // Started by cluster.
  for (const auto& sub : nereus::bench::kSubcommands) {
    if (what != sub.name) continue;
    nereus::bench::Watchdog watchdog(FLAGS_phase_timeout_s);
    nereus::bench::BenchContext ctx;
    ctx.args = original;
    ctx.watchdog = &watchdog;
    return sub.run(ctx);
  }
  LOG(ERROR) << "unknown benchmark \"" << what << "\" (expected one of: " << names << ")";
  return 2;
}

// nereus_bench: synthetic throughput benchmarks.
//   nereus_bench transport [--json=FILE]   push/pull vs raw ZeroMQ
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "bench/bench.h"

DEFINE_string(json, "", "Write the results as a JSON array to this file.");

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
  for (size_t i = 0; i < records.size(); ++i) out << "  " << records[i].ToJson() << (i + 1 < records.size() ? ",\n" : "\n");
  out << "]\n";
  if (!out) {
    LOG(ERROR) << "cannot write --json=" << FLAGS_json;
    return false;
  }
  std::printf("wrote %s\n", FLAGS_json.c_str());
  return true;
}

}  // namespace bench
}  // namespace nereus

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Nereus benchmarks.\n"
      "  nereus_bench transport [--json=FILE] [--sizes=...]\n"
      "      push, pull and push+pull throughput (1x1 and 2x2) and the 4 KB round trip,\n"
      "      each next to raw ZeroMQ measured in the same run (ratio = nereus / raw).\n"
      "  nereus_bench pipeline --model=vgg19|resnet50 --workers=N --servers=M --schedule=MODE|all\n"
      "                        [--link_mbit=R] [--device_gflops=G] [--json=FILE]\n"
      "      workers emulate the model's per-layer compute (FLOPs / --device_gflops, slept) and push and\n"
      "      pull through real servers. lower bound = max(compute, W * 2 * model bytes * 8 / link rate):\n"
      "      with --link_mbit every worker's gradients and weights cross the one shaped link.");
  // The pipeline bench re-runs itself inside a namespace with the same flags:
  // keep them before gflags removes them from argv.
  std::vector<std::string> original(argv, argv + argc);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc < 2) {
    LOG(ERROR) << "name a benchmark: transport (see --help)";
    return 2;
  }
  const std::string what = argv[1];
  if (what == "transport") return nereus::bench::RunTransport();
  if (what == "pipeline") return nereus::bench::RunPipeline(original);
  LOG(ERROR) << "unknown benchmark \"" << what << "\" (expected transport or pipeline)";
  return 2;
}

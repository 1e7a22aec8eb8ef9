// Shared pieces of nereus_bench's subcommands.
#ifndef NEREUS_BENCH_BENCH_H_
#define NEREUS_BENCH_BENCH_H_

#include <map>
#include <sstream>
#include <string>
#include <vector>

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
  std::string ToJson() const;

 private:
  static std::string Quote(const std::string& s);
  Record& Raw(const std::string& key, const std::string& json) {
    fields_.emplace_back(key, json);
    return *this;
  }
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::vector<std::string> SplitCsv(const std::string& s);
// Writes `records` as a JSON array to --json (if set). False on I/O error.
bool WriteJson(const std::vector<Record>& records);

int RunTransport();
// `args`: the command line as given (flags included).
int RunPipeline(const std::vector<std::string>& args);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_BENCH_H_

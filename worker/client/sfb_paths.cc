#include "worker/client/sfb_paths.h"

#include <cstdlib>
#include <iterator>

namespace nereus {

void SfbPaths::Reset(int64_t start, const std::vector<bool>& sfb_at_start) {
  start_ = start;
  initial_ = sfb_at_start;
  switches_by_tensor_.assign(sfb_at_start.size(), {});
  switches_ = 0;
}

bool SfbPaths::At(int t, int64_t clock) const {
  if (t < 0 || static_cast<size_t>(t) >= initial_.size()) return false;
  const auto& s = switches_by_tensor_[t];
  auto it = s.upper_bound(clock);
  if (it == s.begin()) return initial_[t];
  return std::prev(it)->second;
}

void SfbPaths::Set(int t, int64_t clock, bool sfb) {
  CHECK_GE(t, 0);
  CHECK_LT(static_cast<size_t>(t), initial_.size());
  CHECK_GT(clock, start_) << "a path switch at or before the job's first clock";
  auto& s = switches_by_tensor_[t];
  CHECK(s.empty() || s.rbegin()->first < clock) << "path switches out of clock order";
  if (At(t, clock) == sfb) return;
  s[clock] = sfb;
  ++switches_;
}

std::vector<int> SfbPaths::SfbTensors(int64_t clock) const {
  std::vector<int> out;
  for (size_t t = 0; t < initial_.size(); ++t)
    if (At(static_cast<int>(t), clock)) out.push_back(static_cast<int>(t));
  return out;
}

StatusOr<std::vector<SfbScheduleEntry>> ParseSfbSchedule(const std::string& text) {
  std::vector<SfbScheduleEntry> out;
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const size_t c1 = item.find(':');
    const size_t c2 = c1 == std::string::npos ? std::string::npos : item.find(':', c1 + 1);
    auto bad = [&](const std::string& why) {
      return InvalidArgumentError("--sfb_schedule: \"" + item + "\" " + why +
                                  " (want layer:clock:path, path sfb or ps, e.g. fc6:10:sfb)");
    };
    if (c1 == std::string::npos || c2 == std::string::npos || item.find(':', c2 + 1) != std::string::npos)
      return bad("is not layer:clock:path");
    SfbScheduleEntry e;
    e.layer = item.substr(0, c1);
    if (e.layer.empty()) return bad("names no layer");
    const std::string clock = item.substr(c1 + 1, c2 - c1 - 1);
    char* end = nullptr;
    const long long c = std::strtoll(clock.c_str(), &end, 10);
    if (clock.empty() || *end != '\0' || c < 0) return bad("has no clock >= 0");
    e.clock = c;
    const std::string path = item.substr(c2 + 1);
    if (path != "sfb" && path != "ps") return bad("has path \"" + path + "\"");
    e.sfb = path == "sfb";
    out.push_back(e);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

bool ScheduleNames(const std::string& layer, const std::string& tensor_name) {
  return tensor_name == layer || (tensor_name.size() > layer.size() &&
                                  tensor_name.compare(0, layer.size(), layer) == 0 && tensor_name[layer.size()] == '/');
}

}  // namespace nereus

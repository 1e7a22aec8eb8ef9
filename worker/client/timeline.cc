#include "worker/client/timeline.h"

#include <time.h>

#include <fstream>
#include <iterator>

#include "common/base/enum_names.h"

namespace nereus {

const char* LaneName(Lane lane) {
  static constexpr const char* kNames[] = {"?",
                                           "compute (forward/backward)",
                                           "queued in the client",
                                           "push transfer",
                                           "server apply",
                                           "pull transfer",
                                           "device-to-host copy",
                                           "host-to-device copy",
                                           "HybComm trials"};
  static_assert(std::size(kNames) == static_cast<size_t>(Lane::kHybComm) + 1, "a Lane without a name");
  return NameOf(lane, kNames);
}

void Timeline::Span(Lane lane, const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us) {
  if (!Keeps(clock)) return;
  MutexLock lock(&mu_);
  events_.push_back(Event{lane, name, clock, begin_us, std::max<int64_t>(0, end_us - begin_us)});
}

size_t Timeline::size() const {
  MutexLock lock(&mu_);
  return events_.size();
}

static std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

Status Timeline::Write(const std::string& path) const {
  MutexLock lock(&mu_);
  std::ofstream out(path);
  if (!out) return UnavailableError("cannot open --timeline file " + path);
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  out << "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " << pid_ << ", \"args\": {\"name\": \"worker " << pid_
      << "\"}}";
  for (Lane l : {Lane::kCompute, Lane::kQueue, Lane::kPush, Lane::kServerApply, Lane::kPull, Lane::kDeviceToHost,
                 Lane::kHostToDevice, Lane::kHybComm}) {
    out << ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " << pid_ << ", \"tid\": " << static_cast<int>(l)
        << ", \"args\": {\"name\": \"" << LaneName(l) << "\"}}";
    out << ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": " << pid_
        << ", \"tid\": " << static_cast<int>(l) << ", \"args\": {\"sort_index\": " << static_cast<int>(l) << "}}";
  }
  for (const Event& e : events_) {
    out << ",\n{\"name\": \"" << Escape(e.name) << "\", \"ph\": \"X\", \"pid\": " << pid_
        << ", \"tid\": " << static_cast<int>(e.lane) << ", \"ts\": " << e.ts << ", \"dur\": " << e.dur
        << ", \"args\": {\"clock\": " << e.clock << "}}";
  }
  out << "\n]}\n";
  if (!out) return UnavailableError("cannot write --timeline file " + path);
  return Status::OK();
}

}  // namespace nereus

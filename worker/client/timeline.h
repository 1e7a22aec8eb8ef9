// Timeline: spans recorded by a worker, written as Chrome trace JSON (opens in
// Perfetto and chrome://tracing).
#ifndef NEREUS_WORKER_CLIENT_TIMELINE_H_
#define NEREUS_WORKER_CLIENT_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/base/mutex.h"
#include "common/base/status.h"

namespace nereus {

// Lanes of a worker's trace (one "thread" row each in the viewer).
// kDeviceToHost and kHostToDevice: a GPU worker's copies of a layer's
// gradients off the device and of its weights onto it (the bridge's staging).
// kHybComm: the clocks of HybComm's trials, one span per clock saying what
// it measures (SfbTrials::Mark).
enum class Lane {
  kCompute = 1,
  kQueue = 2,
  kPush = 3,
  kServerApply = 4,
  kPull = 5,
  kDeviceToHost = 6,
  kHostToDevice = 7,
  kHybComm = 8
};
const char* LaneName(Lane lane);

// Thread-safe. Keeps the spans of every `every`-th clock only.
class Timeline {
 public:
  Timeline(int pid, int every) : pid_(pid), every_(every < 1 ? 1 : every) {}
  bool Keeps(int64_t clock) const { return clock % every_ == 0; }
  // A complete span [begin_us, end_us) on `lane`, tagged with its clock.
  void Span(Lane lane, const std::string& name, int64_t clock, int64_t begin_us, int64_t end_us)
      NEREUS_LOCKS_EXCLUDED(mu_);
  size_t size() const NEREUS_LOCKS_EXCLUDED(mu_);
  // Writes {"traceEvents": [...]} with metadata naming the process and lanes.
  Status Write(const std::string& path) const NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  struct Event {
    Lane lane;
    std::string name;
    int64_t clock;
    int64_t ts, dur;
  };
  const int pid_;
  const int every_;
  mutable Mutex mu_;
  std::vector<Event> events_ NEREUS_GUARDED_BY(mu_);
};

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_TIMELINE_H_

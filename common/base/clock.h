// The clocks every part reads: microseconds on CLOCK_MONOTONIC (the
// timeline's, comparable between the processes of one host) and seconds on
// std::chrono::steady_clock (durations of benchmarks and training).
#ifndef NEREUS_COMMON_BASE_CLOCK_H_
#define NEREUS_COMMON_BASE_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace nereus {

using SteadyClock = std::chrono::steady_clock;

// Microseconds on CLOCK_MONOTONIC (shared by the processes of one host).
inline int64_t MonotonicMicros() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// Seconds from `a` to `b`.
inline double Seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
// Seconds from `a` to now.
inline double SecondsSince(SteadyClock::time_point a) { return Seconds(a, SteadyClock::now()); }

}  // namespace nereus

#endif  // NEREUS_COMMON_BASE_CLOCK_H_

// Watchdog: bounds every phase of a benchmark. A subcommand names the phase it
// starts (Phase); if that phase has not ended (the next Phase, or Idle) within
// the timeout, the watchdog reports the stuck phase and ends the process with
// status 3, so a benchmark never hangs unseen. Rows measured before that are
// already in the JSON file (JsonRows writes each row as it comes).
#ifndef NEREUS_BENCH_HARNESS_WATCHDOG_H_
#define NEREUS_BENCH_HARNESS_WATCHDOG_H_

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "common/base/mutex.h"

namespace nereus {
namespace bench {

// The exit status of a benchmark whose phase overran --phase_timeout_s.
constexpr int kStuckExitStatus = 3;

class Watchdog {
 public:
  // Called on the watchdog's thread with the stuck phase and the timeout.
  using Expired = std::function<void(const std::string& phase, double timeout_s)>;

  // timeout_s <= 0 disarms it. The default `expired` prints the phase to
  // stderr and _exits with kStuckExitStatus.
  explicit Watchdog(double timeout_s, Expired expired = ExitStuck);
  ~Watchdog();  // Stops and joins the thread; never fires afterwards.

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts phase `name` (ending the previous one): it must end within the
  // timeout.
  void Phase(const std::string& name);
  // Ends the current phase without starting another (nothing to bound, e.g.
  // while a child process with its own watchdog runs).
  void Idle();
  double timeout_s() const { return timeout_s_; }

  static void ExitStuck(const std::string& phase, double timeout_s);

 private:
  void Loop();

  const double timeout_s_;
  const Expired expired_;
  Mutex mu_;
  CondVar cv_;
  std::string phase_ NEREUS_GUARDED_BY(mu_);  // Empty: idle.
  std::chrono::steady_clock::time_point deadline_ NEREUS_GUARDED_BY(mu_);
  bool stop_ NEREUS_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Owned; joined by the destructor.
};

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_HARNESS_WATCHDOG_H_

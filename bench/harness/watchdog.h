// Watchdog: bounds every phase of a benchmark. A subcommand names the phase it
// starts (Phase); if that phase has not ended (the next Phase, or Idle) within
// the timeout, the watchdog reports the stuck phase and ends the process with
// status 3, so a benchmark never hangs unseen. Rows measured before that are
// already in the JSON file (JsonRows writes each row as it comes).
#ifndef NEREUS_BENCH_HARNESS_WATCHDOG_H_
#define NEREUS_BENCH_HARNESS_WATCHDOG_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

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
  std::mutex mu_;
  std::condition_variable cv_;
  std::string phase_;                               // GUARDED_BY(mu_); empty: idle.
  std::chrono::steady_clock::time_point deadline_;  // GUARDED_BY(mu_)
  bool stop_ = false;                               // GUARDED_BY(mu_)
  std::thread thread_;                              // Owned; joined by the destructor.
};

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_HARNESS_WATCHDOG_H_

#include "bench/harness/watchdog.h"

#include <unistd.h>

#include <cstdio>

namespace nereus {
namespace bench {

Watchdog::Watchdog(double timeout_s, Expired expired) : timeout_s_(timeout_s), expired_(std::move(expired)) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { Loop(); });
}

Watchdog::~Watchdog() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Phase(const std::string& name) {
  {
    MutexLock lock(&mu_);
    phase_ = name.empty() ? "(unnamed)" : name;
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                       std::chrono::duration<double>(timeout_s_));
  }
  cv_.SignalAll();
}

void Watchdog::Idle() {
  {
    MutexLock lock(&mu_);
    phase_.clear();
  }
  cv_.SignalAll();
}

void Watchdog::ExitStuck(const std::string& phase, double timeout_s) {
  std::fprintf(stderr,
               "nereus_bench: phase \"%s\" did not finish within %g s (--phase_timeout_s); giving up with status %d\n",
               phase.c_str(), timeout_s, kStuckExitStatus);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(kStuckExitStatus);
}

void Watchdog::Loop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    if (phase_.empty()) {
      while (!stop_ && phase_.empty()) cv_.Wait(&mu_);
      continue;
    }
    const auto deadline = deadline_;
    const std::string phase = phase_;
    // Woken early by a new phase (a new deadline), Idle or stop.
    bool expired = false;
    while (!stop_ && phase_ == phase && deadline_ == deadline && !expired) expired = !cv_.WaitUntil(&mu_, deadline);
    if (stop_ || phase_ != phase || deadline_ != deadline) continue;
    mu_.Unlock();
    expired_(phase, timeout_s_);
    mu_.Lock();
    // Fire once per phase (when `expired_` returns, as in tests), unless a
    // new phase began meanwhile.
    if (phase_ == phase && deadline_ == deadline) phase_.clear();
  }
}

}  // namespace bench
}  // namespace nereus

// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with
// clang's thread-safety annotations (common/base/thread_annotations.h), after
// leveldb's port::Mutex/CondVar and absl::Mutex. libstdc++'s types carry no
// annotations, so members guarded by a std::mutex cannot be checked; guarded
// by a nereus::Mutex they are (scripts/thread_safety.sh).
//
//   mutable Mutex mu_;
//   CondVar cv_;
//   bool stop_ NEREUS_GUARDED_BY(mu_) = false;
//
//   void Stop() NEREUS_LOCKS_EXCLUDED(mu_) {
//     MutexLock lock(&mu_);
//     stop_ = true;
//     cv_.SignalAll();
//   }
//   void WaitStopped() NEREUS_LOCKS_EXCLUDED(mu_) {
//     MutexLock lock(&mu_);
//     while (!stop_) cv_.Wait(&mu_);
//   }
//
// Waits are written as loops on the condition, not with a predicate lambda:
// the analysis checks a lambda's body as a function of its own, which does not
// hold the mutex.
#ifndef NEREUS_COMMON_BASE_MUTEX_H_
#define NEREUS_COMMON_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/base/thread_annotations.h"

namespace nereus {

class NEREUS_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() NEREUS_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() NEREUS_UNLOCK_FUNCTION() { mu_.unlock(); }

  // Tells the analysis the caller holds this mutex, where it cannot see that
  // itself. Checks nothing at run time (std::mutex does not know its owner).
  void AssertHeld() const NEREUS_ASSERT_EXCLUSIVE_LOCK() {}

  // The std::mutex, for what needs one (a std::condition_variable_any, a
  // std::unique_lock). The analysis does not see what is done through it:
  // prefer MutexLock and CondVar.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction (std::lock_guard).
class NEREUS_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) NEREUS_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() NEREUS_UNLOCK_FUNCTION() { mu_->Unlock(); }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A std::condition_variable waited on with a Mutex the caller holds. Each
// wait releases the mutex while it blocks and holds it again when it returns;
// wake-ups may be spurious, so callers wait in a loop on their condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // Still held; the caller's.
  }

  // Wait until `deadline` at the latest. Returns false if it passed.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  // Wait for `timeout` at the longest. Returns false if it passed.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->native(), std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace nereus

#endif  // NEREUS_COMMON_BASE_MUTEX_H_

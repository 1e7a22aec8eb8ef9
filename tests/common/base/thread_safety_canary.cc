// Deliberately wrong locking, which scripts/thread_safety.sh must reject
// before it checks the tree: compiled with the same clang flags plus
// `-Xclang -verify`, each `expected-error@+1` (and note) below must be
// reported on the line after it, and nothing else. If the annotations
// expanded to nothing (not clang, a broken macro) or the warning were off,
// the expected errors would be missing and the check fails. Not built: only
// scripts/thread_safety.sh compiles it.
#include "common/base/mutex.h"
#include "common/base/thread_annotations.h"

namespace nereus {

class Canary {
 public:
  // expected-error@+1 {{writing variable 'count_' requires holding mutex 'mu_' exclusively}}
  void Unlocked() { ++count_; }

  int Locked() NEREUS_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    ++count_;
    Bump();
    return *value_;
  }

  // expected-error@+1 {{calling function 'Bump' requires holding mutex 'mu_' exclusively}}
  void CallsWithoutLock() { Bump(); }

  void CallsWithLock() {
    MutexLock lock(&mu_);
    // expected-error@+1 {{cannot call function 'Locked' while mutex 'mu_' is held}}
    Locked();
  }

  // expected-error@+1 {{reading the value pointed to by 'value_' requires holding mutex 'mu_'}}
  int PointeeUnlocked() { return *value_; }

  // expected-error@+2 {{mutex 'mu_' is still held at the end of function}}
  // expected-note@+1 {{mutex acquired here}}
  void LeavesLocked() { mu_.Lock(); }

  // expected-error@+1 {{calling function 'Wait' requires holding mutex 'mu_' exclusively}}
  void WaitsUnlocked() { cv_.Wait(&mu_); }

  void WaitsLocked() {
    MutexLock lock(&mu_);
    while (count_ == 0) cv_.Wait(&mu_);
  }

 private:
  void Bump() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ++count_; }

  Mutex mu_;
  CondVar cv_;
  int count_ NEREUS_GUARDED_BY(mu_) = 0;
  int* value_ NEREUS_PT_GUARDED_BY(mu_) = nullptr;
};

}  // namespace nereus

// Handle::State: the completion shared by a Handle and the requests whose
// replies complete it. Internal to the client library.
#ifndef NEREUS_WORKER_CLIENT_HANDLE_STATE_H_
#define NEREUS_WORKER_CLIENT_HANDLE_STATE_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "common/base/mutex.h"
#include "nereus/client.h"

namespace nereus {

// Done once `pending` units have completed, or at the first failure. Touched
// by the user threads that wait, the receive thread that completes units and
// the transport threads that release payloads (SendGuard). Thread-safe.
struct Handle::State {
  Mutex mu;
  CondVar cv;
  int pending NEREUS_GUARDED_BY(mu) = 0;  // Completions still expected.
  bool done NEREUS_GUARDED_BY(mu) = false;
  Status status NEREUS_GUARDED_BY(mu);
  int64_t version NEREUS_GUARDED_BY(mu) = std::numeric_limits<int64_t>::max();

  explicit State(int n) : pending(n), done(n == 0) {
    if (n == 0) version = 0;
  }

  // One unit done; `v` >= 0 is the version it carries (the smallest wins).
  void Complete(int64_t v = -1) NEREUS_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    if (done) return;
    if (v >= 0 && v < version) version = v;
    if (--pending == 0) {
      done = true;
      cv.SignalAll();
    }
  }
  void Fail(const Status& s) NEREUS_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    if (done) return;
    status = s;
    done = true;
    cv.SignalAll();
  }
};

using StatePtr = std::shared_ptr<Handle::State>;

// Completes one unit of a push when the transport releases the gradient
// bytes: payload Buffers hold a shared_ptr to it as their owner. Not
// copyable nor movable: each guard completes its unit exactly once, when the
// last Buffer lets go (a copied temporary, as `SendGuard{state}` passed to
// make_shared made, would complete it at once, before any byte was sent).
// Make one with std::make_shared<SendGuard>(state).
struct SendGuard {
  explicit SendGuard(StatePtr s) : state(std::move(s)) {}
  SendGuard(const SendGuard&) = delete;
  SendGuard& operator=(const SendGuard&) = delete;
  ~SendGuard() { state->Complete(); }
  const StatePtr state;
};

// Handle's constructor from a State is private to the library: this is how
// the library makes one.
struct HandleAccess {
  static Handle Make(StatePtr state) { return Handle(std::move(state)); }
  static const Handle::State* StateOf(const Handle& h) { return h.state_.get(); }
};
inline Handle MakeHandle(StatePtr state) { return HandleAccess::Make(std::move(state)); }

// A handle that is already done with `s`.
Handle FailedHandle(const Status& s);

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_HANDLE_STATE_H_

// Handle: the user's side of an asynchronous operation (see handle_state.h).
#include "worker/client/handle_state.h"

namespace nereus {

Handle::Handle() : state_(std::make_shared<State>(0)) {}

Handle::Handle(std::shared_ptr<State> state) : state_(std::move(state)) {}

Status Handle::Wait() const {
  MutexLock lock(&state_->mu);
  while (!state_->done) state_->cv.Wait(&state_->mu);
  return state_->status;
}

bool Handle::WaitFor(std::chrono::milliseconds timeout, Status* status) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&state_->mu);
  while (!state_->done) {
    if (!state_->cv.WaitUntil(&state_->mu, deadline)) break;
  }
  if (!state_->done) return false;
  if (status != nullptr) *status = state_->status;
  return true;
}

bool Handle::done() const {
  MutexLock lock(&state_->mu);
  return state_->done;
}

int64_t Handle::version() const {
  MutexLock lock(&state_->mu);
  return state_->version;
}

Handle FailedHandle(const Status& s) {
  auto state = std::make_shared<Handle::State>(1);
  state->Fail(s);
  return MakeHandle(state);
}

}  // namespace nereus

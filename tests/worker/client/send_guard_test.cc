// SendGuard completes its push unit exactly once, when the last payload
// Buffer lets it go, never when a temporary is made and dropped.
#include <gtest/gtest.h>

#include <memory>
#include <type_traits>

#include "worker/client/handle_state.h"

namespace nereus {
namespace {

static_assert(!std::is_copy_constructible<SendGuard>::value, "a copy would complete the unit twice");
static_assert(!std::is_move_constructible<SendGuard>::value, "a moved-from guard would complete it too");

bool Done(const StatePtr& s) {
  MutexLock lock(&s->mu);
  return s->done;
}

TEST(SendGuardTest, CompletesOnlyWhenTheLastOwnerLetsGo) {
  auto state = std::make_shared<Handle::State>(2);  // One ack and the guard.
  auto guard = std::make_shared<SendGuard>(state);
  std::shared_ptr<SendGuard> frame_a = guard, frame_b = guard;  // Two payload frames hold it.
  EXPECT_FALSE(Done(state));
  state->Complete();  // The ack.
  EXPECT_FALSE(Done(state)) << "done before the transport released the bytes";
  guard.reset();
  frame_a.reset();
  EXPECT_FALSE(Done(state));
  frame_b.reset();  // The transport lets go of the last frame.
  EXPECT_TRUE(Done(state));
  MutexLock lock(&state->mu);
  EXPECT_EQ(state->pending, 0);
}

TEST(SendGuardTest, AckAfterReleaseStillNeeded) {
  auto state = std::make_shared<Handle::State>(3);  // Two acks and the guard.
  std::make_shared<SendGuard>(state).reset();
  EXPECT_FALSE(Done(state));
  state->Complete();
  EXPECT_FALSE(Done(state));
  state->Complete();
  EXPECT_TRUE(Done(state));
}

}  // namespace
}  // namespace nereus

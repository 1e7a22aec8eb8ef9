#include "server/apply_pool.h"

#include <glog/logging.h>
#include <sched.h>

#include <algorithm>

namespace nereus {

ApplyPool::ApplyPool(int threads) {
  CHECK_GE(threads, 1);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

ApplyPool::~ApplyPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

void ApplyPool::Submit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    CHECK(!stop_) << "ApplyPool::Submit after the pool began to stop";
    tasks_.push_back(std::move(task));
  }
  cv_.Signal();
}

void ApplyPool::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stop_ && tasks_.empty()) cv_.Wait(&mu_);
    if (tasks_.empty()) return;  // stop_, and nothing left to run.
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    mu_.Lock();
  }
}

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace nereus

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
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ApplyPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    CHECK(!stop_) << "ApplyPool::Submit after the pool began to stop";
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ApplyPool::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_, and nothing left to run.
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace nereus

// ApplyPool: the threads on which a parameter server makes its updates. A
// fixed number of threads run the submitted tasks in submission order (first
// in, first out); a task runs on one thread from start to end.
#ifndef NEREUS_SERVER_APPLY_POOL_H_
#define NEREUS_SERVER_APPLY_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/base/mutex.h"

namespace nereus {

class ApplyPool {
 public:
  explicit ApplyPool(int threads);  // threads >= 1.
  // Runs every task already submitted, then joins the threads.
  ~ApplyPool() NEREUS_LOCKS_EXCLUDED(mu_);
  ApplyPool(const ApplyPool&) = delete;
  ApplyPool& operator=(const ApplyPool&) = delete;

  // Thread-safe; never blocks on a running task.
  void Submit(std::function<void()> task) NEREUS_LOCKS_EXCLUDED(mu_);
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop() NEREUS_LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> tasks_ NEREUS_GUARDED_BY(mu_);
  bool stop_ NEREUS_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// The cores this process may run on (its CPU affinity mask, as taskset,
// cgroups' cpusets and Slurm set it), at least 1.
int AvailableCores();

}  // namespace nereus

#endif  // NEREUS_SERVER_APPLY_POOL_H_

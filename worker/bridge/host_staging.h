// HostStaging: DeviceStaging with host threads standing in for the device's
// streams, so the staging's ordering is tested on machines without a GPU, and
// a CPU net can run through the same bridge code as a GPU net.
//
// Each stream is an ordered queue of operations run by a thread this object
// owns; an event is a completion flag. An operation may wait for an event
// (cudaStreamWaitEvent), run some work, and record an event when it is done
// (cudaEventRecord). The copy stream runs the copies (memcpy) and then the
// layer's `done` callback, so the callbacks run on the copy stream's thread,
// in the order the layers were staged.
//
// With `host_computes` (a CPU net: the thread that calls the staging
// computes the layers itself), the compute stream is that thread: an event
// on it is complete when recorded, and StageWeights waits for its copies
// before returning, since the forward that follows runs at once on the
// caller. Without it (tests), compute work is queued with EnqueueCompute and
// the compute stream's thread runs it, as a GPU runs kernels.
//
// Every wait is on a condition variable; Shutdown (or the destructor) drains
// both streams and joins their threads.
#ifndef NEREUS_WORKER_BRIDGE_HOST_STAGING_H_
#define NEREUS_WORKER_BRIDGE_HOST_STAGING_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/base/mutex.h"
#include "worker/bridge/device_staging.h"

namespace nereus {

struct HostStagingOptions {
  // The calling thread computes (a CPU net); see the header comment.
  bool host_computes = true;
  // Runs on the copy stream's thread before a layer's copies, with the layer
  // and whether they go to the host (gradients) or to the device (weights);
  // an error fails the copies as a failed cudaMemcpyAsync would. Tests use
  // it to hold a copy back or to make one fail.
  std::function<Status(int layer, bool to_host)> before_copy;
  // Called on the streams' threads as things happen: "d2h <layer> begin",
  // "d2h <layer> end", "h2d <layer> begin", "h2d <layer> end".
  std::function<void(const std::string&)> trace;
};

class HostStaging : public DeviceStaging {
 public:
  enum class Stream { kCompute, kCopy };

  explicit HostStaging(HostStagingOptions options = HostStagingOptions());
  ~HostStaging() override;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  Status StageGradients(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies,
                        Done done) override NEREUS_LOCKS_EXCLUDED(mu_);
  Status StageWeights(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies) override
      NEREUS_LOCKS_EXCLUDED(mu_);
  Status Drain() override NEREUS_LOCKS_EXCLUDED(mu_);
  Status Shutdown() override NEREUS_LOCKS_EXCLUDED(mu_);
  bool device_memory() const override { return false; }

  // Queues `work` on the compute stream (a kernel). Only without
  // host_computes.
  void EnqueueCompute(std::function<void()> work) NEREUS_LOCKS_EXCLUDED(mu_);
  // Blocks until `stream` can run nothing more for now: its queue is empty,
  // or its next operation waits for an event not yet recorded.
  void WaitUntilSettled(Stream stream) NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  // The fields of Event and StreamState are guarded by mu_. The analysis
  // cannot say so inside the nested structs (an attribute there cannot name
  // the enclosing object's mutex); it checks compute_ and copy_ themselves,
  // and the functions that reach an Event or a StreamState through a pointer
  // require mu_.
  struct Event {
    bool done = false;  // Guarded by mu_.
  };
  struct Op {
    std::shared_ptr<Event> wait;    // Run only once this is done (may be null).
    std::function<void()> work;     // Runs without the lock (may be empty).
    std::shared_ptr<Event> record;  // Done after the work (may be null).
  };
  struct StreamState {
    std::deque<Op> queue;  // Guarded by mu_.
    bool busy = false;     // Guarded by mu_: an operation is running.
  };

  // The loop of `which`'s thread.
  void Run(Stream which) NEREUS_LOCKS_EXCLUDED(mu_);
  StreamState* state(Stream which) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return which == Stream::kCompute ? &compute_ : &copy_;
  }
  // Whether the next operation of `stream` may run now.
  bool Runnable(const StreamState& stream) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Enqueue(Stream which, Op op) NEREUS_LOCKS_EXCLUDED(mu_);
  bool Settled(const StreamState& stream) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies `copies`; a failure (before_copy's, or a null pointer) becomes the
  // sticky error, annotated with what was copied. Returns the sticky error.
  Status Copy(int layer, const std::string& layer_name, bool to_host, const std::vector<StagingCopy>& copies)
      NEREUS_LOCKS_EXCLUDED(mu_);
  Status CheckUsable() NEREUS_LOCKS_EXCLUDED(mu_);

  const HostStagingOptions options_;
  mutable Mutex mu_;
  CondVar cv_;
  Status error_ NEREUS_GUARDED_BY(mu_);         // The first failure.
  bool stop_ NEREUS_GUARDED_BY(mu_) = false;    // The threads are to return once their queues are empty.
  bool closed_ NEREUS_GUARDED_BY(mu_) = false;  // Shutdown was called.
  StreamState compute_ NEREUS_GUARDED_BY(mu_);
  StreamState copy_ NEREUS_GUARDED_BY(mu_);
  // Not guarded: started by the constructor and joined by Shutdown, which
  // the owner calls (never from two threads at once); the streams' threads
  // do not touch them.
  std::thread compute_thread_;
  std::thread copy_thread_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_BRIDGE_HOST_STAGING_H_

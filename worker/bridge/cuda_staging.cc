#include "worker/bridge/cuda_staging.h"

#include <cuda_runtime.h>
#include <glog/logging.h>

#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/clock.h"
#include "common/base/mutex.h"
#include "worker/trainer/gpu/cuda_check.h"

namespace nereus {

namespace {

class CudaStaging : public DeviceStaging {
 public:
  explicit CudaStaging(gpu::Device* device) : device_(device) {}
  ~CudaStaging() override {
    Shutdown().IgnoreError();
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  }

  Status Start() NEREUS_LOCKS_EXCLUDED(mu_) {
    thread_ = std::thread([this] { Complete(); });
    return Status::OK();
  }

  Status StageGradients(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies,
                        Done done) override NEREUS_LOCKS_EXCLUDED(mu_) {
    RETURN_IF_ERROR(CheckUsable());
    Pending p = MakePending(layer, layer_name, /*to_host=*/true, copies);
    p.done = std::move(done);
    Status st = GetEvent(&p.computed);
    if (st.ok()) st = gpu::CudaStatus(cudaEventRecord(p.computed, device_->compute_stream()), "cudaEventRecord");
    if (st.ok()) {
      st = gpu::CudaStatus(cudaStreamWaitEvent(device_->copy_stream(), p.computed, 0), "cudaStreamWaitEvent");
    }
    if (st.ok()) st = EnqueueCopies(&p, copies, cudaMemcpyDeviceToHost);
    return Submit(std::move(p), st);
  }

  Status StageWeights(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies) override
      NEREUS_LOCKS_EXCLUDED(mu_) {
    RETURN_IF_ERROR(CheckUsable());
    Pending p = MakePending(layer, layer_name, /*to_host=*/false, copies);
    Status st = EnqueueCopies(&p, copies, cudaMemcpyHostToDevice);
    if (st.ok()) {
      st = gpu::CudaStatus(cudaStreamWaitEvent(device_->compute_stream(), p.copied, 0), "cudaStreamWaitEvent");
    }
    // The completion thread sees the upload end too (its span; its events
    // back to the pool), in order with the gradients.
    return Submit(std::move(p), st);
  }

  Status Drain() override NEREUS_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      while (!pending_.empty() || busy_) cv_.Wait(&mu_);
    }
    Status st = gpu::CudaStatus(cudaStreamSynchronize(device_->copy_stream()), "cudaStreamSynchronize");
    if (!st.ok()) Fail(st.Annotate("draining the device staging")).IgnoreError();
    MutexLock lock(&mu_);
    return error_;
  }

  Status Shutdown() override NEREUS_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (stop_ || !thread_.joinable()) return error_;
      closed_ = true;
    }
    Status st = Drain();
    {
      MutexLock lock(&mu_);
      stop_ = true;
      cv_.SignalAll();
    }
    thread_.join();
    return st;
  }

  bool device_memory() const override { return true; }

 private:
  struct Pending {
    int layer = -1;
    bool to_host = true;  // Gradients off the device; else weights onto it.
    bool has_copies = false;
    std::string layer_name;
    cudaEvent_t computed = nullptr;  // Gradients: the layer's backward done.
    cudaEvent_t started = nullptr;   // The copies began on the copy stream.
    cudaEvent_t copied = nullptr;    // And ended.
    Done done;                       // Gradients only.
  };

  static std::string What(const Pending& p) {
    return p.to_host ? "copying the gradients of layer \"" + p.layer_name + "\" to the host"
                     : "copying the weights of layer \"" + p.layer_name + "\" to the device";
  }

  static Pending MakePending(int layer, const std::string& layer_name, bool to_host,
                             const std::vector<StagingCopy>& copies) {
    Pending p;
    p.layer = layer;
    p.to_host = to_host;
    p.has_copies = !copies.empty();
    p.layer_name = layer_name;
    return p;
  }

  // On the copy stream: the `started` event, the copies, the `copied` event.
  Status EnqueueCopies(Pending* p, const std::vector<StagingCopy>& copies, cudaMemcpyKind kind)
      NEREUS_LOCKS_EXCLUDED(mu_) {
    Status st = GetEvent(&p->started);
    if (st.ok()) st = GetEvent(&p->copied);
    if (st.ok()) st = gpu::CudaStatus(cudaEventRecord(p->started, device_->copy_stream()), "cudaEventRecord");
    for (const StagingCopy& c : copies) {
      if (!st.ok()) break;
      st = gpu::CudaStatus(cudaMemcpyAsync(c.dst, c.src, c.bytes, kind, device_->copy_stream()), "cudaMemcpyAsync");
    }
    if (st.ok()) st = gpu::CudaStatus(cudaEventRecord(p->copied, device_->copy_stream()), "cudaEventRecord");
    return st;
  }

  // Hands `p` to the completion thread when `enqueued` is OK; else the
  // sticky error, naming the layer.
  Status Submit(Pending p, const Status& enqueued) NEREUS_LOCKS_EXCLUDED(mu_) {
    if (!enqueued.ok()) {
      PutEvents(p);
      return Fail(enqueued.Annotate(What(p)));
    }
    MutexLock lock(&mu_);
    pending_.push_back(std::move(p));
    cv_.SignalAll();
    return Status::OK();
  }

  void PutEvents(const Pending& p) NEREUS_LOCKS_EXCLUDED(mu_) {
    PutEvent(p.computed);
    PutEvent(p.started);
    PutEvent(p.copied);
  }

  Status CheckUsable() NEREUS_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (closed_) return FailedPreconditionError("the device staging was shut down");
    return error_;
  }

  Status Fail(const Status& st) NEREUS_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (error_.ok()) error_ = st;
    return error_;
  }

  // Events that the completion thread sleeps on (cudaEventBlockingSync),
  // timed (the copies' spans).
  Status GetEvent(cudaEvent_t* event) NEREUS_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (!free_events_.empty()) {
        *event = free_events_.back();
        free_events_.pop_back();
        return Status::OK();
      }
    }
    return gpu::CudaStatus(cudaEventCreateWithFlags(event, cudaEventBlockingSync), "cudaEventCreateWithFlags");
  }
  void PutEvent(cudaEvent_t event) NEREUS_LOCKS_EXCLUDED(mu_) {
    if (event == nullptr) return;
    MutexLock lock(&mu_);
    free_events_.push_back(event);
  }

  // The completion thread: hands each layer over when its copies are done.
  void Complete() NEREUS_LOCKS_EXCLUDED(mu_) {
    cudaSetDevice(device_->device_id());
    MutexLock lock(&mu_);
    for (;;) {
      while (!stop_ && pending_.empty()) cv_.Wait(&mu_);
      if (pending_.empty()) return;  // stop_
      Pending p = std::move(pending_.front());
      pending_.pop_front();
      busy_ = true;
      mu_.Unlock();
      Status st = gpu::CudaStatus(cudaEventSynchronize(p.copied), "cudaEventSynchronize").Annotate(What(p));
      const int64_t end_us = MonotonicMicros();
      float ms = 0;
      if (st.ok() && p.has_copies && span_sink_ && cudaEventElapsedTime(&ms, p.started, p.copied) == cudaSuccess) {
        span_sink_(p.layer, p.to_host, end_us - static_cast<int64_t>(ms * 1000.0f), end_us);
      }
      PutEvents(p);
      st = Fail(st);  // The sticky error: nothing is handed over after one.
      if (p.done) p.done(st);
      mu_.Lock();
      busy_ = false;
      cv_.SignalAll();
    }
  }

  gpu::Device* const device_;
  // Not guarded: started by Start and joined by Shutdown, which the owner
  // calls (never from two threads at once); the completion thread does not
  // touch it.
  std::thread thread_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Pending> pending_ NEREUS_GUARDED_BY(mu_);
  std::vector<cudaEvent_t> free_events_ NEREUS_GUARDED_BY(mu_);
  bool busy_ NEREUS_GUARDED_BY(mu_) = false;    // The completion thread is handing one over.
  bool stop_ NEREUS_GUARDED_BY(mu_) = false;    // The completion thread is to return once pending_ is empty.
  bool closed_ NEREUS_GUARDED_BY(mu_) = false;  // Shutdown was called.
  Status error_ NEREUS_GUARDED_BY(mu_);         // The first failure.
};

}  // namespace
StatusOr<std::unique_ptr<DeviceStaging>> NewCudaStaging(gpu::Device* device) {
  if (device == nullptr) return InvalidArgumentError("a device staging needs a device");
  if (device->is_stand_in()) {
    return FailedPreconditionError("a device staging needs a CUDA device, not a host stand-in");
  }
  auto staging = std::make_unique<CudaStaging>(device);
  RETURN_IF_ERROR(staging->Start().Annotate("starting the device staging on " + device->description()));
  return std::unique_ptr<DeviceStaging>(std::move(staging));
}

}  // namespace nereus

#include "worker/bridge/host_staging.h"

#include <glog/logging.h>

#include <cstring>
#include <utility>

#include "common/base/clock.h"

namespace nereus {

HostStaging::HostStaging(HostStagingOptions options) : options_(std::move(options)) {
  compute_thread_ = std::thread([this] { Run(Stream::kCompute); });
  copy_thread_ = std::thread([this] { Run(Stream::kCopy); });
}

HostStaging::~HostStaging() { Shutdown().IgnoreError(); }

bool HostStaging::Runnable(const StreamState& stream) const {
  if (stream.queue.empty()) return false;
  const Op& next = stream.queue.front();
  return next.wait == nullptr || next.wait->done;
}

void HostStaging::Run(Stream which) {
  MutexLock lock(&mu_);
  StreamState* const stream = state(which);
  for (;;) {
    while (!Runnable(*stream) && !(stream->queue.empty() && stop_)) cv_.Wait(&mu_);
    if (stream->queue.empty()) return;  // stop_, with nothing left.
    Op op = std::move(stream->queue.front());
    stream->queue.pop_front();
    stream->busy = true;
    mu_.Unlock();
    if (op.work) op.work();
    mu_.Lock();
    if (op.record != nullptr) op.record->done = true;
    stream->busy = false;
    cv_.SignalAll();
  }
}

void HostStaging::Enqueue(Stream which, Op op) {
  MutexLock lock(&mu_);
  state(which)->queue.push_back(std::move(op));
  cv_.SignalAll();
}

bool HostStaging::Settled(const StreamState& stream) const {
  if (stream.busy) return false;
  if (stream.queue.empty()) return true;
  const Op& next = stream.queue.front();
  return next.wait != nullptr && !next.wait->done;
}

void HostStaging::WaitUntilSettled(Stream which) {
  MutexLock lock(&mu_);
  while (!Settled(*state(which))) cv_.Wait(&mu_);
}

void HostStaging::EnqueueCompute(std::function<void()> work) {
  CHECK(!options_.host_computes) << "HostStaging::EnqueueCompute: the calling thread computes (host_computes)";
  Op op;
  op.work = std::move(work);
  Enqueue(Stream::kCompute, std::move(op));
}

Status HostStaging::CheckUsable() {
  MutexLock lock(&mu_);
  if (closed_) return FailedPreconditionError("the device staging was shut down");
  return error_;
}

Status HostStaging::Copy(int layer, const std::string& layer_name, bool to_host,
                         const std::vector<StagingCopy>& copies) {
  {
    MutexLock lock(&mu_);
    if (!error_.ok()) return error_;  // Nothing moves after a failure.
  }
  const std::string what = std::string(to_host ? "d2h " : "h2d ") + std::to_string(layer);
  if (options_.trace) options_.trace(what + " begin");
  Status st = options_.before_copy ? options_.before_copy(layer, to_host) : Status::OK();
  const int64_t begin_us = MonotonicMicros();
  for (const StagingCopy& c : copies) {
    if (!st.ok()) break;
    if (c.bytes > 0 && (c.dst == nullptr || c.src == nullptr)) {
      st = InvalidArgumentError("memcpy of " + std::to_string(c.bytes) + " bytes with a null pointer");
      break;
    }
    if (c.bytes > 0) std::memcpy(c.dst, c.src, c.bytes);
  }
  if (st.ok() && span_sink_ && !copies.empty()) span_sink_(layer, to_host, begin_us, MonotonicMicros());
  if (options_.trace) options_.trace(what + " end");
  MutexLock lock(&mu_);
  if (!st.ok() && error_.ok()) {
    error_ =
        st.Annotate(std::string(to_host ? "copying the gradients of layer \"" : "copying the weights of layer \"") +
                    layer_name + (to_host ? "\" to the host" : "\" to the device"));
  }
  return error_;
}

Status HostStaging::StageGradients(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies,
                                   Done done) {
  RETURN_IF_ERROR(CheckUsable());
  auto computed = std::make_shared<Event>();
  if (options_.host_computes) {
    MutexLock lock(&mu_);
    computed->done = true;  // The backward ran on the calling thread.
  } else {
    Op record;
    record.record = computed;
    Enqueue(Stream::kCompute, std::move(record));
  }
  Op op;
  op.wait = computed;
  op.work = [this, layer, layer_name, copies, done = std::move(done)] {
    const Status st = Copy(layer, layer_name, /*to_host=*/true, copies);
    done(st);
  };
  Enqueue(Stream::kCopy, std::move(op));
  return Status::OK();
}

Status HostStaging::StageWeights(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies) {
  RETURN_IF_ERROR(CheckUsable());
  auto uploaded = std::make_shared<Event>();
  Op op;
  op.work = [this, layer, layer_name, copies] { Copy(layer, layer_name, /*to_host=*/false, copies).IgnoreError(); };
  op.record = uploaded;
  Enqueue(Stream::kCopy, std::move(op));
  if (options_.host_computes) {
    // The forward runs next on this thread: it waits here.
    MutexLock lock(&mu_);
    while (!uploaded->done) cv_.Wait(&mu_);
    return error_;
  }
  Op wait;
  wait.wait = uploaded;
  Enqueue(Stream::kCompute, std::move(wait));
  return Status::OK();
}

Status HostStaging::Drain() {
  MutexLock lock(&mu_);
  while (!compute_.queue.empty() || compute_.busy || !copy_.queue.empty() || copy_.busy) cv_.Wait(&mu_);
  return error_;
}

Status HostStaging::Shutdown() {
  {
    MutexLock lock(&mu_);
    if (stop_) return error_;
    closed_ = true;  // No new work from here on.
  }
  Status st = Drain();
  {
    MutexLock lock(&mu_);
    stop_ = true;
    cv_.SignalAll();
  }
  compute_thread_.join();
  copy_thread_.join();
  return st;
}

}  // namespace nereus

#include "worker/param_sync/host_staging.h"

#include <glog/logging.h>

#include <cstring>
#include <utility>

#include "worker/client/timeline.h"

namespace nereus {

HostStaging::HostStaging(HostStagingOptions options) : options_(std::move(options)) {
  compute_.thread = std::thread([this] { Run(&compute_); });
  copy_.thread = std::thread([this] { Run(&copy_); });
}

HostStaging::~HostStaging() { Shutdown().IgnoreError(); }

void HostStaging::Run(StreamState* stream) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] {
      if (stream->queue.empty()) return stop_;
      const Op& next = stream->queue.front();
      return next.wait == nullptr || next.wait->done;
    });
    if (stream->queue.empty()) return;  // stop_, with nothing left.
    Op op = std::move(stream->queue.front());
    stream->queue.pop_front();
    stream->busy = true;
    lock.unlock();
    if (op.work) op.work();
    lock.lock();
    if (op.record != nullptr) op.record->done = true;
    stream->busy = false;
    cv_.notify_all();
  }
}

void HostStaging::Enqueue(StreamState* stream, Op op) {
  std::lock_guard<std::mutex> lock(mu_);
  stream->queue.push_back(std::move(op));
  cv_.notify_all();
}

bool HostStaging::Settled(const StreamState& stream) const {
  if (stream.busy) return false;
  if (stream.queue.empty()) return true;
  const Op& next = stream.queue.front();
  return next.wait != nullptr && !next.wait->done;
}

void HostStaging::WaitUntilSettled(Stream which) {
  const StreamState& stream = which == Stream::kCompute ? compute_ : copy_;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return Settled(stream); });
}

void HostStaging::EnqueueCompute(std::function<void()> work) {
  CHECK(!options_.host_computes) << "HostStaging::EnqueueCompute: the calling thread computes (host_computes)";
  Op op;
  op.work = std::move(work);
  Enqueue(&compute_, std::move(op));
}

Status HostStaging::CheckUsable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return FailedPreconditionError("the device staging was shut down");
  return error_;
}

Status HostStaging::Copy(int layer, const std::string& layer_name, bool to_host,
                         const std::vector<StagingCopy>& copies) {
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    computed->done = true;  // The backward ran on the calling thread.
  } else {
    Op record;
    record.record = computed;
    Enqueue(&compute_, std::move(record));
  }
  Op op;
  op.wait = computed;
  op.work = [this, layer, layer_name, copies, done = std::move(done)] {
    const Status st = Copy(layer, layer_name, /*to_host=*/true, copies);
    done(st);
  };
  Enqueue(&copy_, std::move(op));
  return Status::OK();
}

Status HostStaging::StageWeights(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies) {
  RETURN_IF_ERROR(CheckUsable());
  auto uploaded = std::make_shared<Event>();
  Op op;
  op.work = [this, layer, layer_name, copies] { Copy(layer, layer_name, /*to_host=*/false, copies).IgnoreError(); };
  op.record = uploaded;
  Enqueue(&copy_, std::move(op));
  if (options_.host_computes) {
    // The forward runs next on this thread: it waits here.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return uploaded->done; });
    return error_;
  }
  Op wait;
  wait.wait = uploaded;
  Enqueue(&compute_, std::move(wait));
  return Status::OK();
}

Status HostStaging::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return compute_.queue.empty() && !compute_.busy && copy_.queue.empty() && !copy_.busy; });
  return error_;
}

Status HostStaging::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return error_;
    closed_ = true;  // No new work from here on.
  }
  Status st = Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  compute_.thread.join();
  copy_.thread.join();
  return st;
}

}  // namespace nereus

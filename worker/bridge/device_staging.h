// DeviceStaging: how the bridge (ClientParameterSync) moves a layer's
// gradients off a device and its weights back on, without the thread that
// enqueues the compute ever waiting for the device (Poseidon's data path;
// docs/GPU.md, "Staging"). The client library only reads and writes host
// memory: it sees the pinned host mirrors, and the staging copies between
// them and the net's own (device) buffers.
//
// Two streams are involved, in CUDA's sense: the compute stream (the net's
// kernels, in order) and a copy stream. Per layer:
//   StageGradients  after layer l's backward was enqueued: an event on the
//                   compute stream, then on the copy stream (after that
//                   event) the device-to-host copies of l's gradients into
//                   the mirrors; when they are done, `done` runs on a thread
//                   the staging owns (the bridge hands the layer to the
//                   client there: Client::GradientsReady). Returns at once.
//   StageWeights    before layer l's forward (after the client wrote l's
//                   weights into the mirrors): the host-to-device copies on
//                   the copy stream and an event after them that the compute
//                   stream waits for (cudaStreamWaitEvent), so l's forward
//                   runs on the new weights. Returns at once, except where
//                   the compute stream is the calling thread itself
//                   (HostStaging's host_computes: a CPU net).
// Copies on the copy stream complete in the order they were enqueued, and
// the `done` callbacks run in that order.
//
// Errors: a failed copy or event names the layer and the call ("copying the
// gradients of layer "ip1" to the host: cudaMemcpyAsync: ..."). The first
// one is sticky: `done` of that layer and of every later one gets it, and
// every later call returns it.
//
// Implementations: HostStaging (host_staging.h: host threads stand in for
// the streams; tests and CPU nets) and CudaStaging (cuda_staging.h: a CUDA
// build only).
//
// Thread-safety: StageGradients, StageWeights and Drain are called from one
// thread (the one that drives the net); `done` runs on the staging's thread.
#ifndef NEREUS_WORKER_BRIDGE_DEVICE_STAGING_H_
#define NEREUS_WORKER_BRIDGE_DEVICE_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"

namespace nereus {

// `bytes` from `src` to `dst`: for StageGradients `src` is device memory (the
// net's buffer) and `dst` a host mirror; for StageWeights the other way.
struct StagingCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
};

class DeviceStaging {
 public:
  // Runs on the staging's own thread with OK, or with the sticky error when
  // this layer's copies (or an earlier one's) failed.
  using Done = std::function<void(const Status&)>;

  // Runs on the staging's thread for each layer's copies (not for a layer
  // without any), after they ran and before that layer's `done`: whether
  // they went to the host, and when they began and ended (microseconds of
  // CLOCK_MONOTONIC; for CUDA the copy's measured duration ending when its
  // completion was seen). The bridge draws them on the timeline.
  using SpanSink = std::function<void(int layer, bool to_host, int64_t begin_us, int64_t end_us)>;

  virtual ~DeviceStaging() = default;

  // Before the first Stage call.
  void set_span_sink(SpanSink sink) { span_sink_ = std::move(sink); }

  // `layer_name` is for error messages. When the call returns OK, `done`
  // runs exactly once (at the latest in Drain or Shutdown); when it returns
  // an error, never.
  virtual Status StageGradients(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies,
                                Done done) = 0;
  virtual Status StageWeights(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies) = 0;
  // Blocks until every copy enqueued so far is done and every `done` has
  // returned; the sticky error, if any.
  virtual Status Drain() = 0;
  // Drain, then stops and joins the staging's threads; later calls return
  // FailedPrecondition. The destructor calls it.
  virtual Status Shutdown() = 0;
  // Whether the copies' net side is device memory (CudaStaging) or host
  // memory (HostStaging: the net computes on the CPU).
  virtual bool device_memory() const = 0;

 protected:
  SpanSink span_sink_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_BRIDGE_DEVICE_STAGING_H_

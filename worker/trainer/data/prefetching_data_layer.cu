// PrefetchingDataLayer's GPU code: the batches prefetched on the CPU into
// page-locked buffers go to the device on its copy stream, one iteration
// ahead, so the copy of batch i+1 overlaps the compute of iteration i
// (prefetching_data_layer.h).
//
// Per Forward_gpu (iteration i):
//   1. (first call only) take batch i and start its copy;
//   2. the compute stream waits for the copy of batch i (an event), then
//      copies it from the staging buffers into the tops (device to device)
//      and records `consumed`;
//   3. the host waits for the copy of batch i to have read its page-locked
//      buffers (started an iteration ago: done by now) and gives the batch
//      back to the prefetch thread;
//   4. take batch i+1; the copy stream waits for `consumed` (the staging
//      buffers are free), copies it and records `copied`.
#include <cuda_runtime.h>

#include "worker/trainer/data/prefetching_data_layer.h"
#include "worker/trainer/gpu/cuda_check.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace data {

struct PrefetchingDataLayer::GpuStaging {
  explicit GpuStaging(gpu::Device* d) : device(d) {}
  ~GpuStaging() {
    // The copy in flight reads `in_flight`'s page-locked buffers: wait for it
    // before they go.
    if (copied != nullptr) cudaEventSynchronize(copied);
    if (copied != nullptr) cudaEventDestroy(copied);
    if (consumed != nullptr) cudaEventDestroy(consumed);
  }
  // Records a failed CUDA call; true when it succeeded.
  bool Check(cudaError_t e, const char* call) {
    if (e == cudaSuccess) return true;
    device->RecordError(gpu::CudaStatus(e, call));
    return false;
  }

  // Starts the copy of the page-locked `host` into `staging` on `stream`;
  // false when it could not start (recorded, or no device memory).
  bool CopyIn(const gpu::HostBuffer& host, Blob* staging, cudaStream_t stream, const char* call) {
    float* to = staging->mutable_gpu_data();
    if (to == nullptr) return false;
    return Check(cudaMemcpyAsync(to, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice, stream), call);
  }

  gpu::Device* device;
  cudaEvent_t copied = nullptr;      // On the copy stream: the staging buffers hold `in_flight`.
  cudaEvent_t consumed = nullptr;    // On the compute stream: the tops hold the last batch.
  std::vector<Blob> tops;            // Staging buffers on the device, one per top.
  std::unique_ptr<Batch> in_flight;  // The batch whose copy was started last.
  // Taking the next batch failed (a bad record or label): the Forward that
  // needs it reports this instead of waiting for a copy.
  Status pending_error;
};

void PrefetchingDataLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Device* d = device();
  if (!d->ok()) return;
  cudaStream_t copy_stream = d->copy_stream();
  cudaStream_t compute_stream = d->compute_stream();
  auto start_copy = [&](std::unique_ptr<Batch> batch) {
    GpuStaging& s = *staging_;
    s.in_flight = std::move(batch);
    if (!s.Check(cudaStreamWaitEvent(copy_stream, s.consumed, 0), "cudaStreamWaitEvent (copy stream)")) return;
    for (std::size_t t = 0; t < s.tops.size(); ++t) {
      if (!s.CopyIn(s.in_flight->tops[t], &s.tops[t], copy_stream, "cudaMemcpyAsync (batch to the device)")) return;
    }
    s.Check(cudaEventRecord(s.copied, copy_stream), "cudaEventRecord (copied)");
  };

  if (staging_ == nullptr) {
    staging_ = std::make_shared<GpuStaging>(d);
    GpuStaging& s = *staging_;
    // Allocated (and zeroed, on the compute stream) before `consumed` is
    // first recorded, which the copy stream waits for.
    s.tops = std::vector<Blob>(top_shapes_.size());
    for (std::size_t t = 0; t < top_shapes_.size(); ++t) {
      s.tops[t].Reshape(top_shapes_[t]);
      if (s.tops[t].mutable_gpu_data() == nullptr) return;
    }
    if (!s.Check(cudaEventCreateWithFlags(&s.copied, cudaEventDisableTiming), "cudaEventCreate") ||
        !s.Check(cudaEventCreateWithFlags(&s.consumed, cudaEventDisableTiming), "cudaEventCreate") ||
        !s.Check(cudaEventRecord(s.consumed, compute_stream), "cudaEventRecord (consumed)")) {
      return;
    }
    std::unique_ptr<Batch> first;
    const Status taken = TakeBatch(&first);
    if (!taken.ok()) {
      set_forward_error(taken.code(), taken.message());
      staging_.reset();
      return;
    }
    start_copy(std::move(first));
    if (!d->ok()) return;
  }
  GpuStaging& s = *staging_;
  if (!s.pending_error.ok()) {
    set_forward_error(s.pending_error.code(), s.pending_error.message());
    return;
  }
  // 2. This iteration's batch into the tops, after its copy.
  if (!s.Check(cudaStreamWaitEvent(compute_stream, s.copied, 0), "cudaStreamWaitEvent (compute stream)")) return;
  for (std::size_t t = 0; t < top.size(); ++t) {
    top[t]->Reshape(top_shapes_[t]);
    caffe_gpu_copy(d, s.tops[t].count(), s.tops[t].gpu_data(), top[t]->mutable_gpu_data());
  }
  if (!s.Check(cudaEventRecord(s.consumed, compute_stream), "cudaEventRecord (consumed)")) return;
  // 3. Its host buffers back to the prefetch thread once the copy read them.
  if (!s.Check(cudaEventSynchronize(s.copied), "cudaEventSynchronize (copied)")) return;
  ReturnBatch(std::move(s.in_flight));
  // 4. The next batch's copy, overlapping this iteration's compute; an error
  // taking it belongs to the next Forward.
  std::unique_ptr<Batch> next;
  Status taken = TakeBatch(&next);
  if (taken.ok()) {
    start_copy(std::move(next));
  } else {
    std::swap(s.pending_error, taken);
  }
}

}  // namespace data
}  // namespace nereus

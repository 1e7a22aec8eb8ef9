// DataLayer's GPU code: the batches prefetched on the CPU into page-locked
// buffers go to the device on its copy stream, one iteration ahead, so the
// copy of batch i+1 overlaps the compute of iteration i (data_layer.h).
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

#include "worker/trainer/data/data_layer.h"
#include "worker/trainer/gpu/cuda_check.h"
#include "worker/trainer/math/gpu_math_functions.h"

namespace nereus {
namespace data {

struct DataLayer::GpuStaging {
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
  cudaEvent_t copied = nullptr;    // On the copy stream: the staging buffers hold `in_flight`.
  cudaEvent_t consumed = nullptr;  // On the compute stream: the tops hold the last batch.
  Blob data;                       // Staging buffers on the device.
  Blob label;
  std::unique_ptr<Batch> in_flight;  // The batch whose copy was started last.
  // Taking the next batch failed (a bad record or label): the Forward that
  // needs it reports this instead of waiting for a copy.
  Status pending_error;
};

void DataLayer::Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  gpu::Device* d = device();
  if (!d->ok()) return;
  cudaStream_t copy_stream = d->copy_stream();
  cudaStream_t compute_stream = d->compute_stream();
  std::vector<int> data_shape = datum_shape_;
  data_shape[0] = batch_size_;
  auto start_copy = [&](std::unique_ptr<Batch> batch) {
    GpuStaging& s = *staging_;
    s.in_flight = std::move(batch);
    if (!s.Check(cudaStreamWaitEvent(copy_stream, s.consumed, 0), "cudaStreamWaitEvent (copy stream)")) return;
    if (!s.CopyIn(s.in_flight->data, &s.data, copy_stream, "cudaMemcpyAsync (batch to the device)")) return;
    if (output_labels_ &&
        !s.CopyIn(s.in_flight->label, &s.label, copy_stream, "cudaMemcpyAsync (labels to the device)")) {
      return;
    }
    s.Check(cudaEventRecord(s.copied, copy_stream), "cudaEventRecord (copied)");
  };

  if (staging_ == nullptr) {
    staging_ = std::make_shared<GpuStaging>(d);
    GpuStaging& s = *staging_;
    // Allocated (and zeroed, on the compute stream) before `consumed` is
    // first recorded, which the copy stream waits for.
    s.data.Reshape(data_shape);
    if (s.data.mutable_gpu_data() == nullptr) return;
    if (output_labels_) {
      s.label.Reshape(std::vector<int>{batch_size_});
      if (s.label.mutable_gpu_data() == nullptr) return;
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
  top[0]->Reshape(data_shape);
  caffe_gpu_copy(d, s.data.count(), s.data.gpu_data(), top[0]->mutable_gpu_data());
  if (output_labels_) {
    top[1]->Reshape(std::vector<int>{batch_size_});
    caffe_gpu_copy(d, s.label.count(), s.label.gpu_data(), top[1]->mutable_gpu_data());
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

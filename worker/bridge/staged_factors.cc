#include "worker/bridge/staged_factors.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/update/sgd.h"

#ifdef NEREUS_HAVE_CUDA
#include <cuda_runtime.h>

#include "worker/trainer/gpu/cuda_check.h"
#include "worker/trainer/gpu/solver_step.h"
#include "worker/trainer/math/gpu_math_functions.h"
#endif

namespace nereus {

StagedFactors::StagedFactors(gpu::Device* device, const pb::SgdConfig& sgd, int workers)
    : device_(device), sgd_(sgd), workers_(workers) {
  CHECK_GT(workers, 0);
}

StagedFactors::~StagedFactors() = default;

void StagedFactors::NetSide(const Layer::GradientFactors& f, const float** left, const float** right) const {
  *left = device_ != nullptr ? f.left.gpu() : f.left.cpu();
  *right = device_ != nullptr ? f.right.gpu() : f.right.cpu();
}

void StagedFactors::Add(int param, const std::string& name, const Layer::GradientFactors& f, Blob* weights,
                        float lr_mult, float decay_mult) {
  CHECK_EQ(weights->num_axes(), 2) << name;
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->factors = f;
  NetSide(f, &e->left_at, &e->right_at);
  e->shape = {weights->shape(0), weights->shape(1)};
  e->weights = weights;
  e->lr_mult = lr_mult;
  e->decay_mult = decay_mult;
  std::shared_ptr<gpu::DeviceMemory> pin = device_ != nullptr ? device_->memory() : nullptr;
  e->left_mirror = gpu::HostBuffer(static_cast<size_t>(f.rows * e->shape.rows), pin);
  e->right_mirror = gpu::HostBuffer(static_cast<size_t>(f.rows * e->shape.cols), pin);
  entries_[param] = std::move(e);
}

std::string StagedFactors::rebuild_on() const {
  return device_ != nullptr ? device_->description() + " (cuBLAS)" : "the CPU, behind a host staging";
}

std::string StagedFactors::rebuild_engine() const {
  return device_ != nullptr ? "the bridge with cuBLAS on " + device_->arithmetic()
                            : "the bridge on the CPU (the trainer's OpenBLAS math, behind a host staging)";
}

Status StagedFactors::MeasureRates() {
#ifdef NEREUS_HAVE_CUDA
  if (device_ == nullptr || entries_.empty()) return Status::OK();
  gpu::ScopedDevice scope(device_);
  const Entry* largest = nullptr;
  for (const auto& [param, e] : entries_) {
    if (largest == nullptr || e->shape.rows * e->shape.cols > largest->shape.rows * largest->shape.cols)
      largest = e.get();
  }
  const int rows = static_cast<int>(std::min<int64_t>(largest->shape.rows, 4096));
  const int cols = static_cast<int>(std::min<int64_t>(largest->shape.cols, 4096));
  const int k = static_cast<int>(std::min<int64_t>(largest->factors.rows * workers_, 1024));
  Blob a({k, rows}), b({k, cols}), c({rows, cols}), h({rows, cols});
  float* pa = a.mutable_gpu_data();
  float* pb = b.mutable_gpu_data();
  float* pc = c.mutable_gpu_data();
  float* ph = h.mutable_gpu_data();
  caffe_gpu_set(device_, a.count(), 0.001f, pa);
  caffe_gpu_set(device_, b.count(), 0.001f, pb);
  caffe_gpu_set(device_, h.count(), 0.0f, ph);
  const sgd_rules::StepPlan plan = PlanSolverStep(sgd_, 0, 0.001f, 1.0f, 1.0f);
  using Clock = std::chrono::steady_clock;
  constexpr int kRepeats = 3;
  auto gemm = [&] { caffe_gpu_gemm(device_, CblasTrans, CblasNoTrans, rows, cols, k, 1.0f, pa, pb, 0.0f, pc); };
  auto step = [&] { gpu::SolverStepGpu(device_, plan, pc, pc, ph, nullptr, rows * cols); };
  gemm();  // cuBLAS's first call of a shape picks its kernel.
  step();
  RETURN_IF_ERROR(device_->Synchronize().Annotate("timing the sufficient-factor rebuild on the device"));
  auto begin = Clock::now();
  for (int i = 0; i < kRepeats; ++i) gemm();
  RETURN_IF_ERROR(device_->Synchronize().Annotate("timing the sufficient-factor rebuild on the device"));
  const double gemm_s = std::chrono::duration<double>(Clock::now() - begin).count() / kRepeats;
  begin = Clock::now();
  for (int i = 0; i < kRepeats; ++i) step();
  RETURN_IF_ERROR(device_->Synchronize().Annotate("timing the SFB solver step on the device"));
  const double step_s = std::chrono::duration<double>(Clock::now() - begin).count() / kRepeats;
  gemm_gflops_ = 2.0 * rows * cols * k / std::max(gemm_s, 1e-9) / 1e9;
  step_gbytes_ = 4.0 * rows * cols / std::max(step_s, 1e-9) / 1e9;
  LOG(INFO) << "sufficient factors are rebuilt on " << rebuild_on() << ": GEMM " << rows << " x " << cols << " x " << k
            << " " << gemm_gflops_ << " GFLOP/s, solver step " << step_gbytes_ << " GB/s (timed at start-up)";
#endif
  return Status::OK();
}

Status StagedFactors::Choose(const std::vector<int>& sfb_tensors, const std::vector<int>& tensor_of_param) {
  gpu::ScopedDevice scope(device_);
  for (int t : sfb_tensors) {
    int param = -1;
    for (size_t p = 0; p < tensor_of_param.size(); ++p) {
      if (tensor_of_param[p] == t) param = static_cast<int>(p);
    }
    auto it = entries_.find(param);
    if (it == entries_.end()) {
      return InternalError("the client sends tensor " + std::to_string(t) + " as sufficient factors, but it was " +
                           "registered without them here");
    }
    if (sgd_.type() != pb::SOLVER_SGD) {
      return InvalidArgumentError("sufficient factors behind a device staging support solver type SGD only, got " +
                                  pb::SolverType_Name(sgd_.type()));
    }
    Entry& e = *it->second;
    e.chosen = true;
    param_of_tensor_[t] = param;
    const int64_t k = e.factors.rows * workers_;
    const int rows = static_cast<int>(e.shape.rows), cols = static_cast<int>(e.shape.cols);
    std::shared_ptr<gpu::DeviceMemory> pin = device_ != nullptr ? device_->memory() : nullptr;
    e.left_stack = gpu::HostBuffer(static_cast<size_t>(k * rows), pin);
    e.right_stack = gpu::HostBuffer(static_cast<size_t>(k * cols), pin);
    e.history = std::make_unique<Blob>(std::vector<int>{rows, cols});
    if (device_ != nullptr) {
#ifdef NEREUS_HAVE_CUDA
      e.left_dev = std::make_unique<Blob>(std::vector<int>{static_cast<int>(k), rows});
      e.right_dev = std::make_unique<Blob>(std::vector<int>{static_cast<int>(k), cols});
      e.left_dev->mutable_gpu_data();
      e.right_dev->mutable_gpu_data();
      caffe_gpu_set(device_, e.history->count(), 0.0f, e.history->mutable_gpu_data());
      RETURN_IF_ERROR(device_->TakeError().Annotate("allocating the sufficient-factor buffers of " + e.name));
#endif
    } else {
      std::fill(e.history->mutable_cpu_data(), e.history->mutable_cpu_data() + e.history->count(), 0.0f);
    }
  }
  return Status::OK();
}

bool StagedFactors::chosen(int param) const {
  auto it = entries_.find(param);
  return it != entries_.end() && it->second->chosen;
}

StatusOr<std::vector<StagingCopy>> StagedFactors::FactorCopies(int param, const Layer::GradientFactors& now) const {
  const Entry& e = *entries_.at(param);
  const float* left;
  const float* right;
  if (now.rows == e.factors.rows && now.left.blob == e.factors.left.blob && now.right.blob == e.factors.right.blob) {
    NetSide(now, &left, &right);
  } else {
    left = right = nullptr;
  }
  if (left != e.left_at || right != e.right_at) {
    return FailedPreconditionError("the sufficient factors of " + e.name +
                                   " moved or changed shape after Init (was the net reshaped?): K " +
                                   std::to_string(now.rows) + ", registered with K " + std::to_string(e.factors.rows));
  }
  return std::vector<StagingCopy>{
      {const_cast<float*>(e.left_mirror.data()), left, e.left_mirror.size() * sizeof(float)},
      {const_cast<float*>(e.right_mirror.data()), right, e.right_mirror.size() * sizeof(float)}};
}

Status StagedFactors::ApplyFactors(int tensor, int64_t clock, const std::vector<RankFactors>& by_rank) {
  auto it = param_of_tensor_.find(tensor);
  if (it == param_of_tensor_.end()) {
    return InternalError("factors of tensor " + std::to_string(tensor) + ", which does not travel as factors here");
  }
  Entry& e = *entries_.at(it->second);
  const size_t rows = static_cast<size_t>(e.shape.rows), cols = static_cast<size_t>(e.shape.cols);
  int64_t k = 0;
  for (const RankFactors& f : by_rank) k += f.k;
  if (k * static_cast<int64_t>(rows) > static_cast<int64_t>(e.left_stack.size()) || by_rank.empty()) {
    return InvalidArgumentError("factors of " + e.name + " for clock " + std::to_string(clock) +
                                " have K = " + std::to_string(k) + " in all, more than " + std::to_string(workers_) +
                                " workers x this worker's K = " + std::to_string(e.factors.rows));
  }
  size_t at_l = 0, at_r = 0;
  for (const RankFactors& f : by_rank) {
    std::memcpy(e.left_stack.data() + at_l, f.left, static_cast<size_t>(f.k) * rows * sizeof(float));
    std::memcpy(e.right_stack.data() + at_r, f.right, static_cast<size_t>(f.k) * cols * sizeof(float));
    at_l += static_cast<size_t>(f.k) * rows;
    at_r += static_cast<size_t>(f.k) * cols;
  }
  e.stack_rows = k;
  e.stacked_clock.store(clock);  // Publishes the stacks (the client's WaitWeights orders the Rebuild after it).
  return Status::OK();
}

Status StagedFactors::BeginFactors(int tensor, int64_t clock, const float* history) {
  auto it = param_of_tensor_.find(tensor);
  if (it == param_of_tensor_.end())
    return InternalError("tensor " + std::to_string(tensor) + " starts as factors, but it was not chosen here");
  Entry& e = *entries_.at(it->second);
  const size_t n = static_cast<size_t>(e.shape.rows * e.shape.cols);
  e.pending_history.assign(history, history + n);
  e.history_from = clock;
  return Status::OK();
}

Status StagedFactors::Export(int param, int64_t clock) {
  Entry& e = *entries_.at(param);
  const size_t n = static_cast<size_t>(e.shape.rows * e.shape.cols);
  e.export_weights.resize(n);
  e.export_history.resize(n);
  if (device_ == nullptr) {
    std::copy(e.weights->cpu_data(), e.weights->cpu_data() + n, e.export_weights.begin());
    std::copy(e.history->cpu_data(), e.history->cpu_data() + n, e.export_history.begin());
  } else {
#ifdef NEREUS_HAVE_CUDA
    gpu::ScopedDevice scope(device_);
    const std::string what =
        "copying " + e.name + " to the host to hand it back to the servers at clock " + std::to_string(clock);
    // Blocking, after the rebuild of clock - 1 on the compute stream.
    RETURN_IF_ERROR(device_->memory()
                        ->CopyToHost(e.export_weights.data(), e.weights->gpu_data(), n * sizeof(float))
                        .Annotate(what));
    RETURN_IF_ERROR(device_->memory()
                        ->CopyToHost(e.export_history.data(), e.history->gpu_data(), n * sizeof(float))
                        .Annotate(what));
#else
    return InternalError("a device net in a build without CUDA");
#endif
  }
  e.exported_clock.store(clock);
  return Status::OK();
}

Status StagedFactors::EndFactors(int tensor, int64_t clock, float* weights, float* history) {
  auto it = param_of_tensor_.find(tensor);
  if (it == param_of_tensor_.end())
    return InternalError("tensor " + std::to_string(tensor) + " is handed back, but it was not chosen here");
  Entry& e = *entries_.at(it->second);
  if (e.exported_clock.load() != clock)
    return InternalError("handing " + e.name + " back at clock " + std::to_string(clock) + ", but its weights of " +
                         "clock " + std::to_string(e.exported_clock.load()) + " were copied off the net");
  std::copy(e.export_weights.begin(), e.export_weights.end(), weights);
  std::copy(e.export_history.begin(), e.export_history.end(), history);
  return Status::OK();
}

Status StagedFactors::Rebuild(int param, int64_t clock) {
  Entry& e = *entries_.at(param);
  const int64_t update = clock - 1;
  if (update <= e.rebuilt_clock) return Status::OK();
  if (e.stacked_clock.load() != update) {
    return InternalError("the weights of " + e.name + " for clock " + std::to_string(clock) +
                         " need every worker's factors of clock " + std::to_string(update) + ", but the last " +
                         "received are of clock " + std::to_string(e.stacked_clock.load()));
  }
  if (e.history_from == update) {
    // The first update of a segment as factors: from the servers' history.
    const size_t n = e.pending_history.size();
    if (device_ == nullptr) {
      std::copy(e.pending_history.begin(), e.pending_history.end(), e.history->mutable_cpu_data());
    } else {
#ifdef NEREUS_HAVE_CUDA
      gpu::ScopedDevice scope(device_);
      RETURN_IF_ERROR(device_->memory()
                          ->CopyToDevice(e.history->mutable_gpu_data(), e.pending_history.data(), n * sizeof(float))
                          .Annotate("putting the servers' history of " + e.name + " on the device"));
#endif
    }
    e.history_from = -1;
  }
  const int rows = static_cast<int>(e.shape.rows), cols = static_cast<int>(e.shape.cols);
  const int k = static_cast<int>(e.stack_rows);
  const float scale = 1.0f / static_cast<float>(workers_);
  const float rate = LearningRate(sgd_, update);
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (device_ == nullptr) {
    // The client's own CPU rebuild (ApplySufficientFactors), on the stacks.
    Factors stacked;
    stacked.k = k;
    stacked.left = Buffer(nullptr, e.left_stack.data(), static_cast<size_t>(k) * rows * sizeof(float));
    stacked.right = Buffer(nullptr, e.right_stack.data(), static_cast<size_t>(k) * cols * sizeof(float));
    // The update into the weight's diff buffer: the net does not compute that
    // gradient (Net::SetParamGradientUnused), so the buffer is free.
    FactorGradient({&stacked}, e.shape, scale, e.weights->mutable_cpu_diff(), &e.scratch);
    SgdStep(sgd_, rate, e.lr_mult, e.decay_mult, e.weights->cpu_diff(), e.weights->mutable_cpu_data(),
            e.history->mutable_cpu_data(), n);
  } else {
#ifdef NEREUS_HAVE_CUDA
    const std::string what = "rebuilding the update of " + e.name + " for clock " + std::to_string(update);
    cudaStream_t stream = device_->compute_stream();
    float* left = e.left_dev->mutable_gpu_data();
    float* right = e.right_dev->mutable_gpu_data();
    RETURN_IF_ERROR(
        gpu::CudaStatus(cudaMemcpyAsync(left, e.left_stack.data(), static_cast<size_t>(k) * rows * sizeof(float),
                                        cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync")
            .Annotate(what));
    RETURN_IF_ERROR(
        gpu::CudaStatus(cudaMemcpyAsync(right, e.right_stack.data(), static_cast<size_t>(k) * cols * sizeof(float),
                                        cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync")
            .Annotate(what));
    // grad (rows x cols) = scale * left^T (rows x K) * right (K x cols), in
    // the weight's diff buffer: the net does not compute that gradient
    // (Net::SetParamGradientUnused), so no second rows x cols buffer.
    float* grad = e.weights->mutable_gpu_diff();
    caffe_gpu_gemm(device_, CblasTrans, CblasNoTrans, rows, cols, k, scale, left, right, 0.0f, grad);
    gpu::SolverStepGpu(device_, PlanSolverStep(sgd_, update, rate, e.lr_mult, e.decay_mult), grad,
                       e.weights->mutable_gpu_data(), e.history->mutable_gpu_data(), nullptr, static_cast<int>(n));
    RETURN_IF_ERROR(device_->TakeError(/*check_stream=*/false).Annotate(what));
#else
    return InternalError("a device net in a build without CUDA");
#endif
  }
  e.rebuilt_clock = update;
  ++rebuilds_;
  return Status::OK();
}

}  // namespace nereus

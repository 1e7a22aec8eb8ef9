#include "worker/trainer/layers/cudnn_conv.h"

#include <cudnn.h>
#include <glog/logging.h>

#include <algorithm>
#include <vector>

#include "worker/trainer/gpu/cudnn_library.h"
#include "worker/trainer/gpu/device.h"

namespace nereus {

namespace {
constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;
const char* const kPassNames[] = {"forward", "backward-data", "backward-filter"};
}  // namespace

struct CudnnConvolution::Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

CudnnConvolution::CudnnConvolution(gpu::CudnnContext* context, std::string layer)
    : context_(context), layer_(std::move(layer)) {}

CudnnConvolution::~CudnnConvolution() {
  if (!d_) return;
  const gpu::CudnnApi& api = context_->api();
  api.cudnnDestroyTensorDescriptor(d_->x);
  api.cudnnDestroyTensorDescriptor(d_->y);
  api.cudnnDestroyTensorDescriptor(d_->bias);
  api.cudnnDestroyFilterDescriptor(d_->w);
  api.cudnnDestroyConvolutionDescriptor(d_->conv);
}

Status CudnnConvolution::Check(int status, const std::string& call) const {
  Status st = context_->Check(static_cast<cudnnStatus_t>(status), call);
  return st.ok() ? st : st.Annotate("layer " + layer_ + " (cuDNN)");
}

Status CudnnConvolution::Reshape(int num, const layers::ConvGeometry& g, int out_channels, int out_h, int out_w,
                                 int group, bool reversed) {
  const gpu::CudnnApi& api = context_->api();
  if (!d_) {
    auto d = std::make_unique<Descriptors>();
    RETURN_IF_ERROR(Check(api.cudnnCreateTensorDescriptor(&d->x), "cudnnCreateTensorDescriptor"));
    RETURN_IF_ERROR(Check(api.cudnnCreateTensorDescriptor(&d->y), "cudnnCreateTensorDescriptor"));
    RETURN_IF_ERROR(Check(api.cudnnCreateTensorDescriptor(&d->bias), "cudnnCreateTensorDescriptor"));
    RETURN_IF_ERROR(Check(api.cudnnCreateFilterDescriptor(&d->w), "cudnnCreateFilterDescriptor"));
    RETURN_IF_ERROR(Check(api.cudnnCreateConvolutionDescriptor(&d->conv), "cudnnCreateConvolutionDescriptor"));
    d_ = std::move(d);
  }
  reversed_ = reversed;
  num_ = num;
  g_ = g;
  out_channels_ = out_channels;
  out_h_ = out_h;
  out_w_ = out_w;
  group_ = group;
  RETURN_IF_ERROR(Check(
      api.cudnnSetTensor4dDescriptor(d_->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, num, g.channels, g.height, g.width),
      "cudnnSetTensor4dDescriptor (input)"));
  RETURN_IF_ERROR(
      Check(api.cudnnSetTensor4dDescriptor(d_->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, num, out_channels, out_h, out_w),
            "cudnnSetTensor4dDescriptor (output)"));
  RETURN_IF_ERROR(Check(api.cudnnSetTensor4dDescriptor(d_->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                                       reversed ? g.channels : out_channels, 1, 1),
                        "cudnnSetTensor4dDescriptor (bias)"));
  RETURN_IF_ERROR(Check(api.cudnnSetFilter4dDescriptor(d_->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, out_channels,
                                                       g.channels / group, g.kernel_h, g.kernel_w),
                        "cudnnSetFilter4dDescriptor"));
  RETURN_IF_ERROR(
      Check(api.cudnnSetConvolution2dDescriptor(d_->conv, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dilation_h,
                                                g.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "cudnnSetConvolution2dDescriptor"));
  RETURN_IF_ERROR(Check(api.cudnnSetConvolutionGroupCount(d_->conv, group), "cudnnSetConvolutionGroupCount"));
  // FP32 stays FP32 unless TF32 was asked for (--tf32): CUDNN_FMA_MATH keeps
  // tensor-core rounding out, as PyTorch's allow_tf32=False does.
  return Check(api.cudnnSetConvolutionMathType(d_->conv, context_->tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
               "cudnnSetConvolutionMathType");
}

gpu::ConvAlgoKey CudnnConvolution::Key(int pass) const {
  gpu::ConvAlgoKey k;
  k.pass = pass;
  k.n = num_;
  k.c = g_.channels;
  k.h = g_.height;
  k.w = g_.width;
  k.k = out_channels_;
  k.kernel_h = g_.kernel_h;
  k.kernel_w = g_.kernel_w;
  k.pad_h = g_.pad_h;
  k.pad_w = g_.pad_w;
  k.stride_h = g_.stride_h;
  k.stride_w = g_.stride_w;
  k.dilation_h = g_.dilation_h;
  k.dilation_w = g_.dilation_w;
  k.group = group_;
  k.tf32 = context_->tf32();
  k.workspace_limit = context_->workspace_limit();
  return k;
}

StatusOr<gpu::ConvAlgoChoice> CudnnConvolution::Choose(int pass, const void* a, const void* b, void* out) {
  const gpu::ConvAlgoKey key = Key(pass);
  if (const gpu::CudnnContext::Choice* c = context_->Find(key)) return *c;
  const gpu::CudnnApi& api = context_->api();
  const size_t limit = context_->workspace_limit();
  ASSIGN_OR_RETURN(void* workspace, context_->Workspace(limit));
  struct Result {
    int algorithm;
    cudnnStatus_t status;
    float ms;
    size_t memory;
  };
  std::vector<Result> results;
  int returned = 0;
  if (pass == gpu::ConvAlgoKey::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    RETURN_IF_ERROR(Check(
        api.cudnnFindConvolutionForwardAlgorithmEx(context_->handle(), d_->x, a, d_->w, b, d_->conv, d_->y, out,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, workspace, limit),
        "cudnnFindConvolutionForwardAlgorithmEx"));
    for (int i = 0; i < returned; ++i) results.push_back({perf[i].algo, perf[i].status, perf[i].time, perf[i].memory});
  } else if (pass == gpu::ConvAlgoKey::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    RETURN_IF_ERROR(Check(api.cudnnFindConvolutionBackwardDataAlgorithmEx(
                              context_->handle(), d_->w, a, d_->y, b, d_->conv, d_->x, out,
                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf, workspace, limit),
                          "cudnnFindConvolutionBackwardDataAlgorithmEx"));
    for (int i = 0; i < returned; ++i) results.push_back({perf[i].algo, perf[i].status, perf[i].time, perf[i].memory});
  } else {
    // Timed into a scratch filter: the real one accumulates this clock's
    // gradients (Find overwrites its output).
    const size_t bytes =
        sizeof(float) * static_cast<size_t>(out_channels_) * (g_.channels / group_) * g_.kernel_h * g_.kernel_w;
    ASSIGN_OR_RETURN(void* scratch, context_->device()->memory()->Allocate(bytes));
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    Status st = Check(api.cudnnFindConvolutionBackwardFilterAlgorithmEx(
                          context_->handle(), d_->x, a, d_->y, b, d_->conv, d_->w, scratch,
                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, workspace, limit),
                      "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    Status synced = context_->device()->Synchronize();
    context_->device()->memory()->Free(scratch, bytes);
    RETURN_IF_ERROR(st);
    RETURN_IF_ERROR(synced);
    for (int i = 0; i < returned; ++i) results.push_back({perf[i].algo, perf[i].status, perf[i].time, perf[i].memory});
  }
  gpu::CudnnContext::Choice choice;
  bool found = false;
  for (const Result& r : results) {  // Fastest first.
    if (r.status == CUDNN_STATUS_SUCCESS && r.memory <= limit) {
      choice = {r.algorithm, r.memory, r.ms};
      found = true;
      break;
    }
  }
  if (!found) {
    // Algorithm 0 of each pass (IMPLICIT_GEMM forward, ALGO_0 backward)
    // needs no workspace.
    choice = {0, 0, 0};
    LOG(WARNING) << "layer " << layer_ << ": no cuDNN " << kPassNames[pass]
                 << " algorithm fits the workspace budget of " << limit
                 << " bytes (--conv_workspace_mb): the one that needs none runs (" << key.ToString() << ")";
  }
  VLOG(1) << "layer " << layer_ << ": cuDNN " << kPassNames[pass] << " algorithm " << choice.algorithm << " ("
          << choice.ms << " ms, workspace " << choice.workspace << " bytes) for " << key.ToString();
  context_->Remember(key, choice);
  return choice;
}

Status CudnnConvolution::Forward(const float* x, const float* w, float* y) {
  ASSIGN_OR_RETURN(auto c, Choose(gpu::ConvAlgoKey::kForward, x, w, y));
  ASSIGN_OR_RETURN(void* ws, context_->Workspace(c.workspace));
  return Check(context_->api().cudnnConvolutionForward(context_->handle(), &kOne, d_->x, x, d_->w, w, d_->conv,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), ws,
                                                       c.workspace, &kZero, d_->y, y),
               "cudnnConvolutionForward");
}

Status CudnnConvolution::BackwardData(const float* dy, const float* w, float* dx) {
  ASSIGN_OR_RETURN(auto c, Choose(gpu::ConvAlgoKey::kBackwardData, w, dy, dx));
  ASSIGN_OR_RETURN(void* ws, context_->Workspace(c.workspace));
  return Check(context_->api().cudnnConvolutionBackwardData(context_->handle(), &kOne, d_->w, w, d_->y, dy, d_->conv,
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algorithm), ws,
                                                            c.workspace, &kZero, d_->x, dx),
               "cudnnConvolutionBackwardData");
}

Status CudnnConvolution::BackwardFilter(const float* x, const float* dy, float* dw) {
  ASSIGN_OR_RETURN(auto c, Choose(gpu::ConvAlgoKey::kBackwardFilter, x, dy, dw));
  ASSIGN_OR_RETURN(void* ws, context_->Workspace(c.workspace));
  return Check(context_->api().cudnnConvolutionBackwardFilter(context_->handle(), &kOne, d_->x, x, d_->y, dy, d_->conv,
                                                              static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algorithm),
                                                              ws, c.workspace, &kOne, d_->w, dw),
               "cudnnConvolutionBackwardFilter");
}

Status CudnnConvolution::AddBias(const float* bias, float* top) {
  return Check(
      context_->api().cudnnAddTensor(context_->handle(), &kOne, d_->bias, bias, &kOne, reversed_ ? d_->x : d_->y, top),
      "cudnnAddTensor");
}

Status CudnnConvolution::BackwardBias(const float* top_diff, float* db) {
  return Check(context_->api().cudnnConvolutionBackwardBias(context_->handle(), &kOne, reversed_ ? d_->x : d_->y,
                                                            top_diff, &kOne, d_->bias, db),
               "cudnnConvolutionBackwardBias");
}

}  // namespace nereus

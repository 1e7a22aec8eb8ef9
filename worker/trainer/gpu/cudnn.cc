#include "worker/trainer/gpu/cudnn.h"

#include <sstream>
#include <tuple>

namespace nereus {
namespace gpu {

namespace {
// cuDNN 9 counts major * 10000 + minor * 100 + patch; cuDNN 8 and before
// major * 1000 + minor * 100 + patch.
size_t Major(size_t v) { return v >= 10000 ? v / 10000 : v / 1000; }
size_t Minor(size_t v) { return v >= 10000 ? v / 100 % 100 : v / 100 % 10; }
}  // namespace

std::string FormatCudnnVersion(size_t version) {
  return std::to_string(Major(version)) + "." + std::to_string(Minor(version)) + "." + std::to_string(version % 100);
}

Status CheckCudnnVersion(size_t version) {
  const size_t major = Major(version);
  if (major == static_cast<size_t>(kCudnnMajor)) return Status::OK();
  return FailedPreconditionError("cuDNN " + FormatCudnnVersion(version) + " is " +
                                 (major < static_cast<size_t>(kCudnnMajor) ? "too old" : "too new") +
                                 ": Nereus needs cuDNN " + std::to_string(kCudnnMajor));
}

const char* ConvEngineName(ConvEngine engine) { return engine == ConvEngine::kCudnn ? "cuDNN" : "im2col"; }

StatusOr<ConvEngine> ChooseConvEngine(caffe::ConvolutionParameter::Engine requested, const CudnnAvailability& cudnn,
                                      const std::string& layer) {
  switch (requested) {
    case caffe::ConvolutionParameter::CAFFE:
      return ConvEngine::kIm2col;
    case caffe::ConvolutionParameter::CUDNN:
      if (!cudnn.usable) {
        return FailedPreconditionError("layer " + layer + " asks for engine: CUDNN, which this machine cannot give: " +
                                       cudnn.description + " (engine: DEFAULT or CAFFE runs im2col + GEMM)");
      }
      return ConvEngine::kCudnn;
    default:
      return cudnn.usable ? ConvEngine::kCudnn : ConvEngine::kIm2col;
  }
}

std::string ConvEngineLogLine(const CudnnAvailability& cudnn) {
  return cudnn.usable ? "convolutions: " + cudnn.description
                      : "convolutions: im2col engine (cuDNN unused: " + cudnn.description + ")";
}

namespace {
auto Tie(const ConvAlgoKey& k) {
  return std::tie(k.pass, k.n, k.c, k.h, k.w, k.k, k.kernel_h, k.kernel_w, k.pad_h, k.pad_w, k.stride_h, k.stride_w,
                  k.dilation_h, k.dilation_w, k.group, k.tf32, k.workspace_limit);
}
}  // namespace

bool ConvAlgoKey::operator<(const ConvAlgoKey& o) const { return Tie(*this) < Tie(o); }
bool ConvAlgoKey::operator==(const ConvAlgoKey& o) const { return Tie(*this) == Tie(o); }

std::string ConvAlgoKey::ToString() const {
  static constexpr const char* kPasses[] = {"fwd", "bwd-data", "bwd-filter"};
  std::ostringstream os;
  os << (pass >= 0 && pass <= 2 ? kPasses[pass] : "?") << " n" << n << " c" << c << " " << h << "x" << w << " k" << k
     << " " << kernel_h << "x" << kernel_w << " pad " << pad_h << "," << pad_w << " stride " << stride_h << ","
     << stride_w << " dil " << dilation_h << "," << dilation_w << " g" << group << (tf32 ? " tf32" : " fp32") << " ws "
     << workspace_limit;
  return os.str();
}

}  // namespace gpu
}  // namespace nereus

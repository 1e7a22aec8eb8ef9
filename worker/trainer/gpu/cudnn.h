// cuDNN for the trainer's convolutions: what can be decided without the
// library (the engine of a layer, whether a runtime's version will do, the
// key an algorithm is cached under), so that it is tested everywhere. The
// library itself is loaded at run time (cudnn_library.h, CUDA builds that
// found cudnn.h): a machine without it, or with an unusable one, runs the
// im2col engine and says why once.
//
// Caffe's rule (convolution_param { engine }): DEFAULT takes cuDNN where it
// can be had, CAFFE forces im2col + GEMM, CUDNN insists (an error naming the
// layer where it cannot be had).
#ifndef NEREUS_WORKER_TRAINER_GPU_CUDNN_H_
#define NEREUS_WORKER_TRAINER_GPU_CUDNN_H_

#include <cstddef>
#include <string>

#include "common/base/status.h"
#include "proto/caffe.pb.h"

namespace nereus {
namespace gpu {

// The one major version this build can use: cuDNN 9 keeps its API within a
// major version, and a program built against 9.z runs on a runtime 9.y for
// y >= z; Nereus calls only what 9.0 already had, so any 9.y will do.
inline constexpr int kCudnnMajor = 9;

// "9.19.0" from cudnnGetVersion()'s number (major * 10000 + minor * 100 +
// patch since cuDNN 9; major * 1000 + ... before).
std::string FormatCudnnVersion(size_t version);
// OK when a runtime of `version` is usable; else why not ("cuDNN 8.9.7 is
// too old: Nereus needs cuDNN 9").
Status CheckCudnnVersion(size_t version);

// Whether the GPU convolutions of a net can use cuDNN, and in words what was
// found ("cuDNN 9.19.0 (/usr/local/cuda/lib64/libcudnn.so.9)") or why not
// ("Nereus was built without cuDNN", "libcudnn.so.9 not found: ...").
struct CudnnAvailability {
  bool usable = false;
  std::string description;
};

enum class ConvEngine { kIm2col, kCudnn };
const char* ConvEngineName(ConvEngine engine);  // "im2col" or "cuDNN"

// The engine of convolution layer `layer` on a GPU given what it asks for
// and what the device has; an error naming the layer when it insists on
// cuDNN that cannot be had.
StatusOr<ConvEngine> ChooseConvEngine(caffe::ConvolutionParameter::Engine requested, const CudnnAvailability& cudnn,
                                      const std::string& layer);

// The one log line of a net's choice: "convolutions: cuDNN 9.19.0 (...)" or
// "convolutions: im2col engine: <why not cuDNN>".
std::string ConvEngineLogLine(const CudnnAvailability& cudnn);

// Which convolution an algorithm is timed and cached for: the shapes, the
// geometry, the direction and the math allowed. Two layers with equal keys
// share one timing (PyTorch's benchmark mode caches the same way).
struct ConvAlgoKey {
  enum Pass { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };
  int pass = kForward;
  int n = 0, c = 0, h = 0, w = 0;  // The convolution's input.
  int k = 0;                       // Its output channels.
  int kernel_h = 0, kernel_w = 0, pad_h = 0, pad_w = 0, stride_h = 0, stride_w = 0, dilation_h = 0, dilation_w = 0;
  int group = 1;
  bool tf32 = false;
  size_t workspace_limit = 0;  // The budget the choice was made within.

  bool operator<(const ConvAlgoKey& o) const;
  bool operator==(const ConvAlgoKey& o) const;
  // "fwd n32 c64 224x224 k64 3x3 pad 1,1 stride 1,1 dil 1,1 g1 fp32 ws 1073741824".
  std::string ToString() const;
};

// The algorithm timed and chosen for a ConvAlgoKey, and the workspace it
// needs.
struct ConvAlgoChoice {
  int algorithm = 0;
  size_t workspace = 0;
  double ms = 0;  // As timed.
};

}  // namespace gpu
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_GPU_CUDNN_H_

#include "worker/trainer/gpu/device_flags.h"

#include <gflags/gflags.h>

#include <algorithm>

DEFINE_bool(tf32, false,
            "GPU training: let FP32 GEMMs (cuBLAS) and convolutions (cuDNN) round through TF32 tensor cores, as "
            "PyTorch's allow_tf32 does (about 10 bits of mantissa in the products). Off: plain FP32, the "
            "arithmetic the CPU tolerances are derived for.");
DEFINE_bool(cudnn, true,
            "GPU training: run convolutions through cuDNN 9 where the machine has it (loaded at run time; a "
            "layer's convolution_param { engine: CAFFE } keeps im2col + GEMM for that layer). false: every "
            "convolution on the im2col engine.");
DEFINE_int32(conv_workspace_mb, 1024,
             "GPU training: MiB of device memory the convolutions' one workspace (per net) may take: a cuDNN "
             "algorithm's, or the im2col engine's columns of a chunk of images. An algorithm that needs more is "
             "not chosen.");

namespace nereus {
namespace gpu {

DeviceOptions DeviceOptionsFromFlags(DeviceOptions base) {
  base.tf32 = FLAGS_tf32;
  base.cudnn = FLAGS_cudnn;
  base.conv_workspace_bytes = static_cast<size_t>(std::max(0, FLAGS_conv_workspace_mb)) << 20;
  return base;
}

}  // namespace gpu
}  // namespace nereus

// Per-layer shapes and compute of well-known models, for the pipeline bench.
#ifndef NEREUS_BENCH_SIM_MODELS_H_
#define NEREUS_BENCH_SIM_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace nereus {
namespace bench {

struct ModelLayer {
  std::string name;
  std::vector<std::vector<int64_t>> params;  // Learnable tensors' shapes.
  double forward_flops = 0;                  // Per sample.
  // A fully connected layer: params[0] is its out x in weight, whose
  // gradient is the product of two thin factors (sufficient factors).
  bool fully_connected = false;
};

struct ModelSpec {
  std::string name;
  std::vector<ModelLayer> layers;  // Layer 0 at the input.
  uint64_t parameters() const;
  double forward_flops() const;
};

// "vgg19" (143,667,240 parameters), "vgg19_22k" (VGG19 with a 21,841-way
// classifier: 229,052,817), "resnet50" (25,557,032; batch-norm scale
// and shift counted with their convolution), "inception_v3" (23,834,568, the
// same way), "lenet" (431,080).
StatusOr<ModelSpec> ModelByName(const std::string& name);

// The model shrunk by `factor` >= 1 in bytes and FLOPs alike: every tensor
// becomes one of ceil(elements / factor) elements, every layer's FLOPs are
// divided by factor. Compute and communication keep their ratio, so a shrunk
// model on a link and device `factor` times slower times like the full one
// (except the fixed cost of each message). Shrunk tensors are flat, so no
// layer of a shrunk model carries sufficient factors.
ModelSpec Shrink(const ModelSpec& model, double factor);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_SIM_MODELS_H_

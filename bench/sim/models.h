// Per-layer shapes and compute of well-known models, for the pipeline bench.
#ifndef NEREUS_BENCH_SIM_MODELS_H_
#define NEREUS_BENCH_SIM_MODELS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {
namespace bench {

struct ModelLayer {
  std::string name;
  std::vector<std::vector<int64_t>> params;  // Learnable tensors' shapes.
  double forward_flops = 0;                  // Per sample.
  // A fully connected layer: params[0] is its out x in weight, whose
  // gradient is the product of two thin factors (sufficient factors).
  bool fully_connected = false;
  // The rows of each factor per worker are the batch K times this (rounded,
  // at least 1): 1 at full size; a model shrunk by F has 1/sqrt(F) (Shrink).
  double factor_rows_scale = 1;
};

// Rows of a fully connected layer's sufficient factors per worker for a
// per-worker batch of `batch` (what the emulated worker registers and
// HybComm compares with; the compute is still that of `batch` samples).
int64_t FactorRows(const ModelLayer& layer, int batch);

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

// The model shrunk by F = `factor` >= 1 in bytes and FLOPs alike, so that a
// shrunk model on a link and device F times slower times like the full one
// (except the fixed cost of each message):
//  - every layer's FLOPs are divided by F;
//  - a fully connected layer's M x N weight stays a matrix, of
//    round(M / sqrt(F)) x round(N / sqrt(F)) (at least 1 x 1), and its
//    factors' rows per worker become round(K / sqrt(F)) (at least 1,
//    factor_rows_scale), where K is the batch;
//  - every other tensor (biases too) becomes flat, of ceil(elements / F).
// Why the factors' rows shrink too. Per worker and clock, with P workers
// and P servers, the full matrix through the servers moves 4 x 4MN(P-1)/P
// bytes, the factors 4 x 2K(P-1)(M+N) (Poseidon's cost model, docs/CLIENT.md). Shrinking
// rows and columns by sqrt(F) divides the first by F but the second only by
// sqrt(F) if K stays: factors would cost sqrt(F) times too much against the
// servers, the emulated links and HybComm's rule alike (its crossover
// P <= 2MN / (K(M+N)) would fall sqrt(F) times), and no shrink of M and N
// alone can help (M'N' = MN/F forces M' + N' >= 2 sqrt(MN/F), above
// (M+N)/F for every F the studies use). With K / sqrt(F) rows both paths'
// bytes are divided by F and the crossover is kept, to rounding: for
// F <= K^2 (1024 at batch 32) HybComm makes the same choice for every layer
// of VGG19, VGG19-22K and ResNet-50 at 1 to 32 hosts as at full size
// (models_test). Above K^2 the rows stay 1 and factors cost more than they
// should. The rebuild of a shrunk layer, 2 K P M' N' FLOPs at the compute's
// batch K, is the full one's / F, as the compute; a GEMM over the factors
// actually sent (K / sqrt(F) rows each) makes 2 K P M N / F^1.5, sqrt(F)
// times too little. The emulated device (RebuildSeconds) and the simulator
// (SimLayer::sfb_rebuild_rows, RebuildCharge::kFullSize) charge the former;
// only a rebuild really computed on this CPU (--sfb_rebuild=cpu) is the latter.
ModelSpec Shrink(const ModelSpec& model, double factor);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_SIM_MODELS_H_

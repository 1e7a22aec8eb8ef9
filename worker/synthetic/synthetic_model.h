// A synthetic model that runs the whole system end to end before (and
// independently of) the Caffe-style trainer: a list of tensor shapes and
// deterministic pseudo-random gradients from (seed, rank, clock).
#ifndef NEREUS_WORKER_SYNTHETIC_SYNTHETIC_MODEL_H_
#define NEREUS_WORKER_SYNTHETIC_SYNTHETIC_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace nereus {

// Parses "1000,250x10,64x3x3x3" into shapes. Errors name the bad entry.
StatusOr<std::vector<std::vector<int64_t>>> ParseTensorShapes(const std::string& spec);

uint64_t ElementCount(const std::vector<int64_t>& shape);

enum class SyntheticKind {
  kNoise,      // g = coupling * w + noise(seed, rank, clock, tensor, i)
  kQuadratic,  // g = w - target(seed, tensor, i): minimizes 0.5 * |w - target|^2
};

class SyntheticModel {
 public:
  SyntheticModel(SyntheticKind kind, uint64_t seed, float coupling = 0.01f)
      : kind_(kind), seed_(seed), coupling_(coupling) {}

  // Initial weights of tensor `tensor`: uniform in [-0.5, 0.5), from the seed.
  void InitialWeights(int tensor, float* w, size_t n) const;
  // The gradient of worker `rank` at `clock` given the weights it holds.
  void Gradient(int rank, int64_t clock, int tensor, const float* w, float* g, size_t n) const;
  // A fully connected tensor (rows x cols) whose gradient is left^T * right:
  // worker `rank`'s factors at `clock`, k rows each (left k x rows, right
  // k x cols), deterministic noise (left scaled by 1/k).
  void Factors(int rank, int64_t clock, int tensor, int64_t k, int64_t rows, int64_t cols, float* left,
               float* right) const;
  // g = left^T * right, summed over the k rows in order (what a trainer's
  // backward computes for itself).
  static void FactorProduct(int64_t k, int64_t rows, int64_t cols, const float* left, const float* right, float* g);
  // 0.5 * |w - target|^2 for kQuadratic; 0.5 * |w|^2 for kNoise.
  double Loss(int tensor, const float* w, size_t n) const;

 private:
  float Target(int tensor, uint64_t i) const;

  SyntheticKind kind_;
  uint64_t seed_;
  float coupling_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_SYNTHETIC_SYNTHETIC_MODEL_H_

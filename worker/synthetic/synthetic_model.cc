#include "worker/synthetic/synthetic_model.h"

#include <sstream>

namespace nereus {
namespace {

// SplitMix64: a counter-based generator, so any element's value is a pure
// function of its coordinates.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [-0.5, 0.5), exactly representable (24 random bits).
float Uniform(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t i) {
  const uint64_t h = Mix(Mix(Mix(Mix(Mix(a) ^ b) ^ c) ^ d) ^ i);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f) - 0.5f;
}

}  // namespace

StatusOr<std::vector<std::vector<int64_t>>> ParseTensorShapes(const std::string& spec) {
  std::vector<std::vector<int64_t>> shapes;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::vector<int64_t> shape;
    std::stringstream dims(item);
    std::string d;
    while (std::getline(dims, d, 'x')) {
      char* end = nullptr;
      const long long v = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end != '\0' || v <= 0)
        return InvalidArgumentError("bad tensor shape \"" + item + "\" in \"" + spec +
                                    "\": expected positive dimensions joined by 'x', e.g. 250x10");
      shape.push_back(v);
    }
    if (shape.empty()) return InvalidArgumentError("empty tensor shape in \"" + spec + "\"");
    shapes.push_back(shape);
  }
  if (shapes.empty()) return InvalidArgumentError("no tensor shapes in \"" + spec + "\"");
  return shapes;
}

uint64_t ElementCount(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

void SyntheticModel::InitialWeights(int tensor, float* w, size_t n) const {
  for (size_t i = 0; i < n; ++i) w[i] = Uniform(seed_, 0x1717, tensor, 0, i);
}

float SyntheticModel::Target(int tensor, uint64_t i) const { return 2.0f * Uniform(seed_, 0x7a7a, tensor, 1, i); }

void SyntheticModel::Gradient(int rank, int64_t clock, int tensor, const float* w, float* g, size_t n) const {
  if (kind_ == SyntheticKind::kQuadratic) {
    for (size_t i = 0; i < n; ++i) g[i] = w[i] - Target(tensor, i);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    g[i] = coupling_ * w[i] + Uniform(seed_, static_cast<uint64_t>(rank) + 1, static_cast<uint64_t>(clock), tensor, i);
  }
}

void SyntheticModel::Factors(int rank, int64_t clock, int tensor, int64_t k, int64_t rows, int64_t cols, float* left,
                             float* right) const {
  const float scale = 1.0f / static_cast<float>(k);
  const uint64_t r = static_cast<uint64_t>(rank) + 1, c = static_cast<uint64_t>(clock);
  for (int64_t i = 0; i < k * rows; ++i) left[i] = scale * Uniform(seed_, 0x1f00 + r, c, tensor, i);
  for (int64_t i = 0; i < k * cols; ++i) right[i] = Uniform(seed_, 0x2f00 + r, c, tensor, i);
}

void SyntheticModel::FactorProduct(int64_t k, int64_t rows, int64_t cols, const float* left, const float* right,
                                   float* g) {
  for (int64_t i = 0; i < rows * cols; ++i) g[i] = 0.0f;
  for (int64_t s = 0; s < k; ++s)
    for (int64_t i = 0; i < rows; ++i) {
      const float u = left[s * rows + i];
      for (int64_t j = 0; j < cols; ++j) g[i * cols + j] += u * right[s * cols + j];
    }
}

double SyntheticModel::Loss(int tensor, const float* w, size_t n) const {
  double s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = kind_ == SyntheticKind::kQuadratic ? w[i] - Target(tensor, i) : w[i];
    s += 0.5 * d * d;
  }
  return s;
}

}  // namespace nereus

// The synthetic worker's weights (nereus_worker --weights_out: every tensor's
// float32 values in order) and how far a job moved them from the model's
// initial weights: a test that compares two runs bit for bit also checks that
// they trained, so that a run that did nothing cannot pass.
#ifndef NEREUS_TESTS_SUPPORT_SYNTHETIC_WEIGHTS_H_
#define NEREUS_TESTS_SUPPORT_SYNTHETIC_WEIGHTS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/process_util.h"
#include "worker/synthetic/synthetic_model.h"

namespace nereus {
namespace test {

inline std::vector<float> ReadFloatFile(const std::string& path) {
  const std::string bytes = ReadFile(path);
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// Per tensor (sizes in order), the largest |final - initial| against the
// initial weights of the synthetic model with `seed` (--seed).
inline std::vector<double> MovedFromInitial(const std::vector<float>& final_weights, uint64_t seed,
                                            const std::vector<size_t>& sizes) {
  const SyntheticModel model(SyntheticKind::kNoise, seed);  // Initial weights do not depend on the kind.
  std::vector<double> moved;
  size_t offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> initial(sizes[t]);
    model.InitialWeights(static_cast<int>(t), initial.data(), initial.size());
    double m = 0;
    for (size_t i = 0; i < sizes[t] && offset + i < final_weights.size(); ++i) {
      m = std::max(m, std::fabs(static_cast<double>(final_weights[offset + i]) - initial[i]));
    }
    moved.push_back(m);
    offset += sizes[t];
  }
  EXPECT_EQ(offset, final_weights.size()) << "the weights file does not hold the tensors given";
  return moved;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_SYNTHETIC_WEIGHTS_H_

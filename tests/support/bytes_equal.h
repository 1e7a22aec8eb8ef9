// Bitwise comparison of float data for the tests that promise "bit for bit":
// byte for byte (memcmp), so that -0.0 differs from +0.0 and a NaN equals only
// the same NaN, which float == gets wrong both ways. On a difference the
// message names the first differing tensor and index and gives both values
// exactly (%a) and how many elements differ.
//
//   EXPECT_TRUE(test::BytesEqual(reference, resumed));
#ifndef NEREUS_TESTS_SUPPORT_BYTES_EQUAL_H_
#define NEREUS_TESTS_SUPPORT_BYTES_EQUAL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace nereus {
namespace test {

// "0x1.99999ap-4 (0.1)".
inline std::string ExactFloat(float v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a (%.9g)", static_cast<double>(v), static_cast<double>(v));
  return buf;
}

// `what` names the data in the message ("tensor ip1/0").
inline ::testing::AssertionResult BytesEqual(const float* a, size_t na, const float* b, size_t nb,
                                             const std::string& what = "data") {
  if (na != nb) {
    return ::testing::AssertionFailure() << what << ": " << na << " values against " << nb;
  }
  if (na == 0 || std::memcmp(a, b, na * sizeof(float)) == 0) return ::testing::AssertionSuccess();
  size_t first = na;
  size_t differing = 0;
  for (size_t i = 0; i < na; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    if (first == na) first = i;
    ++differing;
  }
  return ::testing::AssertionFailure() << what << " differs at index " << first << ": " << ExactFloat(a[first])
                                       << " against " << ExactFloat(b[first]) << " (" << differing << " of " << na
                                       << " values differ)";
}

inline ::testing::AssertionResult BytesEqual(const std::vector<float>& a, const std::vector<float>& b,
                                             const std::string& what = "data") {
  return BytesEqual(a.data(), a.size(), b.data(), b.size(), what);
}

// Tensors by name (ReadWeights' "<layer>/<i>" maps): the same names, and each
// tensor byte for byte; the message names the first tensor that differs.
inline ::testing::AssertionResult BytesEqual(const std::map<std::string, std::vector<float>>& a,
                                             const std::map<std::string, std::vector<float>>& b) {
  for (const auto& [name, values] : a) {
    auto it = b.find(name);
    if (it == b.end()) return ::testing::AssertionFailure() << "tensor " << name << " is missing from the second";
    ::testing::AssertionResult same = BytesEqual(values, it->second, "tensor " + name);
    if (!same) return same;
  }
  for (const auto& [name, values] : b) {
    if (a.count(name) == 0) return ::testing::AssertionFailure() << "tensor " << name << " is missing from the first";
  }
  return ::testing::AssertionSuccess();
}

// The largest |a[i] - b[i]|: how far training moved weights from `b`.
inline double MaxAbsDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_BYTES_EQUAL_H_

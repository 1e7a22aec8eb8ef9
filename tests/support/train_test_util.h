// Helpers of the trainer-mode tests (nereus_worker --solver): summary JSON
// values and .caffemodel weights.
#ifndef NEREUS_TESTS_SUPPORT_TRAIN_TEST_UTIL_H_
#define NEREUS_TESTS_SUPPORT_TRAIN_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace test {

// The number after "key": in a flat JSON object; NaN when absent or null.
inline double JsonValue(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\": ([-+0-9.eE]+|null)");
  if (!std::regex_search(json, m, re) || m[1] == "null") return NAN;
  return std::stod(m[1]);
}

inline bool JsonIsNull(const std::string& json, const std::string& key) {
  return json.find("\"" + key + "\": null") != std::string::npos;
}

// "<layer>/<i>" -> the blob's values, from a .caffemodel.
inline std::map<std::string, std::vector<float>> ReadWeights(const std::string& path) {
  caffe::NetParameter net;
  Status st = ReadProtoFromBinaryFile(path, &net);
  EXPECT_TRUE(st.ok()) << st;
  std::map<std::string, std::vector<float>> out;
  for (const auto& layer : net.layer()) {
    for (int b = 0; b < layer.blobs_size(); ++b) {
      const auto& data = layer.blobs(b).data();
      out[layer.name() + "/" + std::to_string(b)] = std::vector<float>(data.begin(), data.end());
    }
  }
  return out;
}

// The largest |a - b| over every blob; the blobs must match in name and size.
inline double MaxAbsDiff(const std::map<std::string, std::vector<float>>& a,
                         const std::map<std::string, std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (const auto& [name, va] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      ADD_FAILURE() << "blob " << name << " missing";
      continue;
    }
    EXPECT_EQ(va.size(), it->second.size()) << name;
    for (size_t i = 0; i < va.size() && i < it->second.size(); ++i) {
      m = std::max(m, static_cast<double>(std::fabs(va[i] - it->second[i])));
    }
  }
  return m;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_TRAIN_TEST_UTIL_H_

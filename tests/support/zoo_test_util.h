// Helpers of the tests that train nets through nereus_worker processes on
// generated data (batch_norm_job_test, zoo_models_test): random-image LMDBs
// and running a program to completion.
#ifndef NEREUS_TESTS_SUPPORT_ZOO_TEST_UTIL_H_
#define NEREUS_TESTS_SUPPORT_ZOO_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/process_util.h"
#include "worker/trainer/data/db.h"

namespace nereus {
namespace test {

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// `records` random channels x side x side uint8 images; the label is the
// record's index modulo `classes`.
inline void WriteRandomImageLmdb(const std::string& path, int records, int channels, int side, int classes,
                                 uint32_t seed) {
  auto db = data::LmdbDatabase::Open(path, data::DbMode::kNew);
  ASSERT_TRUE(db.ok()) << db.status();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pixel(0, 255);
  std::vector<std::pair<std::string, std::string>> batch;
  for (int r = 0; r < records; ++r) {
    std::string bytes(static_cast<size_t>(channels) * side * side, '\0');
    for (char& b : bytes) b = static_cast<char>(pixel(rng));
    caffe::Datum datum;
    datum.set_channels(channels);
    datum.set_height(side);
    datum.set_width(side);
    datum.set_data(bytes);
    datum.set_label(r % classes);
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", r);
    batch.emplace_back(key, datum.SerializeAsString());
  }
  Status st = (*db)->PutBatch(batch);
  ASSERT_TRUE(st.ok()) << st;
}

// Runs `argv` to completion (bounded); returns the exit code.
inline int RunToExit(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds timeout) {
  auto p = Subprocess::Start(argv, log);
  auto code = p->WaitFor(timeout);
  EXPECT_TRUE(code.has_value()) << argv[0] << " did not exit within " << timeout.count() << " s:\n" << p->Log();
  return code.value_or(-1);
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_ZOO_TEST_UTIL_H_

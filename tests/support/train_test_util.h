// Helpers of the trainer-mode tests (nereus_worker --solver): generated
// image LMDBs, text files, running a program to completion, displayed losses,
// null summary JSON values and .caffemodel weights (numbers: JsonNumber, fixtures.h).
#ifndef NEREUS_TESTS_SUPPORT_TRAIN_TEST_UTIL_H_
#define NEREUS_TESTS_SUPPORT_TRAIN_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/process_util.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace test {

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

// Waits for trainer `p` (whose log says "<who>: Iteration N, ..." every
// `display` iterations before `max_iter`) to train `max_iter` iterations and
// exit 0. A guard against a hang, not a speed test: it fails only if a
// display interval, or the end after the last one, takes longer than
// `stall`, however long the whole run takes on a busy machine.
inline ::testing::AssertionResult TrainsToTheEnd(Subprocess& p, const std::string& who, int max_iter, int display,
                                                 std::chrono::seconds stall) {
  for (int it = display; it < max_iter; it += display) {
    if (!p.WaitForLog(who + ": Iteration " + std::to_string(it) + ",", stall))
      return ::testing::AssertionFailure() << who << " did not reach iteration " << it << " within " << stall.count()
                                           << " s of the one before (or exited):\n"
                                           << p.Log();
  }
  const auto code = p.WaitFor(stall);
  if (!code.has_value())
    return ::testing::AssertionFailure() << who << " did not exit within " << stall.count()
                                         << " s of its last iteration:\n"
                                         << p.Log();
  if (*code != 0) return ::testing::AssertionFailure() << who << " exited with " << *code << ":\n" << p.Log();
  return ::testing::AssertionSuccess();
}

// Runs `argv` to completion (bounded); returns the exit code.
inline int RunToExit(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds timeout) {
  auto p = Subprocess::Start(argv, log);
  auto code = p->WaitFor(timeout);
  EXPECT_TRUE(code.has_value()) << argv[0] << " did not exit within " << timeout.count() << " s:\n" << p->Log();
  return code.value_or(-1);
}

// `records` channels x side x side uint8 images of random pixels (drawn in
// order from std::mt19937(seed)), keyed "%08d" by index; the label of record
// r is label(r, its pixels).
inline void WriteImageLmdb(const std::string& path, int records, int channels, int side, uint32_t seed,
                           const std::function<int(int, const std::string&)>& label) {
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
    datum.set_label(label(r, bytes));
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", r);
    batch.emplace_back(key, datum.SerializeAsString());
  }
  Status st = (*db)->PutBatch(batch);
  ASSERT_TRUE(st.ok()) << st;
}

// Random images whose label is the record's index modulo `classes`.
inline void WriteRandomImageLmdb(const std::string& path, int records, int channels, int side, int classes,
                                 uint32_t seed) {
  WriteImageLmdb(path, records, channels, side, seed, [classes](int r, const std::string&) { return r % classes; });
}

// The label of a one-channel image cut into `regions` by `region_of(x, y)`:
// the region of the largest pixel sum, so a net has something to learn.
// Opens the LMDB at `path` for reading (into `*db`), checks that it holds
// `records` records and returns a cursor at its first, or nullptr after a
// failure.
inline std::unique_ptr<data::DbCursor> ReadLmdb(const std::string& path, std::size_t records,
                                                std::unique_ptr<data::LmdbDatabase>* db) {
  auto opened = data::LmdbDatabase::Open(path, data::DbMode::kRead);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) return nullptr;
  *db = std::move(opened).value();
  auto count = (*db)->Count();
  EXPECT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(count.ok() ? *count : 0, records);
  auto cursor = (*db)->NewCursor();
  EXPECT_TRUE(cursor.ok()) << cursor.status();
  return cursor.ok() ? std::move(cursor).value() : nullptr;
}

inline int BrightestRegion(const std::string& pixels, int side, int regions,
                           const std::function<int(int, int)>& region_of) {
  std::vector<int> sums(regions, 0);
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) sums[region_of(x, y)] += static_cast<unsigned char>(pixels[y * side + x]);
  return static_cast<int>(std::max_element(sums.begin(), sums.end()) - sums.begin());
}

// A Data layer `name` reading the LMDB at `source` in batches of `batch`,
// its bytes scaled to [0, 1) as Caffe's examples scale them; tops "data" and
// "label". Prototxt text, a net's first layer.
inline std::string ScaledLmdbDataLayer(const std::string& name, const std::string& source, int batch) {
  return "layer { name: \"" + name +
         "\" type: \"Data\" top: \"data\" top: \"label\"\n"
         "  transform_param { scale: 0.00390625 }\n"
         "  data_param { source: \"" +
         source + "\" batch_size: " + std::to_string(batch) + " backend: LMDB } }\n";
}

// A job of 2 servers and 2 workers training `solver` under BSP (the
// coordinator also gets `coordinator_flags`); worker r writes its final
// weights to DIR/w<r>.caffemodel and its summary to DIR/w<r>.json.
inline ClusterSpec TwoWorkerTrainJob(const TempDir& dir, const std::string& solver,
                                     const std::vector<std::string>& coordinator_flags = {}) {
  ClusterSpec spec;
  spec.servers = 2;
  spec.workers = 2;
  spec.coordinator_flags = {"--consistency=bsp"};
  spec.coordinator_flags.insert(spec.coordinator_flags.end(), coordinator_flags.begin(), coordinator_flags.end());
  spec.worker_flags = {"--solver=" + solver};
  for (int w = 0; w < 2; ++w) {
    const std::string r = std::to_string(w);
    spec.worker_rank_flags.push_back(
        {w, {"--weights_out=" + dir.File("w" + r + ".caffemodel"), "--summary_json=" + dir.File("w" + r + ".json")}});
  }
  return spec;
}

// The losses `who` displays in `log` ("<who>: Iteration N, loss = X"), in
// order.
inline std::vector<double> DisplayedLosses(const std::string& log, const std::string& who) {
  std::vector<double> losses;
  const std::regex re(who + ": Iteration (\\d+), loss = ([-+0-9.eE]+)");
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) losses.push_back(std::stod((*it)[2]));
  return losses;
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

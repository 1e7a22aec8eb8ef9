#include "worker/trainer/data/data_layer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/process_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {
namespace data {
namespace {

// Record i: 1x2x2 bytes {i, i+1, i+2, i+3} (mod 256), label i.
float PixelOf(int record, int p) { return static_cast<float>((record + p) % 256); }

class DataLayerTest : public ::testing::Test {
 protected:
  std::string MakeDb(const std::string& name, int records) {
    const std::string path = dir_.File(name);
    auto db = LmdbDatabase::Open(path, DbMode::kNew);
    EXPECT_TRUE(db.ok()) << db.status();
    LmdbWriter writer(db->get());
    for (int i = 0; i < records; ++i) {
      caffe::Datum datum;
      datum.set_channels(1);
      datum.set_height(2);
      datum.set_width(2);
      std::string bytes;
      for (int p = 0; p < 4; ++p) bytes.push_back(static_cast<char>((i + p) % 256));
      datum.set_data(bytes);
      datum.set_label(i);
      char key[16];
      std::snprintf(key, sizeof(key), "%08d", i);
      EXPECT_TRUE(writer.Put(key, datum.SerializeAsString()).ok());
    }
    EXPECT_TRUE(writer.Flush().ok());
    return path;
  }

  static caffe::LayerParameter Param(const std::string& source, int batch_size) {
    caffe::LayerParameter param;
    param.set_name("mnist");
    param.set_type("Data");
    param.set_phase(caffe::TRAIN);
    param.add_top("data");
    param.add_top("label");
    param.mutable_data_param()->set_source(source);
    param.mutable_data_param()->set_batch_size(batch_size);
    param.mutable_data_param()->set_backend(caffe::DataParameter::LMDB);
    return param;
  }

  // Sets the layer up with data and label tops.
  Status SetUpLayer(Layer* layer) {
    layer->set_rng(&rng_);
    return layer->SetUp({}, {&data_, &label_});
  }

  // Labels of one forward pass.
  std::vector<int> ForwardLabels(Layer* layer) {
    layer->Forward({}, {&data_, &label_});
    std::vector<int> labels;
    for (int i = 0; i < label_.count(); ++i) labels.push_back(static_cast<int>(label_.cpu_data()[i]));
    return labels;
  }

  test::TempDir dir_;
  std::mt19937 rng_{1234};
  Blob data_;
  Blob label_;
};

TEST_F(DataLayerTest, ReadsRecordsInKeyOrderWithExactValuesAndWraps) {
  const std::string source = MakeDb("db", 10);
  caffe::LayerParameter param = Param(source, 4);
  param.mutable_transform_param()->set_scale(0.5f);
  DataLayer layer(param);
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(data_.shape(), (std::vector<int>{4, 1, 2, 2}));
  EXPECT_EQ(label_.shape(), (std::vector<int>{4}));
  EXPECT_EQ(layer.shard_size(), 10u);

  const std::vector<std::vector<int>> want = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 0, 1}, {2, 3, 4, 5}};
  for (const auto& records : want) {
    EXPECT_EQ(ForwardLabels(&layer), records);
    for (int n = 0; n < 4; ++n)
      for (int p = 0; p < 4; ++p)
        ASSERT_EQ(data_.cpu_data()[n * 4 + p], PixelOf(records[n], p) * 0.5f) << "record " << records[n];
  }
}

TEST_F(DataLayerTest, DataOnlyTop) {
  const std::string source = MakeDb("db", 3);
  caffe::LayerParameter param = Param(source, 2);
  param.clear_top();
  param.add_top("data");
  DataLayer layer(param);
  layer.set_rng(&rng_);
  ASSERT_TRUE(layer.SetUp({}, {&data_}).ok());
  layer.Forward({}, {&data_});
  EXPECT_EQ(data_.shape(), (std::vector<int>{2, 1, 2, 2}));
  EXPECT_EQ(data_.cpu_data()[7], PixelOf(1, 3));
}

TEST_F(DataLayerTest, TwoShardsAreDisjointAndCoverEveryRecord) {
  const std::string source = MakeDb("db", 11);
  // Built through the registry, as the trainer does.
  LayerRegistry shard0_registry;
  RegisterDataLayers(&shard0_registry, DataLayerOptions{0, 2});
  auto shard0 = shard0_registry.Create(Param(source, 3));
  ASSERT_TRUE(shard0.ok()) << shard0.status();
  ASSERT_TRUE(SetUpLayer(shard0->get()).ok());
  std::vector<int> zero = ForwardLabels(shard0->get());
  const std::vector<int> zero2 = ForwardLabels(shard0->get());
  zero.insert(zero.end(), zero2.begin(), zero2.end());
  EXPECT_EQ(zero, (std::vector<int>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(ForwardLabels(shard0->get()), (std::vector<int>{0, 2, 4}));  // Next pass.

  DataLayer shard1(Param(source, 5), DataLayerOptions{1, 2});
  ASSERT_TRUE(SetUpLayer(&shard1).ok());
  EXPECT_EQ(shard1.shard_size(), 5u);
  const std::vector<int> one = ForwardLabels(&shard1);
  EXPECT_EQ(one, (std::vector<int>{1, 3, 5, 7, 9}));
  // Values follow the labels: the record itself was read, not just its label.
  EXPECT_EQ(data_.cpu_data()[4 * 4 + 2], PixelOf(9, 2));

  std::set<int> all(zero.begin(), zero.end());
  for (int r : one) EXPECT_TRUE(all.insert(r).second) << "record " << r << " read by both shards";
  EXPECT_EQ(all.size(), 11u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 10);
}

TEST_F(DataLayerTest, DestroyedMidEpochShutsDownCleanly) {
  const std::string source = MakeDb("db", 500);
  for (int prefetch : {1, 3}) {
    caffe::LayerParameter param = Param(source, 7);
    param.mutable_data_param()->set_prefetch(prefetch);
    {
      // Never forwarded: the thread fills the queue and waits for room.
      DataLayer layer(param);
      ASSERT_TRUE(SetUpLayer(&layer).ok());
    }
    {
      auto layer = std::make_unique<DataLayer>(param);
      ASSERT_TRUE(SetUpLayer(layer.get()).ok());
      EXPECT_EQ(ForwardLabels(layer.get()), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
      EXPECT_EQ(ForwardLabels(layer.get()), (std::vector<int>{7, 8, 9, 10, 11, 12, 13}));
      layer.reset();  // Joins the prefetch thread; a hang fails the test by timeout.
    }
  }
  {
    // A batch larger than the database, destroyed while the thread is
    // probably still inside FillBatch.
    DataLayer big(Param(source, 5000));
    ASSERT_TRUE(SetUpLayer(&big).ok());
  }
  // Never set up: nothing to stop.
  DataLayer idle(Param(source, 1));
}

TEST_F(DataLayerTest, RandSkipSkipsOwnRecordsFromItsOwnEngine) {
  const std::string source = MakeDb("db", 20);
  caffe::LayerParameter param = Param(source, 2);
  param.mutable_data_param()->set_rand_skip(7);
  DataLayer layer(param, DataLayerOptions{1, 2});
  // The layer seeds its engine with one draw from the Net's, then skips
  // engine() % rand_skip of its shard's records.
  std::mt19937 net_copy = rng_;
  std::mt19937 expected_engine(net_copy());
  const int skip = static_cast<int>(expected_engine() % 7);
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(ForwardLabels(&layer), (std::vector<int>{1 + 2 * skip, 3 + 2 * skip}));
}

TEST_F(DataLayerTest, CorruptRecordIsFatalAtForwardNamingKeyAndDatabase) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  const std::string source = MakeDb("db", 4);
  {
    auto db = LmdbDatabase::Open(source, DbMode::kWrite);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->PutBatch({{"00000002", std::string("\xff\xff\xff", 3)}}).ok());
  }
  EXPECT_DEATH(
      {
        DataLayer layer(Param(source, 2));
        if (!SetUpLayer(&layer).ok()) return;
        ForwardLabels(&layer);  // Records 0, 1: fine.
        ForwardLabels(&layer);  // Record 2 is not a Datum.
      },
      "record '00000002' of LMDB database '.*db' is not a Datum");
}

TEST_F(DataLayerTest, SetUpErrorsNameTheProblem) {
  {
    DataLayer layer(Param(dir_.File("missing_lmdb"), 2));
    Status s = SetUpLayer(&layer);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(dir_.File("missing_lmdb")), std::string::npos) << s;
    EXPECT_NE(s.message().find("layer mnist"), std::string::npos) << s;
  }
  const std::string source = MakeDb("one", 1);
  {
    DataLayer layer(Param(source, 2), DataLayerOptions{1, 2});
    Status s = SetUpLayer(&layer);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("none for shard 1 of 2"), std::string::npos) << s;
  }
  {
    caffe::LayerParameter param = Param(source, 2);
    param.mutable_data_param()->set_backend(caffe::DataParameter::LEVELDB);
    DataLayer layer(param);
    Status s = SetUpLayer(&layer);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("LEVELDB is not supported"), std::string::npos) << s;
  }
  {
    caffe::LayerParameter param = Param(source, 2);
    param.mutable_transform_param()->set_crop_size(3);
    DataLayer layer(param);
    Status s = SetUpLayer(&layer);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("crop_size 3"), std::string::npos) << s;
  }
  {
    DataLayer layer(Param(source, 0));
    EXPECT_FALSE(SetUpLayer(&layer).ok());
  }
}

}  // namespace
}  // namespace data
}  // namespace nereus

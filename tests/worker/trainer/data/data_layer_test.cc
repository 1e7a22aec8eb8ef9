#include "worker/trainer/data/data_layer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/data_layer_fixture.h"
#include "tests/support/net_test_util.h"
#include "tests/support/process_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/image_io.h"
#include "worker/trainer/data/register_data_layers.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace data {
namespace {

// Record i: 1x2x2 bytes {i, i+1, i+2, i+3} (mod 256), label i.
float PixelOf(int record, int p) { return static_cast<float>((record + p) % 256); }

class DataLayerTest : public test::DataLayerFixture {
 protected:
  DataLayerTest() : DataLayerFixture(1234) {}

  std::string MakeDb(const std::string& name, int records, DbBackend backend = DbBackend::kLmdb) {
    const std::string path = dir_.File(name);
    auto db = Database::Open(backend, path, DbMode::kNew);
    EXPECT_TRUE(db.ok()) << db.status();
    DbWriter writer(db->get());
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

  // Overwrites (or adds) one record.
  static void Put(const std::string& source, const std::string& key, const std::string& value) {
    auto db = LmdbDatabase::Open(source, DbMode::kWrite);
    ASSERT_TRUE(db.ok()) << db.status();
    Status st = (*db)->PutBatch({{key, value}});
    ASSERT_TRUE(st.ok()) << st;
  }

  // A serialized 1 x height x width Datum of bytes 1 and label `label`.
  static std::string UniformDatum(int height, int width, int label) {
    caffe::Datum datum;
    datum.set_channels(1);
    datum.set_height(height);
    datum.set_width(width);
    datum.set_data(std::string(static_cast<size_t>(height) * width, '\x01'));
    datum.set_label(label);
    return datum.SerializeAsString();
  }

  // Replaces the one occurrence of `from` in the file by `to` (same size).
  static void PatchFile(const std::string& path, const std::string& from, const std::string& to) {
    ASSERT_EQ(from.size(), to.size());
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const size_t at = bytes.find(from);
    ASSERT_NE(at, std::string::npos) << "not in " << path;
    ASSERT_EQ(bytes.find(from, at + 1), std::string::npos) << "twice in " << path;
    bytes.replace(at, from.size(), to);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
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

  static caffe::LayerParameter LevelDbParam(const std::string& source, int batch_size) {
    caffe::LayerParameter param = Param(source, batch_size);
    param.mutable_data_param()->set_backend(caffe::DataParameter::LEVELDB);
    return param;
  }
};

TEST_F(DataLayerTest, ReadsRecordsInKeyOrderWithExactValuesAndWraps) {
  const std::string source = MakeDb("db", 10);
  caffe::LayerParameter param = Param(source, 4);
  param.mutable_transform_param()->set_scale(0.5f);
  DataLayer layer(param);
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(data_.shape(), (std::vector<int>{4, 1, 2, 2}));
  EXPECT_EQ(label_.shape(), (std::vector<int>{4}));
  EXPECT_EQ(layer.shard_size(), std::optional<std::size_t>(10));

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
  EXPECT_EQ(shard1.shard_size(), std::optional<std::size_t>(5));
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

// Bad records: each is reported by the Forward that needs it, after the
// good batches before it, naming the database, the record and what is wrong.
TEST_F(DataLayerTest, RecordThatIsNotADatumIsAForwardErrorNamingDatabaseAndRecord) {
  const std::string source = MakeDb("db", 6);
  Put(source, "00000002", std::string("\xff\xff\xff", 3));
  DataLayer layer(Param(source, 2));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(ForwardLabels(&layer), (std::vector<int>{0, 1}));
  EXPECT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(layer.forward_error().ToString(),
            "DATA_LOSS: layer mnist (Data): LMDB database '" + source +
                "', record 2 (key '00000002'): not a Datum (3 bytes that do not parse)");
  // The thread has stopped at that record: the next Forward says the same.
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(layer.forward_error().message(),
            "layer mnist (Data): LMDB database '" + source +
                "', record 2 (key '00000002'): not a Datum (3 bytes that do not parse)");
}

TEST_F(DataLayerTest, ByteCorruptedInTheFileIsAForwardErrorNamingTheRecord) {
  const std::string source = MakeDb("db", 8);
  // Record 5 on disk: channels 1, height 2, width 2, data {5, 6, 7, 8},
  // label 5. One bit of its height flipped in data.mdb: height 3.
  const std::string before("\x08\x01\x10\x02\x18\x02\x22\x04\x05\x06\x07\x08\x28\x05", 14);
  std::string after = before;
  after[3] = '\x03';
  PatchFile(source + "/data.mdb", before, after);
  DataLayer layer(Param(source, 5));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(ForwardLabels(&layer), (std::vector<int>{0, 1, 2, 3, 4}));
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(layer.forward_error().message(), "layer mnist (Data): LMDB database '" + source +
                                                 "', record 5 (key '00000005'): Datum of shape 1x3x2 holds 4 data "
                                                 "bytes, expected 6");
}

TEST_F(DataLayerTest, DatumOfAnotherShapeIsAForwardErrorNamingBothShapes) {
  const std::string source = MakeDb("db", 6);
  Put(source, "00000003", UniformDatum(3, 3, 3));
  // Shard 1 of 2 reads records 1, 3, 5: its second record is the bad one.
  DataLayer layer(Param(source, 1), DataLayerOptions{1, 2});
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(ForwardLabels(&layer), (std::vector<int>{1}));
  layer.Forward({}, {&data_, &label_});
  EXPECT_EQ(layer.forward_error().message(),
            "layer mnist (Data): LMDB database '" + source +
                "', record 3 (key '00000003'): Datum of shape 1x3x3; the first record read, whose shape every record "
                "must have, is 1x2x2");
}

TEST_F(DataLayerTest, BadFirstRecordIsASetUpError) {
  const std::string source = MakeDb("db", 3);
  Put(source, "00000000", "not a datum at all");
  DataLayer layer(Param(source, 2));
  EXPECT_EQ(SetUpLayer(&layer).ToString(),
            "INVALID_ARGUMENT: layer mnist (Data): LMDB database '" + source +
                "', record 0 (key '00000000'): not a Datum (18 bytes that do not parse)");
}

TEST_F(DataLayerTest, TruncatedDatabaseIsASetUpErrorNotASigbus) {
  // Enough records for many pages; the copy keeps its first 3 pages.
  const std::string source = MakeDb("db", 2000);
  const std::string data_file = source + "/data.mdb";
  const auto full = std::filesystem::file_size(data_file);
  ASSERT_GT(full, 4u * 4096);
  std::filesystem::resize_file(data_file, 3 * 4096);
  DataLayer layer(Param(source, 2));
  EXPECT_EQ(SetUpLayer(&layer).ToString(), "INVALID_ARGUMENT: layer mnist (Data): LMDB database '" + source +
                                               "' is truncated: " + data_file +
                                               " has 12288 bytes, but its pages run to byte " + std::to_string(full));
  std::filesystem::resize_file(data_file, 0);
  DataLayer empty(Param(source, 2));
  EXPECT_EQ(SetUpLayer(&empty).message(),
            "layer mnist (Data): LMDB database '" + source + "' is truncated: " + data_file + " is empty");
}

TEST_F(DataLayerTest, MissingSourceAndMissingMeanFileAreSetUpErrorsNamingThem) {
  DataLayer missing(Param(dir_.File("missing_lmdb"), 2));
  EXPECT_EQ(SetUpLayer(&missing).ToString(), "INVALID_ARGUMENT: layer mnist (Data): LMDB database '" + dir_.path() +
                                                 "/missing_lmdb' does not exist (no such directory)");
  caffe::LayerParameter param = Param(MakeDb("db", 2), 2);
  param.mutable_transform_param()->set_mean_file(dir_.File("mean.binaryproto"));
  DataLayer no_mean(param);
  EXPECT_EQ(SetUpLayer(&no_mean).ToString(),
            "INVALID_ARGUMENT: layer mnist (Data): transform_param: cannot open "
            "mean_file '" +
                dir_.path() + "/mean.binaryproto': No such file or directory");
}

// The Net hands the label range of the loss to the Data layer: a label out of
// range names its record; the loss never sees it, no later layer runs.
TEST_F(DataLayerTest, LabelOutOfRangeForTheLossIsAForwardErrorOfTheDataLayer) {
  const std::string source = MakeDb("db", 4);
  Put(source, "00000003", UniformDatum(2, 2, 12));
  auto net = test::TrainNetFromText(R"(
layer { name: "mnist" type: "Data" top: "data" top: "label" data_param { source: ")" +
                                        source + R"(" batch_size: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy" }
)",
                                    "net.prototxt");
  ASSERT_TRUE(net.ok()) << net.status();
  std::vector<int> after_forward;
  (*net)->add_after_forward([&](int layer) {
    after_forward.push_back(layer);
    return Status::OK();
  });
  ASSERT_TRUE((*net)->Forward().ok());  // Records 0 and 1.
  after_forward.clear();
  auto second = (*net)->Forward();  // Records 2 and 3.
  EXPECT_EQ(second.status().ToString(),
            "DATA_LOSS: layer mnist (Data): LMDB database '" + source +
                "', record 3 (key '00000003'): label 12 is out of range for layer loss (SoftmaxWithLoss), which takes "
                "labels 0 to 9");
  EXPECT_TRUE(after_forward.empty()) << "layer " << after_forward[0] << " ran after the bad batch";
}

// A bad record stops the solver in the iteration that reads it: every
// snapshot is of a whole iteration, none of the one that failed.
TEST_F(DataLayerTest, SolverStopsAtTheIterationOfTheBadRecordAndSnapshotsOnlyWholeIterations) {
  const std::string source = MakeDb("db", 12);
  Put(source, "00000007", std::string("\xff\xff\xff", 3));
  caffe::SolverParameter param;
  Status st = ParseSolverParameter(R"(
net_param {
  layer { name: "mnist" type: "Data" top: "data" top: "label" data_param { source: ")" +
                                       source + R"(" batch_size: 2 } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
          inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
}
base_lr: 0.1 lr_policy: "fixed" max_iter: 10 display: 0 random_seed: 3
snapshot: 1 snapshot_prefix: ")" + dir_.path() +
                                       R"(/snap" snapshot_after_train: false
)",
                                   "solver.prototxt", &param);
  ASSERT_TRUE(st.ok()) << st;
  auto solver = Solver::Create(param, DefaultLayerRegistry());
  ASSERT_TRUE(solver.ok()) << solver.status();
  EXPECT_EQ((*solver)->Solve().ToString(), "DATA_LOSS: iteration 3: layer mnist (Data): LMDB database '" + source +
                                               "', record 7 (key '00000007'): not a Datum (3 bytes that do not parse)");
  EXPECT_EQ((*solver)->iter(), 3);
  for (int i = 1; i <= 3; ++i)
    EXPECT_TRUE(std::filesystem::exists(dir_.File("snap_iter_") + std::to_string(i) + ".caffemodel")) << i;
  EXPECT_FALSE(std::filesystem::exists(dir_.File("snap_iter_4.caffemodel")));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("snap_iter_4.solverstate")));
}

TEST_F(DataLayerTest, SetUpErrorsNameTheProblem) {
  const std::string source = MakeDb("one", 1);
  {
    DataLayer layer(Param(source, 2), DataLayerOptions{1, 2});
    Status s = SetUpLayer(&layer);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("none for shard 1 of 2"), std::string::npos) << s;
  }
  {
    // backend names the other database than the source holds.
    caffe::LayerParameter param = Param(source, 2);
    param.mutable_data_param()->set_backend(caffe::DataParameter::LEVELDB);
    DataLayer layer(param);
    EXPECT_EQ(SetUpLayer(&layer).message(), "layer mnist (Data): data_param.backend is LEVELDB but '" + source +
                                                "' holds an LMDB database; set backend: LMDB or leave it out");
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

// LevelDB, Caffe's default backend: the same records give the same batches
// as from an LMDB, with or without data_param.backend, in shards too.
TEST_F(DataLayerTest, LevelDbGivesTheBatchesOfTheSameLmdb) {
  const std::string lmdb = MakeDb("lmdb", 9);
  const std::string leveldb = MakeDb("leveldb", 9, DbBackend::kLevelDb);
  for (const DataLayerOptions shard : {DataLayerOptions{0, 1}, DataLayerOptions{1, 2}}) {
    std::vector<std::vector<float>> batches[2];
    for (int b = 0; b < 2; ++b) {
      caffe::LayerParameter param = Param(b == 0 ? lmdb : leveldb, 3);
      if (b == 1) param.mutable_data_param()->set_backend(caffe::DataParameter::LEVELDB);
      if (b == 1 && shard.num_shards == 2) param.mutable_data_param()->clear_backend();  // Seen from its files.
      DataLayer layer(param, shard);
      ASSERT_TRUE(SetUpLayer(&layer).ok());
      // LMDB keeps a count; a LevelDB is not read whole to count it.
      EXPECT_EQ(layer.shard_size().has_value(), b == 0);
      for (int i = 0; i < 4; ++i) {
        batches[b].push_back(std::vector<float>{});
        layer.Forward({}, {&data_, &label_});
        ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
        batches[b].back().assign(data_.cpu_data(), data_.cpu_data() + data_.count());
        batches[b].back().insert(batches[b].back().end(), label_.cpu_data(), label_.cpu_data() + label_.count());
      }
    }
    EXPECT_EQ(batches[0], batches[1]) << shard.ShardName();
  }
  // Records 1, 3, 5, 7 for shard 1 of 2, then around again.
  DataLayer one(LevelDbParam(leveldb, 5), DataLayerOptions{1, 2});
  ASSERT_TRUE(SetUpLayer(&one).ok());
  EXPECT_EQ(ForwardLabels(&one), (std::vector<int>{1, 3, 5, 7, 1}));
}

TEST_F(DataLayerTest, LevelDbShardsAndResumedJobsCountOnlyWhenNeeded) {
  const std::string leveldb = MakeDb("leveldb", 3, DbBackend::kLevelDb);
  {
    DataLayer empty(LevelDbParam(leveldb, 1), DataLayerOptions{3, 4});
    EXPECT_EQ(SetUpLayer(&empty).message(),
              "layer mnist (Data): LevelDB database '" + leveldb + "' has 3 records, none for shard 3 of 4");
  }
  // A resumed job needs the shard's size: the LevelDB is counted.
  DataLayer resumed(LevelDbParam(leveldb, 1), DataLayerOptions{0, 1, /*skip_batches=*/4});
  ASSERT_TRUE(SetUpLayer(&resumed).ok());
  EXPECT_EQ(resumed.shard_size(), std::optional<std::size_t>(3));
  EXPECT_EQ(ForwardLabels(&resumed), (std::vector<int>{1}));
}

// LevelDB lets one handle open a database: a second one makes SetUp fail
// naming it (db_test and compute_image_mean_test hold one from another
// process).
TEST_F(DataLayerTest, ALockedLevelDbIsASetUpErrorNamingIt) {
  const std::string leveldb = MakeDb("leveldb", 3, DbBackend::kLevelDb);
  DataLayer first(LevelDbParam(leveldb, 1));
  ASSERT_TRUE(SetUpLayer(&first).ok());
  DataLayer second(LevelDbParam(leveldb, 1));
  const Status st = SetUpLayer(&second);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("layer mnist (Data): LevelDB database '" + leveldb + "' is locked: another process"),
            std::string::npos)
      << st;
}

TEST_F(DataLayerTest, SourceThatHoldsNoDatabaseIsNamed) {
  std::filesystem::create_directory(dir_.File("empty_dir"));
  caffe::LayerParameter param = Param(dir_.File("empty_dir"), 1);
  param.mutable_data_param()->clear_backend();
  DataLayer layer(param);
  EXPECT_EQ(SetUpLayer(&layer).message(), "layer mnist (Data): '" + dir_.File("empty_dir") +
                                              "' holds no database: neither an LMDB (data.mdb) nor a LevelDB "
                                              "(CURRENT)");
}

// An encoded record (a compressed image) that does not decode names its
// record; one that does decodes in the Data layer (see convert_imageset_test).
TEST_F(DataLayerTest, AnEncodedRecordThatDoesNotDecodeIsAForwardErrorNamingIt) {
  const std::string source = MakeDb("db", 4);
  caffe::Datum encoded;
  encoded.set_encoded(true);
  encoded.set_data("no image here");
  encoded.set_label(2);
  Put(source, "00000002", encoded.SerializeAsString());
  DataLayer layer(Param(source, 2));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(ForwardLabels(&layer), (std::vector<int>{0, 1}));
  layer.Forward({}, {&data_, &label_});
  const std::string why = ImageCodecsAvailable()
                              ? "the encoded image does not decode as an image (13 bytes in no format OpenCV reads)"
                              : "an encoded image needs image decoding, and this Nereus was built without OpenCV";
  EXPECT_NE(layer.forward_error().message().find("layer mnist (Data): LMDB database '" + source +
                                                 "', record 2 (key '00000002'): " + why),
            std::string::npos)
      << layer.forward_error();
}

}  // namespace
}  // namespace data
}  // namespace nereus

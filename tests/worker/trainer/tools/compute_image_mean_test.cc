// Runs nereus_compute_image_mean as a real process on databases made here:
// the mean of both backends, as a BlobProto the Data layer's mean_file
// takes; encoded records decoded; a LevelDB another process holds, and a bad
// record, are errors naming the database, with no output left behind.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/image_test_util.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/data/data_layer.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace data {
namespace {

// Record r: 2 x 2 x 3 bytes, byte p = 10 r + p; label r.
std::string RecordBytes(int r) {
  std::string bytes;
  for (int p = 0; p < 12; ++p) bytes.push_back(static_cast<char>(10 * r + p));
  return bytes;
}

class ComputeImageMeanTest : public ::testing::Test {
 protected:
  static constexpr int kRecords = 5;

  std::string Path(const std::string& name) const { return dir_.File(name); }
  void WriteDb(DbBackend backend, const std::string& name) {
    auto db = Database::Open(backend, Path(name), DbMode::kNew);
    ASSERT_TRUE(db.ok()) << db.status();
    std::vector<std::pair<std::string, std::string>> records;
    for (int r = 0; r < kRecords; ++r) {
      caffe::Datum datum;
      datum.set_channels(2);
      datum.set_height(2);
      datum.set_width(3);
      datum.set_data(RecordBytes(r));
      datum.set_label(r);
      records.emplace_back("0000000" + std::to_string(r), datum.SerializeAsString());
    }
    ASSERT_TRUE((*db)->PutBatch(records).ok());
  }
  // The tool run on the database `db` writing mean.binaryproto.
  test::ToolRun MeanOfDb() const {
    return test::RunTool("nereus_compute_image_mean", Path("db") + " " + Path("mean.binaryproto"));
  }
  // MeanOfDb fails, saying `message`, and writes nothing.
  void ExpectMeanOfDbFails(const std::string& message) const {
    test::ToolRun r = MeanOfDb();
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(Path("mean.binaryproto")));
  }
  caffe::BlobProto ReadMean(const std::string& name) const {
    caffe::BlobProto mean;
    const Status st = ReadProtoFromBinaryFile(Path(name), &mean);
    EXPECT_TRUE(st.ok()) << st;
    return mean;
  }

  test::TempDir dir_;
};

TEST_F(ComputeImageMeanTest, MeanOfEitherBackendAsABlobProtoAndPerChannel) {
  for (DbBackend backend : {DbBackend::kLmdb, DbBackend::kLevelDb}) {
    const std::string name = backend == DbBackend::kLmdb ? "lmdb" : "leveldb";
    SCOPED_TRACE(name);
    WriteDb(backend, name);
    // Without --backend the tool sees which it is; with it, it is checked.
    test::ToolRun r = test::RunTool("nereus_compute_image_mean", Path(name) + " " + Path(name + ".binaryproto"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const caffe::BlobProto mean = ReadMean(name + ".binaryproto");
    EXPECT_EQ(mean.num(), 1);
    EXPECT_EQ(mean.channels(), 2);
    EXPECT_EQ(mean.height(), 2);
    EXPECT_EQ(mean.width(), 3);
    ASSERT_EQ(mean.data_size(), 12);
    // Byte p averages 10 r + p over r = 0..4: 20 + p.
    for (int p = 0; p < 12; ++p) EXPECT_EQ(mean.data(p), 20.0f + p) << p;
    // Channel 0 is bytes 0..5 (mean 22.5), channel 1 bytes 6..11 (28.5).
    EXPECT_NE(r.output.find("mean_value channel [0]: 22.5\n"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("mean_value channel [1]: 28.5\n"), std::string::npos) << r.output;
    test::ToolRun flagged = test::RunTool("nereus_compute_image_mean", "--backend=" + name + " " + Path(name));
    EXPECT_EQ(flagged.exit_code, 0) << flagged.output;
  }
  EXPECT_FALSE(std::filesystem::exists(Path("lmdb.binaryproto.tmp")));
}

// The mean file is what transform_param.mean_file takes: the Data layer
// subtracts it.
TEST_F(ComputeImageMeanTest, TheDataLayerSubtractsTheMean) {
  WriteDb(DbBackend::kLmdb, "db");
  ASSERT_EQ(MeanOfDb().exit_code, 0);
  caffe::LayerParameter param;
  param.set_name("data");
  param.set_type("Data");
  param.mutable_data_param()->set_source(Path("db"));
  param.mutable_data_param()->set_batch_size(kRecords);
  param.mutable_transform_param()->set_mean_file(Path("mean.binaryproto"));
  DataLayer layer(param);
  std::mt19937 rng(1);
  layer.set_rng(&rng);
  Blob data, label;
  ASSERT_TRUE(layer.SetUp({}, {&data, &label}).ok());
  layer.Forward({}, {&data, &label});
  ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
  for (int r = 0; r < kRecords; ++r)
    for (int p = 0; p < 12; ++p) ASSERT_EQ(data.cpu_data()[r * 12 + p], 10.0f * r - 20.0f) << r << " " << p;
}

// LevelDB allows one handle at a time: while this process holds the
// database, the tool (another process) is refused, naming it, and writes
// nothing.
TEST_F(ComputeImageMeanTest, ALevelDbLockedByAnotherProcessIsAnErrorNamingIt) {
  WriteDb(DbBackend::kLevelDb, "db");
  {
    auto held = LevelDbDatabase::Open(Path("db"), DbMode::kRead);
    ASSERT_TRUE(held.ok()) << held.status();
    ExpectMeanOfDbFails("FAILED_PRECONDITION: LevelDB database '" + Path("db") +
                        "' is locked: another process (or another handle in this one) has it open");
  }
  EXPECT_EQ(MeanOfDb().exit_code, 0);
}

TEST_F(ComputeImageMeanTest, BadRecordsAndSourcesAreErrorsNamingThem) {
  WriteDb(DbBackend::kLmdb, "db");
  {
    auto db = LmdbDatabase::Open(Path("db"), DbMode::kWrite);
    ASSERT_TRUE(db.ok());
    caffe::Datum other;
    other.set_channels(1);
    other.set_height(2);
    other.set_width(2);
    other.set_data(std::string(4, '\0'));
    ASSERT_TRUE((*db)->PutBatch({{"00000003", other.SerializeAsString()}, {"00000004", "garbage"}}).ok());
  }
  ExpectMeanOfDbFails("LMDB database '" + Path("db") +
                      "', record 3 (key '00000003'): Datum of shape 1x2x2; the first record is 2x2x3");
  test::ToolRun missing = test::RunTool("nereus_compute_image_mean", Path("nowhere"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("database '" + Path("nowhere") + "' does not exist"), std::string::npos)
      << missing.output;
  test::ToolRun mismatch = test::RunTool("nereus_compute_image_mean", "--backend=leveldb " + Path("db"));
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_NE(mismatch.output.find("LevelDB database '" + Path("db") + "' does not exist (no CURRENT file in it)"),
            std::string::npos)
      << mismatch.output;
  EXPECT_EQ(test::RunTool("nereus_compute_image_mean", "").exit_code, 2);
}

// Encoded records (convert_imageset --encoded) are decoded as stored.
TEST_F(ComputeImageMeanTest, EncodedRecordsAreDecoded) {
  NEREUS_IMAGES_OR_SKIP();
  std::string list;
  for (int i = 0; i < 3; ++i) {
    test::WriteImage(Path(std::to_string(i) + ".png"),
                     test::MakeImage(2, 2, 3, [i](int h, int w, int c) { return 30 * i + 10 * c + h + w; }));
    list += std::to_string(i) + ".png " + std::to_string(i) + "\n";
  }
  test::WriteText(Path("list.txt"), list);
  ASSERT_EQ(
      test::RunTool("nereus_convert_imageset", "--encoded " + dir_.path() + "/ " + Path("list.txt") + " " + Path("db"))
          .exit_code,
      0);
  test::ToolRun r = MeanOfDb();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const caffe::BlobProto mean = ReadMean("mean.binaryproto");
  EXPECT_EQ(mean.channels(), 3);
  ASSERT_EQ(mean.data_size(), 12);
  // Planar: (c, h, w) averages 30 i + 10 c + h + w over i = 0..2.
  for (int c = 0; c < 3; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 2; ++w) EXPECT_EQ(mean.data((c * 2 + h) * 2 + w), 30.0f + 10 * c + h + w);
}

}  // namespace
}  // namespace data
}  // namespace nereus

#include "worker/trainer/data/db.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace data {
namespace {

class DbTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.File(name); }

  test::TempDir dir_;
};

std::string Key(int i) {
  char key[16];
  std::snprintf(key, sizeof(key), "%08d", i);
  return key;
}

caffe::Datum MakeDatum(int i) {
  caffe::Datum datum;
  datum.set_channels(1);
  datum.set_height(2);
  datum.set_width(3);
  std::string bytes;
  for (int j = 0; j < 6; ++j) bytes.push_back(static_cast<char>((i * 7 + j) & 0xff));
  datum.set_data(bytes);
  datum.set_label(i % 10);
  return datum;
}

TEST_F(DbTest, DatumRoundTripInKeyOrderWithWrapAround) {
  constexpr int kRecords = 25;
  {
    auto db = LmdbDatabase::Open(Path("db"), DbMode::kNew);
    ASSERT_TRUE(db.ok()) << db.status();
    LmdbWriter writer(db->get(), /*batch_size=*/4);
    // Written in reverse to check that reading follows key order.
    for (int i = kRecords - 1; i >= 0; --i) {
      ASSERT_TRUE(writer.Put(Key(i), MakeDatum(i).SerializeAsString()).ok());
    }
    ASSERT_TRUE(writer.Flush().ok());
    EXPECT_EQ(writer.committed(), static_cast<std::size_t>(kRecords));
  }
  std::unique_ptr<LmdbDatabase> db;
  std::unique_ptr<LmdbCursor> cursor = test::ReadLmdb(Path("db"), kRecords, &db);
  ASSERT_NE(cursor, nullptr);
  LmdbCursor& c = *cursor;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < kRecords; ++i) {
      ASSERT_TRUE(c.valid());
      EXPECT_EQ(c.key(), Key(i));
      caffe::Datum datum;
      ASSERT_TRUE(datum.ParseFromArray(c.value().data(), static_cast<int>(c.value().size())));
      const caffe::Datum want = MakeDatum(i);
      EXPECT_EQ(datum.label(), want.label());
      EXPECT_EQ(datum.data(), want.data());
      EXPECT_EQ(datum.height(), 2);
      EXPECT_EQ(datum.width(), 3);
      EXPECT_EQ(c.epoch(), static_cast<std::uint64_t>(pass));
      c.Next();
    }
  }
  EXPECT_EQ(c.epoch(), 2u);
  EXPECT_EQ(c.key(), Key(0));
  EXPECT_TRUE(c.status().ok());
}

TEST_F(DbTest, MapGrowsForLargeBatches) {
  auto db = LmdbDatabase::Open(Path("big"), DbMode::kNew);
  ASSERT_TRUE(db.ok()) << db.status();
  const std::size_t initial = (*db)->map_size();
  // 4 MiB of values in one transaction: more than the initial map holds.
  const std::string value(64 * 1024, 'x');
  std::vector<std::pair<std::string, std::string>> records;
  for (int i = 0; i < 64; ++i) records.emplace_back(Key(i), value);
  ASSERT_TRUE((*db)->PutBatch(records).ok());
  EXPECT_GT((*db)->map_size(), initial);
  auto count = (*db)->Count();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 64u);
}

TEST_F(DbTest, MissingDatabaseNamesThePath) {
  auto db = LmdbDatabase::Open(Path("nope"), DbMode::kRead);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kNotFound);
  EXPECT_NE(db.status().message().find(Path("nope")), std::string::npos) << db.status();
  EXPECT_NE(db.status().message().find("does not exist"), std::string::npos) << db.status();
}

TEST_F(DbTest, NewRefusesAnExistingDatabase) {
  {
    auto db = LmdbDatabase::Open(Path("db"), DbMode::kNew);
    ASSERT_TRUE(db.ok());
  }
  auto again = LmdbDatabase::Open(Path("db"), DbMode::kNew);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos) << again.status();
  // kWrite keeps and extends it.
  auto write = LmdbDatabase::Open(Path("db"), DbMode::kWrite);
  ASSERT_TRUE(write.ok()) << write.status();
}

TEST_F(DbTest, EmptyDatabaseGivesInvalidCursor) {
  { ASSERT_TRUE(LmdbDatabase::Open(Path("empty"), DbMode::kNew).ok()); }
  auto db = LmdbDatabase::Open(Path("empty"), DbMode::kRead);
  ASSERT_TRUE(db.ok()) << db.status();
  auto cursor = (*db)->NewCursor();
  ASSERT_TRUE(cursor.ok());
  EXPECT_FALSE((*cursor)->valid());
  (*cursor)->Next();
  EXPECT_FALSE((*cursor)->valid());
  EXPECT_TRUE((*cursor)->status().ok());
}

TEST_F(DbTest, ReadOnlyDatabaseRefusesWrites) {
  { ASSERT_TRUE(LmdbDatabase::Open(Path("ro"), DbMode::kNew).ok()); }
  auto db = LmdbDatabase::Open(Path("ro"), DbMode::kRead);
  ASSERT_TRUE(db.ok());
  Status s = (*db)->PutBatch({{"k", "v"}});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace data
}  // namespace nereus

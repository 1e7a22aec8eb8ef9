#include "worker/trainer/data/db.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

std::string Key(int i) {
  char key[16];
  std::snprintf(key, sizeof(key), "%08d", i);
  return key;
}

caffe::Datum MakeRecordDatum(int i) {
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

// The same contract on both backends.
class DbTest : public ::testing::TestWithParam<DbBackend> {
 protected:
  std::string Path(const std::string& name) const { return dir_.File(name); }
  StatusOr<std::unique_ptr<Database>> Open(const std::string& name, DbMode mode) const {
    return Database::Open(GetParam(), Path(name), mode);
  }
  std::string Name(const std::string& name) const {
    return std::string(DbBackendName(GetParam())) + " database '" + Path(name) + "'";
  }

  test::TempDir dir_;
};

TEST_P(DbTest, DatumRoundTripInKeyOrderWithWrapAround) {
  constexpr int kRecords = 25;
  {
    auto db = Open("db", DbMode::kNew);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_EQ((*db)->backend(), GetParam());
    DbWriter writer(db->get(), /*batch_size=*/4);
    // Written in reverse to check that reading follows key order.
    for (int i = kRecords - 1; i >= 0; --i) {
      ASSERT_TRUE(writer.Put(Key(i), MakeRecordDatum(i).SerializeAsString()).ok());
    }
    ASSERT_TRUE(writer.Flush().ok());
    EXPECT_EQ(writer.committed(), static_cast<std::size_t>(kRecords));
  }
  auto db = Open("db", DbMode::kRead);
  ASSERT_TRUE(db.ok()) << db.status();
  auto count = (*db)->Count();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, static_cast<std::size_t>(kRecords));
  auto cursor = (*db)->NewCursor();
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  DbCursor& c = **cursor;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < kRecords; ++i) {
      ASSERT_TRUE(c.valid());
      EXPECT_EQ(c.key(), Key(i));
      caffe::Datum datum;
      ASSERT_TRUE(datum.ParseFromArray(c.value().data(), static_cast<int>(c.value().size())));
      const caffe::Datum want = MakeRecordDatum(i);
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

TEST_P(DbTest, MissingDatabaseNamesThePath) {
  auto db = Open("nope", DbMode::kRead);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(db.status().message(), Name("nope") + " does not exist (no such directory)");
}

TEST_P(DbTest, NewRefusesAnExistingDatabase) {
  { ASSERT_TRUE(Open("db", DbMode::kNew).ok()); }
  auto again = Open("db", DbMode::kNew);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().message(), Name("db") + " already exists; remove it or choose another path");
  // kWrite keeps and extends it.
  auto write = Open("db", DbMode::kWrite);
  ASSERT_TRUE(write.ok()) << write.status();
}

TEST_P(DbTest, EmptyDatabaseGivesInvalidCursor) {
  { ASSERT_TRUE(Open("empty", DbMode::kNew).ok()); }
  auto db = Open("empty", DbMode::kRead);
  ASSERT_TRUE(db.ok()) << db.status();
  auto cursor = (*db)->NewCursor();
  ASSERT_TRUE(cursor.ok());
  EXPECT_FALSE((*cursor)->valid());
  (*cursor)->Next();
  EXPECT_FALSE((*cursor)->valid());
  EXPECT_TRUE((*cursor)->status().ok());
  EXPECT_EQ(*(*db)->Count(), 0u);
}

TEST_P(DbTest, ReadOnlyDatabaseRefusesWrites) {
  { ASSERT_TRUE(Open("ro", DbMode::kNew).ok()); }
  auto db = Open("ro", DbMode::kRead);
  ASSERT_TRUE(db.ok());
  Status s = (*db)->PutBatch({{"k", "v"}});
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), Name("ro") + " was opened read-only");
}

TEST_P(DbTest, DetectsItsBackendFromItsFiles) {
  { ASSERT_TRUE(Open("db", DbMode::kNew).ok()); }
  auto backend = DetectDbBackend(Path("db"));
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ(*backend, GetParam());
  std::filesystem::create_directory(Path("plain"));
  EXPECT_EQ(DetectDbBackend(Path("plain")).status().message(),
            "'" + Path("plain") + "' holds no database: neither an LMDB (data.mdb) nor a LevelDB (CURRENT)");
}

// NewDatabaseFile: the records appear under the name only when committed.
TEST_P(DbTest, NewDatabaseFileRenamesOnlyWhenCommitted) {
  {
    auto file = NewDatabaseFile::Create(GetParam(), Path("out"));
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->db()->PutBatch({{"a", "1"}}).ok());
    EXPECT_FALSE(std::filesystem::exists(Path("out")));
    // Destroyed uncommitted: nothing at the name, no temporary left.
  }
  EXPECT_FALSE(std::filesystem::exists(Path("out")));
  EXPECT_TRUE(std::filesystem::is_empty(dir_.path()));
  {
    auto file = NewDatabaseFile::Create(GetParam(), Path("out"));
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->db()->PutBatch({{"a", "1"}, {"b", "2"}}).ok());
    ASSERT_TRUE((*file)->Commit().ok());
  }
  auto db = Open("out", DbMode::kRead);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*(*db)->Count(), 2u);
  auto again = NewDatabaseFile::Create(GetParam(), Path("out"));
  EXPECT_EQ(again.status().message(), Name("out") + ": the path already exists; remove it or choose another path");
}

INSTANTIATE_TEST_SUITE_P(Backends, DbTest, ::testing::Values(DbBackend::kLmdb, DbBackend::kLevelDb),
                         [](const ::testing::TestParamInfo<DbBackend>& info) {
                           return std::string(DbBackendName(info.param));
                         });

TEST(LmdbTest, MapGrowsForLargeBatches) {
  test::TempDir dir;
  auto db = LmdbDatabase::Open(dir.File("big"), DbMode::kNew);
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

// LevelDB locks its directory: a second handle, in this process or another,
// is refused while the first is open, with an error naming the database.
TEST(LevelDbTest, LockedDatabaseIsRefusedNamingIt) {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto db = LevelDbDatabase::Open(path, DbMode::kNew);
    ASSERT_TRUE(db.ok()) << db.status();
    auto second = LevelDbDatabase::Open(path, DbMode::kRead);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("LevelDB database '" + path + "' is locked"), std::string::npos)
        << second.status();
  }
  // Another process holds it: a child opens it, says so through a pipe and
  // waits to be killed.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    auto db = LevelDbDatabase::Open(path, DbMode::kRead);
    const char byte = db.ok() ? 'y' : 'n';
    if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(byte, 'y') << "the child could not open the database";
  auto locked = LevelDbDatabase::Open(path, DbMode::kRead);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_FALSE(locked.ok());
  EXPECT_EQ(locked.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(locked.status().message().find("LevelDB database '" + path + "' is locked: another process"),
            std::string::npos)
      << locked.status();
  // The lock went with the process.
  auto after = LevelDbDatabase::Open(path, DbMode::kRead);
  EXPECT_TRUE(after.ok()) << after.status();
}

}  // namespace
}  // namespace data
}  // namespace nereus

// The record databases the data layers read and the data tools write, in
// Caffe's two on-disk formats: LMDB (a directory holding data.mdb and
// lock.mdb) and LevelDB (a directory of CURRENT, LOCK, MANIFEST-* and *.ldb
// files; Caffe's default backend). Keys sort bytewise in both, so one set of
// records reads back in the same order from either; values are usually
// serialized Datum.
//
//   ASSIGN_OR_RETURN(auto db, Database::Open(DbBackend::kLevelDb, path, DbMode::kNew));
//   DbWriter writer(db.get());
//   RETURN_IF_ERROR(writer.Put("00000000", bytes));
//   RETURN_IF_ERROR(writer.Flush());
//
//   ASSIGN_OR_RETURN(auto cursor, db->NewCursor());
//   for (; cursor->valid(); cursor->Next()) Use(cursor->key(), cursor->value());
//
// LevelDB lets one handle at a time open a database: a second Open, from
// this process or another, fails (FAILED_PRECONDITION, naming the path)
// while the first is open. LMDB has no such limit.
//
// Thread-safety: Count() and NewCursor() may be called from any thread. Each
// DbCursor and DbWriter is used by one thread at a time (it may be created
// on one thread and used on another). Writing (PutBatch, DbWriter) happens
// on one thread with no cursor of the same database alive in this process
// (growing an LMDB map requires that no transaction is open). Cursors and
// writers must be destroyed before their database.
#ifndef NEREUS_WORKER_TRAINER_DATA_DB_H_
#define NEREUS_WORKER_TRAINER_DATA_DB_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"

struct MDB_env;
struct MDB_txn;
struct MDB_cursor;
namespace leveldb {
class DB;
class Iterator;
}  // namespace leveldb

namespace nereus {
namespace data {

enum class DbMode {
  kRead,   // The database must exist; opened read-only (LevelDB: not written).
  kWrite,  // Opened for writing; created when missing, existing records kept.
  kNew,    // Created; an error when the directory already holds a database.
};

enum class DbBackend { kLmdb, kLevelDb };

// "LMDB" or "LevelDB", as error messages name them.
const char* DbBackendName(DbBackend backend);
// The tools' --backend values, as Caffe's: "lmdb" or "leveldb".
StatusOr<DbBackend> ParseDbBackend(const std::string& name);
// Which database the directory `path` holds, from its files: data.mdb for
// LMDB, CURRENT for LevelDB. NOT_FOUND naming the path when it holds
// neither (or does not exist).
StatusOr<DbBackend> DetectDbBackend(const std::string& path);

// Iterates the records in key order. Next() past the last record wraps around
// to the first and counts an epoch, as a data layer that reads forever needs.
class DbCursor {
 public:
  virtual ~DbCursor() = default;
  DbCursor(const DbCursor&) = delete;
  DbCursor& operator=(const DbCursor&) = delete;

  // False when the database is empty or a read error happened (see status()).
  bool valid() const { return valid_; }
  // The current record; only while valid(). The views stay good until the next
  // move of the cursor.
  std::string_view key() const;
  std::string_view value() const;

  void SeekToFirst();
  // Moves to the next record, or to the first one after the last (then
  // epoch() grows by one).
  void Next();
  // How many times Next() wrapped around.
  std::uint64_t epoch() const { return epoch_; }
  // OK unless the backend failed; errors name the database path.
  const Status& status() const { return status_; }

 protected:
  explicit DbCursor(std::string path) : path_(std::move(path)) {}
  // Backends: move to the first / the next record, then call Found (a
  // record), End (no more) or Fail (an error).
  virtual void First() = 0;
  virtual void Step() = 0;
  void Found(std::string_view key, std::string_view value);
  void End();
  void Fail(Status status);

  const std::string path_;

 private:
  bool valid_ = false;
  std::string_view key_;
  std::string_view value_;
  std::uint64_t epoch_ = 0;
  Status status_;
};

class Database {
 public:
  // Opens the `backend` database at `path`. Errors name the backend and the
  // path: NOT_FOUND when a kRead database does not exist, INVALID_ARGUMENT
  // when kNew finds one already, DATA_LOSS when an LMDB's data.mdb is shorter
  // than the pages its header names (a truncated copy: LMDB itself would die
  // of SIGBUS reading them) or a LevelDB is corrupt, FAILED_PRECONDITION when
  // a LevelDB is open elsewhere (its LOCK).
  static StatusOr<std::unique_ptr<Database>> Open(DbBackend backend, const std::string& path, DbMode mode);

  virtual ~Database() = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& path() const { return path_; }
  DbMode mode() const { return mode_; }
  virtual DbBackend backend() const = 0;
  // "LMDB database '<path>'".
  std::string Name() const;

  // Number of records. LMDB keeps the count; LevelDB does not, so this
  // reads every record (the whole database) once.
  virtual StatusOr<std::size_t> Count() const = 0;

  // A cursor positioned on the first record (invalid when the database is
  // empty). It sees a snapshot of the database taken now.
  virtual StatusOr<std::unique_ptr<DbCursor>> NewCursor() const = 0;

  // Writes all (key, value) pairs at once (one transaction, one LevelDB write
  // batch). Not for kRead databases. Callers that write many records use
  // DbWriter, which batches.
  virtual Status PutBatch(const std::vector<std::pair<std::string, std::string>>& records) = 0;

 protected:
  Database(std::string path, DbMode mode) : path_(std::move(path)), mode_(mode) {}
  Status RefuseReadOnly() const;

  const std::string path_;
  const DbMode mode_;
};

class LmdbDatabase : public Database {
 public:
  static StatusOr<std::unique_ptr<LmdbDatabase>> Open(const std::string& path, DbMode mode);
  ~LmdbDatabase() override;

  DbBackend backend() const override { return DbBackend::kLmdb; }
  StatusOr<std::size_t> Count() const override;
  StatusOr<std::unique_ptr<DbCursor>> NewCursor() const override;
  // Doubles the map size and retries whenever LMDB reports the map full.
  Status PutBatch(const std::vector<std::pair<std::string, std::string>>& records) override;

  // Current map size in bytes (grows as PutBatch needs it).
  std::size_t map_size() const { return map_size_; }

 private:
  LmdbDatabase(std::string path, DbMode mode, MDB_env* env, unsigned dbi, std::size_t map_size)
      : Database(std::move(path), mode), env_(env), dbi_(dbi), map_size_(map_size) {}
  Status Error(const char* what, int rc) const;

  MDB_env* env_;
  unsigned dbi_;  // MDB_dbi
  std::size_t map_size_;
};

class LevelDbDatabase : public Database {
 public:
  static StatusOr<std::unique_ptr<LevelDbDatabase>> Open(const std::string& path, DbMode mode);
  ~LevelDbDatabase() override;

  DbBackend backend() const override { return DbBackend::kLevelDb; }
  StatusOr<std::size_t> Count() const override;
  StatusOr<std::unique_ptr<DbCursor>> NewCursor() const override;
  Status PutBatch(const std::vector<std::pair<std::string, std::string>>& records) override;

 private:
  LevelDbDatabase(std::string path, DbMode mode, leveldb::DB* db) : Database(std::move(path), mode), db_(db) {}

  leveldb::DB* db_;
};

// Buffers puts and commits them `batch_size` at a time (Caffe's convert tools
// commit every 1000). The destructor flushes what is left and logs a failure;
// callers that must know call Flush() themselves.
class DbWriter {
 public:
  explicit DbWriter(Database* db, std::size_t batch_size = 1000);
  ~DbWriter();
  DbWriter(const DbWriter&) = delete;
  DbWriter& operator=(const DbWriter&) = delete;

  Status Put(std::string key, std::string value);
  Status Flush();
  // Records committed so far.
  std::size_t committed() const { return committed_; }

 private:
  Database* const db_;
  const std::size_t batch_size_;
  std::vector<std::pair<std::string, std::string>> pending_;
  std::size_t committed_ = 0;
};

// An output database the tools write under a temporary name beside `path`
// and rename to `path` only once every record is in (Commit), so a failed
// run leaves nothing at `path`: the destructor removes an uncommitted one.
class NewDatabaseFile {
 public:
  // INVALID_ARGUMENT naming `path` when something is there already.
  static StatusOr<std::unique_ptr<NewDatabaseFile>> Create(DbBackend backend, const std::string& path);
  ~NewDatabaseFile();
  NewDatabaseFile(const NewDatabaseFile&) = delete;
  NewDatabaseFile& operator=(const NewDatabaseFile&) = delete;

  Database* db() const { return db_.get(); }
  // Closes the database and renames it to its path.
  Status Commit();

 private:
  NewDatabaseFile(std::string path, std::string temporary, std::unique_ptr<Database> db)
      : path_(std::move(path)), temporary_(std::move(temporary)), db_(std::move(db)) {}

  const std::string path_;
  const std::string temporary_;
  std::unique_ptr<Database> db_;
  bool committed_ = false;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DB_H_

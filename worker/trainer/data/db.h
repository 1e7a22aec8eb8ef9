// A small wrapper around LMDB for the record databases the Data layer reads and
// nereus_convert_mnist writes (Caffe's own on-disk format: one directory holding
// data.mdb and lock.mdb, keys sorted bytewise, values usually serialized Datum).
//
//   ASSIGN_OR_RETURN(auto db, LmdbDatabase::Open(path, DbMode::kNew));
//   LmdbWriter writer(db.get());
//   RETURN_IF_ERROR(writer.Put("00000000", bytes));
//   RETURN_IF_ERROR(writer.Flush());
//
//   ASSIGN_OR_RETURN(auto cursor, db->NewCursor());
//   for (; cursor->valid(); cursor->Next()) Use(cursor->key(), cursor->value());
//
// Thread-safety: Count() and NewCursor() may be called from any thread. Each
// LmdbCursor and LmdbWriter is used by one thread at a time (it may be created
// on one thread and used on another). Writing (PutBatch, LmdbWriter) happens
// on one thread with no cursor of the same database alive in this process,
// because growing the map requires that no transaction is open. Cursors and
// writers must be destroyed before their database.
#ifndef NEREUS_WORKER_TRAINER_DATA_DB_H_
#define NEREUS_WORKER_TRAINER_DATA_DB_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/base/status.h"

struct MDB_env;
struct MDB_txn;
struct MDB_cursor;

namespace nereus {
namespace data {

enum class DbMode {
  kRead,   // The database must exist; opened read-only.
  kWrite,  // Opened for writing; created when missing, existing records kept.
  kNew,    // Created; an error when the directory already holds a database.
};

class LmdbCursor;

class LmdbDatabase {
 public:
  // Opens the LMDB directory at `path`. Errors name the path: NOT_FOUND when a
  // kRead database does not exist, DATA_LOSS when its data.mdb is shorter than
  // the pages its header names (a truncated copy: LMDB itself would die of
  // SIGBUS reading them), INVALID_ARGUMENT when kNew finds one already.
  static StatusOr<std::unique_ptr<LmdbDatabase>> Open(const std::string& path, DbMode mode);

  ~LmdbDatabase();
  LmdbDatabase(const LmdbDatabase&) = delete;
  LmdbDatabase& operator=(const LmdbDatabase&) = delete;

  const std::string& path() const { return path_; }
  DbMode mode() const { return mode_; }

  // Number of records (a fresh read transaction).
  StatusOr<std::size_t> Count() const;

  // A cursor positioned on the first record (invalid when the database is
  // empty). It sees a snapshot of the database taken now.
  StatusOr<std::unique_ptr<LmdbCursor>> NewCursor() const;

  // Writes all (key, value) pairs in one transaction, doubling the map size
  // and retrying whenever LMDB reports the map full. Not for kRead databases.
  // Callers that write many records use LmdbWriter, which batches.
  Status PutBatch(const std::vector<std::pair<std::string, std::string>>& records);

  // Current map size in bytes (grows as PutBatch needs it).
  std::size_t map_size() const { return map_size_; }

 private:
  LmdbDatabase(std::string path, DbMode mode, MDB_env* env, unsigned dbi, std::size_t map_size)
      : path_(std::move(path)), mode_(mode), env_(env), dbi_(dbi), map_size_(map_size) {}

  Status Error(const char* what, int rc) const;

  const std::string path_;
  const DbMode mode_;
  MDB_env* env_;
  unsigned dbi_;  // MDB_dbi
  std::size_t map_size_;
};

// Iterates the records in key order. Next() past the last record wraps around
// to the first and counts an epoch, as a data layer that reads forever needs.
class LmdbCursor {
 public:
  ~LmdbCursor();
  LmdbCursor(const LmdbCursor&) = delete;
  LmdbCursor& operator=(const LmdbCursor&) = delete;

  // False when the database is empty or an LMDB error happened (see status()).
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
  // OK unless LMDB failed; errors name the database path.
  const Status& status() const { return status_; }

 private:
  friend class LmdbDatabase;
  LmdbCursor(std::string path, MDB_txn* txn, MDB_cursor* cursor) : path_(std::move(path)), txn_(txn), cursor_(cursor) {}
  void Get(int op);

  const std::string path_;
  MDB_txn* txn_;
  MDB_cursor* cursor_;
  bool valid_ = false;
  std::string_view key_;
  std::string_view value_;
  std::uint64_t epoch_ = 0;
  Status status_;
};

// Buffers puts and commits them `batch_size` at a time (Caffe's convert tools
// commit every 1000). The destructor flushes what is left and logs a failure;
// callers that must know call Flush() themselves.
class LmdbWriter {
 public:
  explicit LmdbWriter(LmdbDatabase* db, std::size_t batch_size = 1000);
  ~LmdbWriter();
  LmdbWriter(const LmdbWriter&) = delete;
  LmdbWriter& operator=(const LmdbWriter&) = delete;

  Status Put(std::string key, std::string value);
  Status Flush();
  // Records committed so far.
  std::size_t committed() const { return committed_; }

 private:
  LmdbDatabase* const db_;
  const std::size_t batch_size_;
  std::vector<std::pair<std::string, std::string>> pending_;
  std::size_t committed_ = 0;
};

}  // namespace data
}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_DATA_DB_H_

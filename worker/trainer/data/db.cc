#include "worker/trainer/data/db.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace nereus {
namespace data {
namespace {

// A fresh writable map starts small and doubles when full: the file on disk
// only grows as records are written, and tests exercise the growth path.
constexpr std::size_t kInitialMapSize = std::size_t{1} << 20;

std::string LmdbMessage(int rc) { return mdb_strerror(rc); }

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Size of a file in bytes; -1 when it cannot be stat'ed.
long long FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

// LMDB maps data.mdb and reads its pages in place: a page past the end of a
// truncated file is a SIGBUS, not an error code. The newest meta page names
// the last page in use; the file must reach its end.
Status CheckNotTruncated(MDB_env* env, const std::string& path, const std::string& data_file) {
  MDB_envinfo info;
  MDB_stat stat;
  int rc = mdb_env_info(env, &info);
  if (rc == 0) rc = mdb_env_stat(env, &stat);
  if (rc != 0) return DataLossError("cannot read the header of LMDB database '" + path + "': " + LmdbMessage(rc));
  const long long need = (static_cast<long long>(info.me_last_pgno) + 1) * static_cast<long long>(stat.ms_psize);
  const long long have = FileSize(data_file);
  if (have < need) {
    return DataLossError("LMDB database '" + path + "' is truncated: " + data_file + " has " + std::to_string(have) +
                         " bytes, but its pages run to byte " + std::to_string(need));
  }
  return Status::OK();
}

class LmdbCursor : public DbCursor {
 public:
  LmdbCursor(std::string path, MDB_txn* txn, MDB_cursor* cursor)
      : DbCursor(std::move(path)), txn_(txn), cursor_(cursor) {}
  ~LmdbCursor() override {
    mdb_cursor_close(cursor_);
    mdb_txn_abort(txn_);
  }

 protected:
  void First() override { Get(MDB_FIRST); }
  void Step() override { Get(MDB_NEXT); }

 private:
  void Get(MDB_cursor_op op) {
    MDB_val k, v;
    const int rc = mdb_cursor_get(cursor_, &k, &v, op);
    if (rc == 0) {
      Found(std::string_view(static_cast<const char*>(k.mv_data), k.mv_size),
            std::string_view(static_cast<const char*>(v.mv_data), v.mv_size));
    } else if (rc == MDB_NOTFOUND) {
      End();
    } else {
      Fail(InternalError("mdb_cursor_get on LMDB database '" + path_ + "': " + LmdbMessage(rc)));
    }
  }

  MDB_txn* txn_;
  MDB_cursor* cursor_;
};

// LevelDB's errors, named by database.
Status LevelDbError(const std::string& path, const char* what, const leveldb::Status& s) {
  const std::string message = "LevelDB database '" + path + "': " + what + ": " + s.ToString();
  if (s.IsCorruption()) return DataLossError(message);
  if (s.IsNotFound()) return NotFoundError(message);
  return InternalError(message);
}

class LevelDbCursor : public DbCursor {
 public:
  LevelDbCursor(std::string path, leveldb::Iterator* iter) : DbCursor(std::move(path)), iter_(iter) {}

 protected:
  void First() override {
    iter_->SeekToFirst();
    Settle();
  }
  void Step() override {
    iter_->Next();
    Settle();
  }

 private:
  void Settle() {
    if (iter_->Valid()) {
      Found(std::string_view(iter_->key().data(), iter_->key().size()),
            std::string_view(iter_->value().data(), iter_->value().size()));
    } else if (iter_->status().ok()) {
      End();
    } else {
      Fail(LevelDbError(path_, "reading", iter_->status()));
    }
  }

  std::unique_ptr<leveldb::Iterator> iter_;
};

// Caffe's LevelDB options (util/db_leveldb.cpp).
leveldb::Options CaffeLevelDbOptions() {
  leveldb::Options options;
  options.block_size = 65536;
  options.write_buffer_size = 268435456;
  options.max_open_files = 100;
  return options;
}

}  // namespace

const char* DbBackendName(DbBackend backend) { return backend == DbBackend::kLmdb ? "LMDB" : "LevelDB"; }

StatusOr<DbBackend> ParseDbBackend(const std::string& name) {
  if (name == "lmdb") return DbBackend::kLmdb;
  if (name == "leveldb") return DbBackend::kLevelDb;
  return InvalidArgumentError("unknown database backend '" + name + "'; use lmdb or leveldb");
}

StatusOr<DbBackend> DetectDbBackend(const std::string& path) {
  if (!IsDirectory(path)) return NotFoundError("database '" + path + "' does not exist (no such directory)");
  if (Exists(path + "/data.mdb")) return DbBackend::kLmdb;
  if (Exists(path + "/CURRENT")) return DbBackend::kLevelDb;
  return NotFoundError("'" + path + "' holds no database: neither an LMDB (data.mdb) nor a LevelDB (CURRENT)");
}

void DbCursor::Found(std::string_view key, std::string_view value) {
  valid_ = true;
  key_ = key;
  value_ = value;
}

void DbCursor::End() {
  valid_ = false;
  key_ = value_ = std::string_view();
}

void DbCursor::Fail(Status status) {
  End();
  status_ = std::move(status);
}

std::string_view DbCursor::key() const {
  CHECK(valid_) << "key() on an invalid cursor of '" << path_ << "'";
  return key_;
}

std::string_view DbCursor::value() const {
  CHECK(valid_) << "value() on an invalid cursor of '" << path_ << "'";
  return value_;
}

void DbCursor::SeekToFirst() {
  if (!status_.ok()) return;
  First();
}

void DbCursor::Next() {
  if (!status_.ok()) return;
  if (!valid_) {  // An empty database: nothing to step from (LevelDB asserts).
    First();
    return;
  }
  Step();
  if (!valid_ && status_.ok()) {
    First();
    if (valid_) ++epoch_;
  }
}

StatusOr<std::unique_ptr<Database>> Database::Open(DbBackend backend, const std::string& path, DbMode mode) {
  if (backend == DbBackend::kLmdb) {
    ASSIGN_OR_RETURN(auto db, LmdbDatabase::Open(path, mode));
    return std::unique_ptr<Database>(std::move(db));
  }
  ASSIGN_OR_RETURN(auto db, LevelDbDatabase::Open(path, mode));
  return std::unique_ptr<Database>(std::move(db));
}

std::string Database::Name() const { return std::string(DbBackendName(backend())) + " database '" + path_ + "'"; }

Status Database::RefuseReadOnly() const { return FailedPreconditionError(Name() + " was opened read-only"); }

StatusOr<std::unique_ptr<LmdbDatabase>> LmdbDatabase::Open(const std::string& path, DbMode mode) {
  const std::string data_file = path + "/data.mdb";
  switch (mode) {
    case DbMode::kRead:
      if (!IsDirectory(path)) {
        return NotFoundError("LMDB database '" + path + "' does not exist (no such directory)");
      }
      if (!Exists(data_file)) {
        return NotFoundError("LMDB database '" + path + "' does not exist (no data.mdb in it)");
      }
      if (FileSize(data_file) == 0) {
        return DataLossError("LMDB database '" + path + "' is truncated: " + data_file + " is empty");
      }
      break;
    case DbMode::kNew:
      if (Exists(data_file)) {
        return InvalidArgumentError("LMDB database '" + path + "' already exists; remove it or choose another path");
      }
      [[fallthrough]];
    case DbMode::kWrite:
      if (!IsDirectory(path)) {
        if (Exists(path)) {
          return InvalidArgumentError("cannot create LMDB database '" + path +
                                      "': the path exists and is not a directory");
        }
        if (::mkdir(path.c_str(), 0755) != 0) {
          return InvalidArgumentError("cannot create LMDB directory '" + path + "': " + std::strerror(errno));
        }
      }
      break;
  }

  MDB_env* env = nullptr;
  int rc = mdb_env_create(&env);
  if (rc != 0) return InternalError("mdb_env_create for '" + path + "': " + LmdbMessage(rc));
  const bool read_only = mode == DbMode::kRead;
  if (!read_only) {
    rc = mdb_env_set_mapsize(env, kInitialMapSize);
    if (rc != 0) {
      mdb_env_close(env);
      return InternalError("mdb_env_set_mapsize for '" + path + "': " + LmdbMessage(rc));
    }
  }
  // MDB_NOTLS: a read transaction belongs to its cursor, not to the thread
  // that opened it, so a cursor may be made on one thread and used on another.
  const unsigned flags = read_only ? (MDB_RDONLY | MDB_NOTLS) : MDB_NOTLS;
  rc = mdb_env_open(env, path.c_str(), flags, 0664);
  if (rc != 0) {
    mdb_env_close(env);
    return InvalidArgumentError("cannot open LMDB database '" + path + "': " + LmdbMessage(rc));
  }
  if (read_only) {
    Status whole = CheckNotTruncated(env, path, data_file);
    if (!whole.ok()) {
      mdb_env_close(env);
      return whole;
    }
  }
  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(env, nullptr, read_only ? MDB_RDONLY : 0, &txn);
  MDB_dbi dbi = 0;
  if (rc == 0) rc = mdb_dbi_open(txn, nullptr, read_only ? 0 : MDB_CREATE, &dbi);
  if (rc == 0) {
    rc = mdb_txn_commit(txn);
  } else if (txn != nullptr) {
    mdb_txn_abort(txn);
  }
  if (rc != 0) {
    mdb_env_close(env);
    return InvalidArgumentError("cannot open the main table of LMDB database '" + path + "': " + LmdbMessage(rc));
  }
  MDB_envinfo info;
  mdb_env_info(env, &info);
  return std::unique_ptr<LmdbDatabase>(
      new LmdbDatabase(path, mode, env, dbi, static_cast<std::size_t>(info.me_mapsize)));
}

LmdbDatabase::~LmdbDatabase() {
  mdb_dbi_close(env_, dbi_);
  mdb_env_close(env_);
}

Status LmdbDatabase::Error(const char* what, int rc) const {
  return InternalError(std::string(what) + " on LMDB database '" + path_ + "': " + LmdbMessage(rc));
}

StatusOr<std::size_t> LmdbDatabase::Count() const {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) return Error("mdb_txn_begin", rc);
  MDB_stat stat;
  rc = mdb_stat(txn, dbi_, &stat);
  mdb_txn_abort(txn);
  if (rc != 0) return Error("mdb_stat", rc);
  return static_cast<std::size_t>(stat.ms_entries);
}

StatusOr<std::unique_ptr<DbCursor>> LmdbDatabase::NewCursor() const {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) return Error("mdb_txn_begin", rc);
  MDB_cursor* cursor = nullptr;
  rc = mdb_cursor_open(txn, dbi_, &cursor);
  if (rc != 0) {
    mdb_txn_abort(txn);
    return Error("mdb_cursor_open", rc);
  }
  std::unique_ptr<DbCursor> result(new LmdbCursor(path_, txn, cursor));
  result->SeekToFirst();
  if (!result->status().ok()) return result->status();
  return result;
}

Status LmdbDatabase::PutBatch(const std::vector<std::pair<std::string, std::string>>& records) {
  if (mode_ == DbMode::kRead) return RefuseReadOnly();
  for (;;) {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc != 0) return Error("mdb_txn_begin", rc);
    for (const auto& [key, value] : records) {
      MDB_val k{key.size(), const_cast<char*>(key.data())};
      MDB_val v{value.size(), const_cast<char*>(value.data())};
      rc = mdb_put(txn, dbi_, &k, &v, 0);
      if (rc != 0) break;
    }
    if (rc == 0) {
      rc = mdb_txn_commit(txn);  // Frees txn whatever the result.
    } else {
      mdb_txn_abort(txn);
    }
    if (rc == 0) return Status::OK();
    if (rc != MDB_MAP_FULL) return Error("mdb_put/mdb_txn_commit", rc);
    // Grow and retry the whole batch; no transaction of ours is open now.
    const std::size_t bigger = map_size_ * 2;
    rc = mdb_env_set_mapsize(env_, bigger);
    if (rc != 0) return Error("mdb_env_set_mapsize", rc);
    map_size_ = bigger;
  }
}

StatusOr<std::unique_ptr<LevelDbDatabase>> LevelDbDatabase::Open(const std::string& path, DbMode mode) {
  const std::string name = "LevelDB database '" + path + "'";
  if (mode == DbMode::kRead) {
    if (!IsDirectory(path)) return NotFoundError(name + " does not exist (no such directory)");
    if (!Exists(path + "/CURRENT")) return NotFoundError(name + " does not exist (no CURRENT file in it)");
  } else if (Exists(path) && !IsDirectory(path)) {
    return InvalidArgumentError("cannot create " + name + ": the path exists and is not a directory");
  }
  if (mode == DbMode::kNew && Exists(path + "/CURRENT")) {
    return InvalidArgumentError(name + " already exists; remove it or choose another path");
  }
  leveldb::Options options = CaffeLevelDbOptions();
  options.create_if_missing = mode != DbMode::kRead;
  options.error_if_exists = mode == DbMode::kNew;
  leveldb::DB* db = nullptr;
  const leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) {
    // LevelDB holds an fcntl lock on <path>/LOCK while a handle is open (and
    // refuses a second handle of its own process before asking the kernel).
    if (s.IsIOError() && s.ToString().find("/LOCK") != std::string::npos) {
      return FailedPreconditionError(name +
                                     " is locked: another process (or another handle in this one) has it open, "
                                     "and LevelDB allows one at a time (" +
                                     s.ToString() +
                                     "); wait for it to close the database, or use a copy or an LMDB "
                                     "(nereus_convert_imageset --backend=lmdb), which many readers can share");
    }
    if (s.IsCorruption()) return DataLossError(name + " is corrupt: " + s.ToString());
    return InvalidArgumentError("cannot open " + name + ": " + s.ToString());
  }
  return std::unique_ptr<LevelDbDatabase>(new LevelDbDatabase(path, mode, db));
}

LevelDbDatabase::~LevelDbDatabase() { delete db_; }

StatusOr<std::size_t> LevelDbDatabase::Count() const {
  leveldb::ReadOptions options;
  options.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> iter(db_->NewIterator(options));
  std::size_t n = 0;
  for (iter->SeekToFirst(); iter->Valid(); iter->Next()) ++n;
  if (!iter->status().ok()) return LevelDbError(path_, "counting records", iter->status());
  return n;
}

StatusOr<std::unique_ptr<DbCursor>> LevelDbDatabase::NewCursor() const {
  // An iterator reads the snapshot of the database taken when it is made.
  std::unique_ptr<DbCursor> cursor(new LevelDbCursor(path_, db_->NewIterator(leveldb::ReadOptions())));
  cursor->SeekToFirst();
  if (!cursor->status().ok()) return cursor->status();
  return cursor;
}

Status LevelDbDatabase::PutBatch(const std::vector<std::pair<std::string, std::string>>& records) {
  if (mode_ == DbMode::kRead) return RefuseReadOnly();
  leveldb::WriteBatch batch;
  for (const auto& [key, value] : records) batch.Put(key, value);
  const leveldb::Status s = db_->Write(leveldb::WriteOptions(), &batch);
  if (!s.ok()) return LevelDbError(path_, "writing a batch", s);
  return Status::OK();
}

DbWriter::DbWriter(Database* db, std::size_t batch_size) : db_(db), batch_size_(batch_size == 0 ? 1 : batch_size) {
  CHECK(db_ != nullptr);
  pending_.reserve(batch_size_);
}

DbWriter::~DbWriter() {
  Status s = Flush();
  if (!s.ok()) LOG(ERROR) << "DbWriter lost " << pending_.size() << " records: " << s;
}

Status DbWriter::Put(std::string key, std::string value) {
  pending_.emplace_back(std::move(key), std::move(value));
  if (pending_.size() >= batch_size_) return Flush();
  return Status::OK();
}

Status DbWriter::Flush() {
  if (pending_.empty()) return Status::OK();
  RETURN_IF_ERROR(db_->PutBatch(pending_));
  committed_ += pending_.size();
  pending_.clear();
  return Status::OK();
}

StatusOr<std::unique_ptr<NewDatabaseFile>> NewDatabaseFile::Create(DbBackend backend, const std::string& path) {
  if (Exists(path)) {
    return InvalidArgumentError(std::string(DbBackendName(backend)) + " database '" + path +
                                "': the path already exists; remove it or choose another path");
  }
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  std::error_code ignored;
  std::filesystem::remove_all(temporary, ignored);  // A leftover of an earlier run of the same pid.
  auto db = Database::Open(backend, temporary, DbMode::kNew);
  if (!db.ok()) {
    std::filesystem::remove_all(temporary, ignored);
    return db.status();
  }
  return std::unique_ptr<NewDatabaseFile>(new NewDatabaseFile(path, temporary, std::move(db).value()));
}

NewDatabaseFile::~NewDatabaseFile() {
  db_.reset();
  if (!committed_) {
    std::error_code ignored;
    std::filesystem::remove_all(temporary_, ignored);
  }
}

Status NewDatabaseFile::Commit() {
  CHECK(!committed_) << "NewDatabaseFile::Commit twice";
  db_.reset();  // Closed: LMDB and LevelDB have written everything.
  if (Exists(path_)) {
    return InvalidArgumentError("'" + path_ + "' appeared while the database was written; nothing was written there");
  }
  std::error_code error;
  std::filesystem::rename(temporary_, path_, error);
  if (error) return InternalError("cannot rename '" + temporary_ + "' to '" + path_ + "': " + error.message());
  committed_ = true;
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

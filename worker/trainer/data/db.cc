#include "worker/trainer/data/db.h"

#include <lmdb.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cerrno>
#include <cstring>

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

}  // namespace

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

StatusOr<std::unique_ptr<LmdbCursor>> LmdbDatabase::NewCursor() const {
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) return Error("mdb_txn_begin", rc);
  MDB_cursor* cursor = nullptr;
  rc = mdb_cursor_open(txn, dbi_, &cursor);
  if (rc != 0) {
    mdb_txn_abort(txn);
    return Error("mdb_cursor_open", rc);
  }
  std::unique_ptr<LmdbCursor> result(new LmdbCursor(path_, txn, cursor));
  result->SeekToFirst();
  if (!result->status().ok()) return result->status();
  return result;
}

Status LmdbDatabase::PutBatch(const std::vector<std::pair<std::string, std::string>>& records) {
  if (mode_ == DbMode::kRead) {
    return FailedPreconditionError("LMDB database '" + path_ + "' was opened read-only");
  }
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

LmdbCursor::~LmdbCursor() {
  mdb_cursor_close(cursor_);
  mdb_txn_abort(txn_);
}

std::string_view LmdbCursor::key() const {
  CHECK(valid_) << "key() on an invalid cursor of '" << path_ << "'";
  return key_;
}

std::string_view LmdbCursor::value() const {
  CHECK(valid_) << "value() on an invalid cursor of '" << path_ << "'";
  return value_;
}

void LmdbCursor::Get(int op) {
  MDB_val k, v;
  const int rc = mdb_cursor_get(cursor_, &k, &v, static_cast<MDB_cursor_op>(op));
  if (rc == 0) {
    valid_ = true;
    key_ = std::string_view(static_cast<const char*>(k.mv_data), k.mv_size);
    value_ = std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
    return;
  }
  valid_ = false;
  key_ = value_ = std::string_view();
  if (rc != MDB_NOTFOUND) {
    status_ = InternalError("mdb_cursor_get on LMDB database '" + path_ + "': " + LmdbMessage(rc));
  }
}

void LmdbCursor::SeekToFirst() { Get(MDB_FIRST); }

void LmdbCursor::Next() {
  if (!status_.ok()) return;
  Get(MDB_NEXT);
  if (!valid_ && status_.ok()) {
    SeekToFirst();
    if (valid_) ++epoch_;
  }
}

LmdbWriter::LmdbWriter(LmdbDatabase* db, std::size_t batch_size)
    : db_(db), batch_size_(batch_size == 0 ? 1 : batch_size) {
  CHECK(db_ != nullptr);
  pending_.reserve(batch_size_);
}

LmdbWriter::~LmdbWriter() {
  Status s = Flush();
  if (!s.ok()) LOG(ERROR) << "LmdbWriter lost " << pending_.size() << " records: " << s;
}

Status LmdbWriter::Put(std::string key, std::string value) {
  pending_.emplace_back(std::move(key), std::move(value));
  if (pending_.size() >= batch_size_) return Flush();
  return Status::OK();
}

Status LmdbWriter::Flush() {
  if (pending_.empty()) return Status::OK();
  RETURN_IF_ERROR(db_->PutBatch(pending_));
  committed_ += pending_.size();
  pending_.clear();
  return Status::OK();
}

}  // namespace data
}  // namespace nereus

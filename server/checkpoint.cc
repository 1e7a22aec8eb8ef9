#include "server/checkpoint.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>

#include "common/base/file_util.h"

namespace nereus {
namespace {

constexpr char kMagic[8] = {'N', 'R', 'S', 'C', 'K', 'P', 'T', '1'};
constexpr char kCoordinatorMagic[8] = {'N', 'R', 'C', 'O', 'O', 'R', 'D', '1'};

// Debian 12 packages no CRC-32C library for C++ (abseil's absl/crc arrived
// after the 20220623 release it ships), so the table-driven form, reflected
// polynomial 0x82F63B78.
std::array<uint32_t, 256> MakeCrcTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

std::string ErrnoText() { return std::strerror(errno); }

// Writes all of [data, data + size) to fd.
Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return UnavailableError("cannot write " + path + ": " + ErrnoText());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::OK();
}

// Writes `pieces` to `dir/name` under a temporary name, fsyncs and renames it.
Status WriteFileAtomically(const std::string& dir, const std::string& name,
                           const std::vector<std::pair<const void*, size_t>>& pieces) {
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("cannot create " + tmp + ": " + ErrnoText());
  Status st;
  for (const auto& [data, size] : pieces) {
    st = WriteAll(fd, data, size, tmp);
    if (!st.ok()) break;
  }
  if (st.ok() && ::fsync(fd) != 0) st = UnavailableError("cannot fsync " + tmp + ": " + ErrnoText());
  if (::close(fd) != 0 && st.ok()) st = UnavailableError("cannot close " + tmp + ": " + ErrnoText());
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = UnavailableError("cannot rename " + tmp + " to " + path + ": " + ErrnoText());
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return UnavailableError("cannot open directory " + dir + ": " + ErrnoText());
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return UnavailableError("cannot fsync directory " + dir + ": " + ErrnoText());
  return Status::OK();
}

Status MakeDirs(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST)
      return UnavailableError("cannot create directory " + partial + ": " + ErrnoText());
  }
  return Status::OK();
}

uint32_t LoadLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // x86-64 and aarch64 Linux: little-endian, as the format says.
}

std::string Le32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

// Clocks with a manifest of server `rank` in `dir`, newest first.
std::vector<int64_t> ManifestClocks(const std::string& dir, int rank) {
  std::vector<int64_t> clocks;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return clocks;
  const std::regex re("ckpt-(\\d{12})\\.server-" + std::to_string(rank) + "\\.manifest");
  while (dirent* e = ::readdir(d)) {
    std::cmatch m;
    if (std::regex_match(e->d_name, m, re)) clocks.push_back(std::stoll(m[1]));
  }
  ::closedir(d);
  std::sort(clocks.rbegin(), clocks.rend());
  return clocks;
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t size) {
  static const std::array<uint32_t, 256> table = MakeCrcTable();
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string ShardFileName(int64_t clock, int rank) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "ckpt-%012lld.server-%d.shard", static_cast<long long>(clock), rank);
  return buf;
}

std::string ManifestFileName(int64_t clock, int rank) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "ckpt-%012lld.server-%d.manifest", static_cast<long long>(clock), rank);
  return buf;
}

Status WriteCheckpoint(const std::string& dir, const ShardState& state) {
  RETURN_IF_ERROR(MakeDirs(dir));
  const pb::CheckpointShard& info = state.info;
  pb::CheckpointShard header = info;
  header.clear_partitions();
  std::vector<std::pair<const void*, size_t>> pieces;
  for (const PartitionState& c : state.partitions) {
    pb::CheckpointPartition* pc = header.add_partitions();
    *pc->mutable_meta() = c.meta;
    pc->set_version(c.version);
    for (const auto& [name, values] : c.arrays) {
      CHECK(values != nullptr) << name;
      pb::CheckpointArray* a = pc->add_arrays();
      a->set_name(name);
      a->set_length(values->size());
    }
  }
  const std::string header_bytes = header.SerializeAsString();
  const std::string head = std::string(kMagic, sizeof(kMagic)) + Le32(static_cast<uint32_t>(header_bytes.size()));
  pieces.emplace_back(head.data(), head.size());
  pieces.emplace_back(header_bytes.data(), header_bytes.size());
  for (const PartitionState& c : state.partitions)
    for (const auto& [name, values] : c.arrays) pieces.emplace_back(values->data(), values->size() * sizeof(float));
  uint32_t crc = 0;
  uint64_t bytes = 0;
  for (const auto& [data, size] : pieces) {
    crc = Crc32c(crc, data, size);
    bytes += size;
  }
  const std::string shard = ShardFileName(info.clock(), info.server_rank());
  RETURN_IF_ERROR(WriteFileAtomically(dir, shard, pieces));

  pb::CheckpointManifest manifest;
  manifest.set_clock(info.clock());
  manifest.set_server_rank(info.server_rank());
  manifest.set_num_servers(info.num_servers());
  manifest.set_shard_file(shard);
  manifest.set_shard_bytes(bytes);
  manifest.set_shard_crc32c(crc);
  const std::string mbytes = manifest.SerializeAsString();
  const std::string mcrc = Le32(Crc32c(0, mbytes.data(), mbytes.size()));
  RETURN_IF_ERROR(SyncDir(dir));  // The shard's name is durable before the manifest names it.
  RETURN_IF_ERROR(WriteFileAtomically(dir, ManifestFileName(info.clock(), info.server_rank()),
                                      {{mbytes.data(), mbytes.size()}, {mcrc.data(), mcrc.size()}}));
  return SyncDir(dir);
}

std::string CoordinatorStatePath(const std::string& dir) { return dir + "/coordinator.state"; }

Status WriteCoordinatorState(const std::string& dir, const pb::CoordinatorState& state) {
  RETURN_IF_ERROR(MakeDirs(dir));
  std::string bytes(kCoordinatorMagic, sizeof(kCoordinatorMagic));
  const std::string body = state.SerializeAsString();
  bytes += Le32(static_cast<uint32_t>(body.size()));
  bytes += body;
  bytes += Le32(Crc32c(0, bytes.data(), bytes.size()));
  RETURN_IF_ERROR(WriteFileAtomically(dir, "coordinator.state", {{bytes.data(), bytes.size()}}));
  return SyncDir(dir);
}

StatusOr<pb::CoordinatorState> ReadCoordinatorState(const std::string& dir) {
  const std::string path = CoordinatorStatePath(dir);
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return NotFoundError(path + " does not exist");
  ASSIGN_OR_RETURN(std::string file, ReadWholeFile(path, "checkpoint file"));
  const size_t frame = sizeof(kCoordinatorMagic) + 4 + 4;
  if (file.size() < frame) return DataLossError(path + " is truncated (" + std::to_string(file.size()) + " bytes)");
  if (std::memcmp(file.data(), kCoordinatorMagic, sizeof(kCoordinatorMagic)) != 0)
    return DataLossError(path + " is not a Nereus coordinator state (bad magic)");
  const uint32_t length = LoadLe32(file.data() + sizeof(kCoordinatorMagic));
  if (length != file.size() - frame)
    return DataLossError(path + " is truncated or overwritten: its body should be " + std::to_string(length) +
                         " bytes, the file holds " + std::to_string(file.size() - frame));
  if (Crc32c(0, file.data(), file.size() - 4) != LoadLe32(file.data() + file.size() - 4))
    return DataLossError(path + " is corrupt: its CRC-32C does not match");
  pb::CoordinatorState state;
  if (!state.ParseFromArray(file.data() + sizeof(kCoordinatorMagic) + 4, static_cast<int>(length)))
    return DataLossError(path + " is corrupt: its body does not parse");
  return state;
}

StatusOr<ShardState> ReadCheckpoint(const std::string& dir, int64_t clock, int rank) {
  const std::string mpath = dir + "/" + ManifestFileName(clock, rank);
  ASSIGN_OR_RETURN(std::string mfile, ReadWholeFile(mpath, "checkpoint file"));
  if (mfile.size() < 4) return DataLossError(mpath + " is truncated (" + std::to_string(mfile.size()) + " bytes)");
  const uint32_t mcrc = LoadLe32(mfile.data() + mfile.size() - 4);
  if (Crc32c(0, mfile.data(), mfile.size() - 4) != mcrc) return DataLossError(mpath + " is corrupt (CRC-32C mismatch)");
  pb::CheckpointManifest manifest;
  if (!manifest.ParseFromArray(mfile.data(), static_cast<int>(mfile.size() - 4)))
    return DataLossError(mpath + " does not parse as a checkpoint manifest");
  if (manifest.clock() != clock || manifest.server_rank() != rank ||
      manifest.shard_file() != ShardFileName(clock, rank))
    return DataLossError(mpath + " describes another checkpoint (clock " + std::to_string(manifest.clock()) +
                         ", server " + std::to_string(manifest.server_rank()) + ", file " + manifest.shard_file() +
                         ")");

  const std::string path = dir + "/" + manifest.shard_file();
  auto read = ReadWholeFile(path, "checkpoint file");
  if (!read.ok()) return DataLossError(read.status().message() + " (named by " + mpath + ")");
  const std::string& file = *read;
  if (file.size() != manifest.shard_bytes())
    return DataLossError(path + " is truncated or overwritten: " + std::to_string(file.size()) +
                         " bytes, its manifest says " + std::to_string(manifest.shard_bytes()));
  if (Crc32c(0, file.data(), file.size()) != manifest.shard_crc32c())
    return DataLossError(path + " is corrupt: its CRC-32C does not match its manifest");
  if (file.size() < sizeof(kMagic) + 4 || std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0)
    return DataLossError(path + " is not a Nereus checkpoint shard (bad magic)");
  const uint32_t header_len = LoadLe32(file.data() + sizeof(kMagic));
  size_t pos = sizeof(kMagic) + 4;
  if (header_len > file.size() - pos) return DataLossError(path + ": header length runs past the end of the file");
  ShardState state;
  if (!state.info.ParseFromArray(file.data() + pos, static_cast<int>(header_len)))
    return DataLossError(path + ": the header does not parse");
  pos += header_len;
  if (state.info.clock() != clock || state.info.server_rank() != rank)
    return DataLossError(path + ": the header names clock " + std::to_string(state.info.clock()) + ", server " +
                         std::to_string(state.info.server_rank()));
  for (const pb::CheckpointPartition& pc : state.info.partitions()) {
    PartitionState c;
    c.meta = pc.meta();
    c.version = pc.version();
    for (const pb::CheckpointArray& a : pc.arrays()) {
      const size_t bytes = a.length() * sizeof(float);
      if (a.length() > (file.size() - pos) / sizeof(float))
        return DataLossError(path + ": array " + a.name() + " of tensor " + std::to_string(c.meta.tensor()) +
                             " partition " + std::to_string(c.meta.partition()) + " runs past the end of the file");
      auto v = std::make_shared<std::vector<float>>(a.length());
      std::memcpy(v->data(), file.data() + pos, bytes);
      pos += bytes;
      c.arrays.emplace_back(a.name(), std::move(v));
    }
    state.partitions.push_back(std::move(c));
  }
  if (pos != file.size())
    return DataLossError(path + ": " + std::to_string(file.size() - pos) + " bytes after the last array");
  state.info.clear_partitions();
  return state;
}

std::vector<int64_t> ValidCheckpoints(const std::string& dir, int rank, std::vector<std::string>* warnings) {
  std::vector<int64_t> valid;
  for (int64_t clock : ManifestClocks(dir, rank)) {
    auto st = ReadCheckpoint(dir, clock, rank);
    if (st.ok()) {
      valid.push_back(clock);
      continue;
    }
    const std::string line = "skipping the checkpoint of clock " + std::to_string(clock) + ": " + st.status().message();
    LOG(WARNING) << "server " << rank << ": " << line;
    if (warnings != nullptr) warnings->push_back(line);
  }
  return valid;
}

Status PruneCheckpoints(const std::string& dir, int rank, int keep) {
  // Temporary files of this rank are left by a crash mid-write (only this
  // server's writer thread, which calls this, writes them).
  if (DIR* d = ::opendir(dir.c_str())) {
    const std::regex tmp("ckpt-\\d{12}\\.server-" + std::to_string(rank) + "\\.(shard|manifest)\\.tmp");
    std::vector<std::string> stale;
    while (dirent* e = ::readdir(d))
      if (std::regex_match(e->d_name, tmp)) stale.push_back(dir + "/" + e->d_name);
    ::closedir(d);
    for (const std::string& path : stale) ::unlink(path.c_str());
  }
  const std::vector<int64_t> clocks = ManifestClocks(dir, rank);
  for (size_t i = static_cast<size_t>(std::max(keep, 0)); i < clocks.size(); ++i) {
    for (const std::string& name : {ManifestFileName(clocks[i], rank), ShardFileName(clocks[i], rank)}) {
      const std::string path = dir + "/" + name;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT)
        return UnavailableError("cannot delete " + path + ": " + ErrnoText());
    }
  }
  return Status::OK();
}

CheckpointWriter::CheckpointWriter(std::string dir, int keep, int max_queued)
    : dir_(std::move(dir)), keep_(keep), max_queued_(static_cast<size_t>(std::max(max_queued, 1))) {
  thread_ = std::thread([this] { Loop(); });
}

CheckpointWriter::~CheckpointWriter() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void CheckpointWriter::Submit(std::unique_ptr<ShardState> state) {
  MutexLock lock(&mu_);
  while (queue_.size() >= max_queued_) cv_.Wait(&mu_);
  queue_.push_back(std::move(state));
  cv_.SignalAll();
}

Status CheckpointWriter::Flush() {
  MutexLock lock(&mu_);
  while (!queue_.empty() || busy_) cv_.Wait(&mu_);
  return error_;
}

void CheckpointWriter::Loop() {
  MutexLock lock(&mu_);
  while (true) {
    while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
    if (queue_.empty()) return;  // stop_, and everything queued is written.
    std::unique_ptr<ShardState> state = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    cv_.SignalAll();  // Room in the queue.
    mu_.Unlock();
    const pb::CheckpointShard& info = state->info;
    Status st = WriteCheckpoint(dir_, *state);
    if (st.ok()) st = PruneCheckpoints(dir_, info.server_rank(), keep_);
    if (st.ok()) {
      LOG(INFO) << "server " << info.server_rank() << ": checkpoint of clock " << info.clock() << " written to " << dir_
                << "/" << ManifestFileName(info.clock(), info.server_rank());
    } else {
      LOG(ERROR) << "server " << info.server_rank() << ": checkpoint of clock " << info.clock()
                 << " failed: " << st.message();
    }
    state.reset();  // Releases the shared weights before taking the lock.
    mu_.Lock();
    busy_ = false;
    if (!st.ok() && error_.ok()) error_ = st;
    cv_.SignalAll();
  }
}

}  // namespace nereus

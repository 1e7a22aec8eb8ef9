// Checkpoints of a parameter-server shard: the file format (proto/checkpoint.proto),
// crash-safe writing, verified reading, and the writer thread a server owns.
//
// Crash safety: the shard file is written under a temporary name, fsync'd and
// renamed, then the manifest (size and CRC-32C of the shard) the same way,
// then the directory is fsync'd. A crash at any point leaves either no
// manifest (the checkpoint does not exist) or a complete one. A shard that was
// damaged later (truncated, bit rot) no longer matches its manifest's CRC and
// is skipped with a warning naming the file.
#ifndef NEREUS_SERVER_CHECKPOINT_H_
#define NEREUS_SERVER_CHECKPOINT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "proto/checkpoint.pb.h"

namespace nereus {

// CRC-32C (Castagnoli), as in iSCSI/ext4: Crc32c(0, "123456789", 9) == 0xE3069283.
// Extend a running value by passing it back in.
uint32_t Crc32c(uint32_t crc, const void* data, size_t size);

// One partition's state: "weights" first, then the solver's history arrays.
struct PartitionState {
  pb::PartitionMeta meta;
  int64_t version = 0;
  std::vector<std::pair<std::string, std::shared_ptr<const std::vector<float>>>> arrays;
};

// A server's shard at one clock. `info` holds everything but the partitions
// (clock, rank, job shape, solver settings); its `partitions` field is unused.
struct ShardState {
  pb::CheckpointShard info;
  std::vector<PartitionState> partitions;
};

// File names of server `rank`'s checkpoint of `clock` (base names). The job's
// shape is inside (checked when loading), not in the name: a server learns
// it only after registering, and it offers its checkpoints when registering.
std::string ShardFileName(int64_t clock, int rank);
std::string ManifestFileName(int64_t clock, int rank);

// Writes `state` as a checkpoint into `dir` (created if missing).
Status WriteCheckpoint(const std::string& dir, const ShardState& state);

// Reads and verifies server `rank`'s checkpoint of `clock`: the manifest's own
// CRC, the shard's size and CRC-32C, the header, and that the arrays fill the
// file exactly. Errors name the damaged file.
StatusOr<ShardState> ReadCheckpoint(const std::string& dir, int64_t clock, int rank);

// Clocks of server `rank`'s checkpoints in `dir` that verify, newest first. A manifest that is present but whose
// checkpoint does not verify is skipped; `warnings` (may be null) receives one line per skipped checkpoint naming the
// file and what is wrong, also logged.
std::vector<int64_t> ValidCheckpoints(const std::string& dir, int rank, std::vector<std::string>* warnings = nullptr);

// The coordinator's state file in `dir` (proto/checkpoint.proto):
// dir/coordinator.state.
std::string CoordinatorStatePath(const std::string& dir);
// Writes `state` there (created if missing; temporary name, fsync, rename,
// directory fsync).
Status WriteCoordinatorState(const std::string& dir, const pb::CoordinatorState& state);
// Reads and verifies it: NotFound if there is none; DataLoss naming the file
// and what is wrong (bad magic, length, CRC-32C, or a body that does not
// parse) if it is damaged.
StatusOr<pb::CoordinatorState> ReadCoordinatorState(const std::string& dir);

// Deletes server `rank`'s checkpoints in `dir` older than the `keep` newest
// (manifest first, so a half-deleted checkpoint is never taken as complete),
// and its temporary files (left by a crash mid-write).
Status PruneCheckpoints(const std::string& dir, int rank, int keep);

// The writer thread of one server: Submit() queues a shard (its weights
// shared copy-on-write with the live server, so queuing copies only the
// history); the thread writes it and prunes to the newest `keep`. At most
// `max_queued` shards wait: Submit blocks beyond that (back-pressure instead
// of unbounded memory). The destructor writes what is queued, then joins.
class CheckpointWriter {
 public:
  CheckpointWriter(std::string dir, int keep, int max_queued = 2);
  ~CheckpointWriter() NEREUS_LOCKS_EXCLUDED(mu_);
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  void Submit(std::unique_ptr<ShardState> state) NEREUS_LOCKS_EXCLUDED(mu_);
  // Blocks until every submitted shard is written (or failed); returns the
  // first error, if any.
  Status Flush() NEREUS_LOCKS_EXCLUDED(mu_);
  const std::string& dir() const { return dir_; }

 private:
  void Loop() NEREUS_LOCKS_EXCLUDED(mu_);

  const std::string dir_;
  const int keep_;
  const size_t max_queued_;
  Mutex mu_;
  CondVar cv_;
  std::deque<std::unique_ptr<ShardState>> queue_ NEREUS_GUARDED_BY(mu_);
  bool busy_ NEREUS_GUARDED_BY(mu_) = false;  // A shard is being written.
  bool stop_ NEREUS_GUARDED_BY(mu_) = false;
  Status error_ NEREUS_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace nereus

#endif  // NEREUS_SERVER_CHECKPOINT_H_

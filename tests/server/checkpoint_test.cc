// Checkpoint files (server/checkpoint.h) and a ParamServer's checkpoint and
// restore, in-process.
#include "server/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/update/sgd.h"
#include "server/param_server.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"

namespace nereus {
namespace {

using test::CaptureSink;
using test::FixedMomentumSgd;
using test::TempDir;

TEST(Crc32cTest, KnownVectorsAndIncremental) {
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);  // RFC 3720's check value.
  EXPECT_EQ(Crc32c(0, "", 0), 0u);
  const std::string s = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(Crc32c(0, s.data(), s.size()), 0x22620404u);
  EXPECT_EQ(Crc32c(Crc32c(0, s.data(), 10), s.data() + 10, s.size() - 10), 0x22620404u);
}

// A shard of two partitions whose values depend on `clock`.
ShardState MakeShard(int64_t clock, int rank = 1) {
  ShardState s;
  s.info.set_clock(clock);
  s.info.set_server_rank(rank);
  s.info.set_num_servers(2);
  s.info.set_num_workers(3);
  s.info.set_partition_bytes(4096);
  s.info.set_consistency(pb::BSP);
  *s.info.mutable_sgd() = FixedMomentumSgd();
  for (int t = 0; t < 2; ++t) {
    PartitionState c;
    c.meta.set_tensor(t);
    c.meta.set_partition(0);
    c.meta.set_length(5 + t);
    c.meta.set_tensor_name("t" + std::to_string(t));
    c.version = clock;
    auto w = std::make_shared<std::vector<float>>();
    auto h = std::make_shared<std::vector<float>>();
    for (int i = 0; i < 5 + t; ++i) {
      w->push_back(clock + t + 0.25f * i);
      h->push_back(-0.5f * i - t);
    }
    c.arrays.emplace_back("weights", w);
    c.arrays.emplace_back("history", h);
    s.partitions.push_back(std::move(c));
  }
  return s;
}

void ExpectSameShard(const ShardState& a, const ShardState& b) {
  EXPECT_EQ(a.info.SerializeAsString(), b.info.SerializeAsString());
  ASSERT_EQ(a.partitions.size(), b.partitions.size());
  for (size_t i = 0; i < a.partitions.size(); ++i) {
    EXPECT_EQ(a.partitions[i].meta.SerializeAsString(), b.partitions[i].meta.SerializeAsString());
    EXPECT_EQ(a.partitions[i].version, b.partitions[i].version);
    ASSERT_EQ(a.partitions[i].arrays.size(), b.partitions[i].arrays.size());
    for (size_t k = 0; k < a.partitions[i].arrays.size(); ++k) {
      EXPECT_EQ(a.partitions[i].arrays[k].first, b.partitions[i].arrays[k].first);
      EXPECT_TRUE(test::BytesEqual(*a.partitions[i].arrays[k].second, *b.partitions[i].arrays[k].second,
                                   "partition " + std::to_string(i) + " " + a.partitions[i].arrays[k].first));
    }
  }
}

TEST(CheckpointFileTest, RoundTripIsExact) {
  TempDir dir;
  const std::string sub = dir.File("a/b");  // Created on demand.
  ASSERT_TRUE(WriteCheckpoint(sub, MakeShard(20)).ok());
  ASSERT_TRUE(WriteCheckpoint(sub, MakeShard(40)).ok());
  EXPECT_EQ(ValidCheckpoints(sub, 1), (std::vector<int64_t>{40, 20}));
  EXPECT_TRUE(ValidCheckpoints(sub, 0).empty());  // Another rank's files are not ours.
  auto got = ReadCheckpoint(sub, 40, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameShard(*got, MakeShard(40));
  // No temporary files are left behind.
  EXPECT_NE(access((sub + "/" + ShardFileName(40, 1)).c_str(), F_OK), -1);
  EXPECT_EQ(access((sub + "/" + ShardFileName(40, 1) + ".tmp").c_str(), F_OK), -1);
}

void Truncate(const std::string& path, long bytes) { ASSERT_EQ(truncate(path.c_str(), bytes), 0) << path; }

// Flips one bit of the byte at `offset` (from the end when negative).
void FlipByte(const std::string& path, long offset) {
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
  const long at = offset < 0 ? static_cast<long>(st.st_size) + offset : offset;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x10;
  f.seekp(at);
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << path;
}

class DamagedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteCheckpoint(dir_.path(), MakeShard(20)).ok());
    ASSERT_TRUE(WriteCheckpoint(dir_.path(), MakeShard(40)).ok());
  }
  // The newest checkpoint is skipped, the previous one used, and the warning
  // names the damaged file.
  void ExpectFallsBackTo20(const std::string& damaged_file, const std::string& what) {
    std::vector<std::string> warnings;
    EXPECT_EQ(ValidCheckpoints(dir_.path(), 1, &warnings), std::vector<int64_t>{20});
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find(dir_.File(damaged_file)), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find(what), std::string::npos) << warnings[0];
    EXPECT_NE(warnings[0].find("clock 40"), std::string::npos) << warnings[0];
    auto st = ReadCheckpoint(dir_.path(), 40, 1);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.status().code(), StatusCode::kDataLoss) << st.status();
  }
  TempDir dir_;
};

// One way to damage the newest checkpoint (clock 40): a file, what is done
// to it, and the word its warning uses.
struct Damage {
  const char* name;
  bool manifest;  // the manifest, else the shard
  enum How { kFlipByte, kTruncate, kUnlink } how;
  long at;  // FlipByte's offset or Truncate's length
  const char* what;
};

class DamagedCheckpointFileTest : public DamagedCheckpointTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(DamagedCheckpointFileTest, FallsBackToThePreviousCheckpoint) {
  const Damage& d = GetParam();
  const std::string file = d.manifest ? ManifestFileName(40, 1) : ShardFileName(40, 1);
  switch (d.how) {
    case Damage::kFlipByte:
      FlipByte(dir_.File(file), d.at);
      break;
    case Damage::kTruncate:
      Truncate(dir_.File(file), d.at);
      break;
    case Damage::kUnlink:
      ASSERT_EQ(unlink(dir_.File(file).c_str()), 0);
      break;
  }
  ExpectFallsBackTo20(file, d.what);
}

INSTANTIATE_TEST_SUITE_P(
    Damages, DamagedCheckpointFileTest,
    ::testing::Values(Damage{"CorruptShardBitFlipInTheWeights", false, Damage::kFlipByte, -3,  // in the last array
                             "corrupt"},
                      Damage{"CorruptShardBitFlipInTheHeader", false, Damage::kFlipByte, 14, "corrupt"},
                      Damage{"TruncatedShard", false, Damage::kTruncate, 30, "truncated"},
                      Damage{"CorruptManifest", true, Damage::kFlipByte, 2, "corrupt"},
                      Damage{"TruncatedManifest", true, Damage::kTruncate, 2, "truncated"},
                      Damage{"MissingShard", false, Damage::kUnlink, 0, "cannot open"}),
    [](const ::testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

TEST_F(DamagedCheckpointTest, CrashBeforeTheManifestLeavesNoCheckpoint) {
  // What a crash between the shard's rename and the manifest's leaves: a
  // shard (or its temporary file) without a manifest. Not a checkpoint, and
  // nothing to warn about.
  ASSERT_EQ(unlink(dir_.File(ManifestFileName(40, 1)).c_str()), 0);
  std::ofstream(dir_.File(ManifestFileName(60, 1) + ".tmp")) << "half";
  std::vector<std::string> warnings;
  EXPECT_EQ(ValidCheckpoints(dir_.path(), 1, &warnings), std::vector<int64_t>{20});
  EXPECT_TRUE(warnings.empty());
}

TEST(CheckpointFileTest, PruneKeepsTheNewestK) {
  TempDir dir;
  for (int64_t c : {20, 40, 60, 80}) ASSERT_TRUE(WriteCheckpoint(dir.path(), MakeShard(c)).ok());
  ASSERT_TRUE(WriteCheckpoint(dir.path(), MakeShard(20, 0)).ok());
  std::ofstream(dir.File(ShardFileName(100, 1) + ".tmp")) << "left by a crash mid-write";
  std::ofstream(dir.File(ShardFileName(100, 0) + ".tmp")) << "another rank's";
  ASSERT_TRUE(PruneCheckpoints(dir.path(), 1, 2).ok());
  EXPECT_EQ(ValidCheckpoints(dir.path(), 1), (std::vector<int64_t>{80, 60}));
  EXPECT_EQ(access(dir.File(ShardFileName(40, 1)).c_str(), F_OK), -1);
  EXPECT_EQ(access(dir.File(ShardFileName(100, 1) + ".tmp").c_str(), F_OK), -1);
  EXPECT_EQ(access(dir.File(ShardFileName(100, 0) + ".tmp").c_str(), F_OK), 0);
  EXPECT_EQ(ValidCheckpoints(dir.path(), 0), std::vector<int64_t>{20});  // Other ranks untouched.
}

TEST(CheckpointWriterTest, WritesInOrderPrunesAndFlushes) {
  TempDir dir;
  {
    CheckpointWriter writer(dir.path(), 2, 1);
    for (int64_t c : {10, 20, 30}) writer.Submit(std::make_unique<ShardState>(MakeShard(c)));
    ASSERT_TRUE(writer.Flush().ok());
    EXPECT_EQ(ValidCheckpoints(dir.path(), 1), (std::vector<int64_t>{30, 20}));
    writer.Submit(std::make_unique<ShardState>(MakeShard(40)));
  }  // The destructor writes what is queued.
  EXPECT_EQ(ValidCheckpoints(dir.path(), 1), (std::vector<int64_t>{40, 30}));
}

TEST(CheckpointWriterTest, FailureIsReported) {
  TempDir dir;
  std::ofstream(dir.File("file")) << "x";
  CheckpointWriter writer(dir.File("file/sub"), 2);  // A directory under a regular file.
  writer.Submit(std::make_unique<ShardState>(MakeShard(10)));
  Status st = writer.Flush();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir.File("file")), std::string::npos) << st;
}

// --- A ParamServer's checkpoints ------------------------------------------

uint64_t NextId() {
  static uint64_t id = 0;
  return ++id;
}

Message Floats(pb::Op op, int tensor, int64_t clock, std::vector<float> v) {
  return test::FloatsMessage(op, NextId(), tensor, clock, std::move(v));
}

Message Init(int tensor, std::vector<float> v, const pb::SgdConfig& sgd = FixedMomentumSgd()) {
  return test::InitPartitionMessage(NextId(), tensor, std::move(v), sgd);
}

void Send(ParamServer* s, Message m, int worker) {
  pb::Header partial = m.header;
  s->Handle("w" + std::to_string(worker), worker, std::move(m), partial);
}

struct Harness {
  explicit Harness(int64_t every, std::vector<std::unique_ptr<ShardState>>* out) {
    ParamServerOptions o;
    o.num_workers = 2;
    o.num_servers = 1;
    o.partition_bytes = 4096;
    o.checkpoint_every = every;
    o.checkpoint_sink = [out](std::unique_ptr<ShardState> s) { out->push_back(std::move(s)); };
    o.on_clock = [this](int64_t c) { clocks.push_back(c); };
    server = std::make_unique<ParamServer>(o, &sink);
  }
  // Both workers push both tensors for `clock` (tensor 1 lagging behind).
  void Clock(int64_t clock) {
    for (int w = 0; w < 2; ++w) Send(server.get(), Floats(pb::PUSH, 0, clock, {0.5f * w + clock, -1, 2}), w);
    for (int w = 0; w < 2; ++w) Send(server.get(), Floats(pb::PUSH, 1, clock, {0.25f * w - clock, 3}), w);
  }
  CaptureSink sink;
  std::unique_ptr<ParamServer> server;
  std::vector<int64_t> clocks;
};

TEST(ParamServerCheckpointTest, CheckpointsAtClockBoundariesAndRestoresBitForBit) {
  std::vector<std::unique_ptr<ShardState>> ckpts;
  Harness a(2, &ckpts);
  Send(a.server.get(), Init(0, {1, 2, 3}), 0);
  Send(a.server.get(), Init(1, {4, 5}), 0);
  for (int64_t c = 0; c < 5; ++c) a.Clock(c);
  EXPECT_EQ(a.clocks, (std::vector<int64_t>{1, 2, 3, 4, 5}));
  ASSERT_EQ(ckpts.size(), 2u);  // Clocks 2 and 4.
  EXPECT_EQ(ckpts[0]->info.clock(), 2);
  EXPECT_EQ(ckpts[1]->info.clock(), 4);
  for (const PartitionState& c : ckpts[1]->partitions) EXPECT_EQ(c.version, 4);
  // The checkpoint of clock 2 still holds clock 2's weights (copy on write).
  TempDir dir;
  ASSERT_TRUE(WriteCheckpoint(dir.path(), *ckpts[0]).ok());

  // Restore clock 2 into a fresh server and replay clocks 2..4: same weights
  // and history as the uninterrupted server, bit for bit.
  std::vector<std::unique_ptr<ShardState>> ckpts_b;
  Harness b(2, &ckpts_b);
  auto state = ReadCheckpoint(dir.path(), 2, 0);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(b.server->Restore(std::move(state).value()).ok());
  pb::SgdConfig changed = FixedMomentumSgd();
  changed.set_max_iter(1000);                            // The resumed job's solver settings replace the checkpoint's.
  Send(b.server.get(), Init(0, {9, 9, 9}, changed), 0);  // Values ignored: the checkpoint's stay.
  ASSERT_EQ(b.sink.Last().header.op(), pb::INIT_ACK);
  Send(b.server.get(), Init(1, {9, 9}, changed), 0);
  ASSERT_EQ(b.sink.Last().header.op(), pb::INIT_ACK);
  for (int64_t c = 2; c < 5; ++c) b.Clock(c);
  EXPECT_EQ(b.clocks, (std::vector<int64_t>{3, 4, 5}));
  ASSERT_EQ(ckpts_b.size(), 1u);
  for (int t = 0; t < 2; ++t) {
    auto wa = a.server->Snapshot(t, 0).value(), wb = b.server->Snapshot(t, 0).value();
    EXPECT_EQ(wa.second, 5);
    EXPECT_EQ(wb.second, 5);
    EXPECT_TRUE(test::BytesEqual(wa.first, wb.first, "tensor " + std::to_string(t)));
  }
  auto ea = a.server->ExportState(), eb = b.server->ExportState();
  for (int t = 0; t < 2; ++t) {
    EXPECT_TRUE(test::BytesEqual(*ea->partitions[t].arrays[1].second, *eb->partitions[t].arrays[1].second,
                                 "history of partition " + std::to_string(t)));
  }
  EXPECT_EQ(eb->info.sgd().max_iter(), 1000);
}

// Server 0's checkpoint at clock 20 of a job of 2 workers and `servers`
// servers.
ShardState ServerZeroShard(int servers) {
  ShardState s = MakeShard(20, 0);
  s.info.set_num_workers(2);
  s.info.set_num_servers(servers);
  return s;
}

TEST(ParamServerCheckpointTest, RestoreRefusesAnotherJobShape) {
  std::vector<std::unique_ptr<ShardState>> ckpts;
  Harness h(0, &ckpts);
  ShardState s = ServerZeroShard(3);
  Status st = h.server->Restore(s);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--num_servers 3, this job has 1"), std::string::npos) << st;
  s.info.set_num_servers(1);
  s.info.set_partition_bytes(1024);
  st = h.server->Restore(s);
  EXPECT_NE(st.message().find("--partition_bytes 1024, this job has 4096"), std::string::npos) << st;
}

TEST(ParamServerCheckpointTest, InitOfAPartitionOutsideTheCheckpointIsRefused) {
  std::vector<std::unique_ptr<ShardState>> ckpts;
  Harness h(0, &ckpts);
  ShardState s = ServerZeroShard(1);
  for (PartitionState& c : s.partitions) c.meta.set_lr_mult(1), c.meta.set_decay_mult(1), c.meta.clear_tensor_name();
  ASSERT_TRUE(h.server->Restore(s).ok());
  Send(h.server.get(), Init(0, {1, 2, 3}), 0);  // The checkpoint's tensor 0 has 5 floats.
  ASSERT_EQ(h.sink.Last().header.op(), pb::ERROR);
  EXPECT_NE(h.sink.Last().header.error().find("differs from this server's checkpoint of clock 20"), std::string::npos)
      << h.sink.Last().header.error();
  Send(h.server.get(), Init(7, {1, 2}), 0);
  ASSERT_EQ(h.sink.Last().header.op(), pb::ERROR);
  EXPECT_NE(h.sink.Last().header.error().find("is not in this server's checkpoint of clock 20"), std::string::npos)
      << h.sink.Last().header.error();
  // Tensor 1 initialized, tensor 0 never: the first push says the model differs.
  Send(h.server.get(), Init(1, {0, 0, 0, 0, 0, 0}), 0);
  ASSERT_EQ(h.sink.Last().header.op(), pb::INIT_ACK);
  Send(h.server.get(), Floats(pb::PUSH, 1, 20, {1, 1, 1, 1, 1, 1}), 0);
  ASSERT_EQ(h.sink.Last().header.op(), pb::ERROR);
  EXPECT_NE(h.sink.Last().header.error().find("was not initialized by the resumed job"), std::string::npos)
      << h.sink.Last().header.error();
}

}  // namespace
}  // namespace nereus

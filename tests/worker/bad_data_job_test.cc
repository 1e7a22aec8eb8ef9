// Bad data stops a job cleanly, with real processes on 127.0.0.1: a record the
// Data layer cannot use ends the run with an error naming the database, the
// record and what is wrong with it. Standalone, the worker exits 1. In a job,
// the worker that read it reports it and exits 1, and every other process
// stops as for a dead node; nothing of the iteration that failed reaches the
// servers or their checkpoints.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "proto/caffe.pb.h"
#include "server/checkpoint.h"
#include "tests/support/process_util.h"
#include "tests/support/tiny_train_job.h"
#include "worker/trainer/data/db.h"

namespace nereus {
namespace test {
namespace {

constexpr auto kTimeout = std::chrono::seconds(60);

void Put(const std::string& db_path, const std::string& key, const std::string& value) {
  auto db = data::LmdbDatabase::Open(db_path, data::DbMode::kWrite);
  ASSERT_TRUE(db.ok()) << db.status();
  Status st = (*db)->PutBatch({{key, value}});
  ASSERT_TRUE(st.ok()) << st;
}

// The tiny job (tiny_train_job.h) with batch `batch`, for `max_iter`
// iterations: returns the solver file.
std::string WriteJob(const TempDir& dir, const std::string& db, int batch, int max_iter) {
  WriteText(dir.File("net.prototxt"), TinyNet(db, batch));
  WriteText(dir.File("solver.prototxt"), TinySolver(dir.File("net.prototxt"), max_iter));
  return dir.File("solver.prototxt");
}

// Runs nereus_worker --standalone; returns its exit code, its log in *log.
int RunStandalone(const TempDir& dir, const std::string& solver, std::string* log) {
  const int code =
      RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + solver}, dir.File("log"), kTimeout);
  *log = ReadFile(dir.File("log"));
  return code;
}

bool Contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(BadDataTest, StandaloneTruncatedDatabaseMissingDatabaseAndBadLabelFailNamingFileAndRecord) {
  TempDir dir;
  const std::string db = dir.File("tiny_lmdb");
  WriteTinyLmdb(db);
  const std::string solver = WriteJob(dir, db, 4, 20);
  const std::string net = dir.File("net.prototxt");
  std::string log;

  // A record's label beyond the loss's 4 classes: iteration 2 reads records
  // 8 to 11.
  caffe::Datum datum;
  datum.set_channels(1);
  datum.set_height(test::kSide);
  datum.set_width(test::kSide);
  datum.set_data(std::string(test::kSide * test::kSide, '\x10'));
  datum.set_label(7);
  Put(db, "00000009", datum.SerializeAsString());
  EXPECT_EQ(RunStandalone(dir, solver, &log), 1) << log;
  EXPECT_TRUE(Contains(log, "worker: training with --solver=" + solver +
                                " failed: iteration 2: layer data (Data): LMDB database '" + db +
                                "', record 9 (key '00000009'): label 7 is out of range for layer loss "
                                "(SoftmaxWithLoss), which takes labels 0 to 3\n"))
      << log;

  // The database truncated to 3 pages: an error, not a SIGBUS.
  const auto full = std::filesystem::file_size(db + "/data.mdb");
  std::filesystem::resize_file(db + "/data.mdb", 3 * 4096);
  EXPECT_EQ(RunStandalone(dir, solver, &log), 1) << log;
  EXPECT_TRUE(Contains(log, "worker: training with --solver=" + solver + " failed: " + solver + ": layer \"data\" (" +
                                net + ":2): layer data (Data): LMDB database '" + db + "' is truncated: " + db +
                                "/data.mdb has 12288 bytes, but its pages run to byte " + std::to_string(full) + "\n"))
      << log;

  // No database at all.
  std::filesystem::remove_all(db);
  EXPECT_EQ(RunStandalone(dir, solver, &log), 1) << log;
  EXPECT_TRUE(Contains(log, "worker: training with --solver=" + solver + " failed: " + solver + ": layer \"data\" (" +
                                net + ":2): layer data (Data): LMDB database '" + db +
                                "' does not exist (no such directory)\n"))
      << log;
}

// 2 workers x 1 server, batch 4 per worker: worker 1 reads records 1, 3, 5,
// ...; in iteration 3 records 25, 27, 29, 31. Record 27 is not a Datum.
TEST(BadDataTest, BadRecordInAJobStopsEveryProcessAndNoCheckpointHasTheFailedIteration) {
  TempDir dir, ckpt;
  const std::string db = dir.File("tiny_lmdb");
  WriteTinyLmdb(db);
  Put(db, "00000027", std::string("\xff\xff\xff", 3));
  const std::string solver = WriteJob(dir, db, 4, 40);

  // Worker 1 tells the job it failed: nobody waits for its silence.
  ClusterSpec spec = test::JobOf(1, 2, kPatientHeartbeat);
  spec.server_flags = {"--checkpoint_dir=" + ckpt.path(), "--checkpoint_every=1"};
  spec.worker_flags = {"--solver=" + solver};
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(kTimeout, &report)) << report;
  const auto codes = cluster.codes();  // Coordinator, server, workers 0 and 1.
  ASSERT_EQ(codes.size(), 4u);
  for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(codes[i], 1) << "process " << i << "\n" << report;
  const std::string w1 = cluster.worker(1).Log();
  EXPECT_TRUE(Contains(w1, "worker: training with --solver=" + solver +
                               " failed: iteration 3: layer data (Data): LMDB database '" + db +
                               "', record 27 (key '00000027'): not a Datum (3 bytes that do not parse)\n"))
      << w1;
  // The others stop at once, naming worker 1 and why.
  for (test::Subprocess* p : {&cluster.coordinator(), &cluster.server(0), &cluster.worker(0)}) {
    EXPECT_TRUE(Contains(p->Log(), "worker 1 (tcp://127.0.0.1:")) << p->Log();
    EXPECT_TRUE(Contains(p->Log(), ") failed: iteration 3: layer data (Data): LMDB database '" + db +
                                       "', record 27 (key '00000027'): not a Datum"))
        << p->Log();
  }
  // The servers applied clocks 0, 1 and 2 (weights of version 3, checkpoint
  // 3) and nothing of clock 3: worker 1 failed before pushing it, although
  // its prefetch thread had read record 27 long before.
  EXPECT_EQ(ValidCheckpoints(ckpt.path(), 0), (std::vector<int64_t>{3, 2}));
}

}  // namespace
}  // namespace test
}  // namespace nereus

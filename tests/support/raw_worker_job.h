// A job of one server whose worker 0 is the test's own RawWorker, for tests
// that send a live server messages or frames of their choosing.
#ifndef NEREUS_TESTS_SUPPORT_RAW_WORKER_JOB_H_
#define NEREUS_TESTS_SUPPORT_RAW_WORKER_JOB_H_

#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"

namespace nereus {
namespace test {

struct RawWorkerJob {
  RawWorkerJob() : cluster(OneServerAndTheTestAsWorker(), dir), worker(cluster.coordinator_address()) {}

  TempDir dir;
  LocalCluster cluster;
  RawWorker worker;  // Not started: worker.Start().
};

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_RAW_WORKER_JOB_H_

// nereus_keygen: makes the CURVE key files of a job (see common/net/curve_keys.h).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <iostream>

#include "common/base/init_binary.h"
#include "common/net/curve_keys.h"

DEFINE_int32(servers, 1, "Number of server processes in the job (one key pair each).");
DEFINE_int32(workers, 1, "Number of worker processes in the job (one key pair each).");

int main(int argc, char** argv) {
  nereus::InitBinary(
      "Makes a job's CURVE keys: the job's key pair and one pair per node.\n"
      "  nereus_keygen DIR --servers=S --workers=W\n"
      "then give every process of the job --curve_dir=DIR (and an explicit --rank). Copy to each host only\n"
      "what it needs: job.*, its nodes' NAME.secret and every NAME.public.",
      &argc, &argv);
  if (argc != 2) {
    LOG(ERROR) << "usage: nereus_keygen DIR --servers=S --workers=W (see --help)";
    return 2;
  }
  nereus::Status st = nereus::WriteJobKeys(argv[1], FLAGS_servers, FLAGS_workers);
  if (!st.ok()) {
    LOG(ERROR) << st.message();
    return 1;
  }
  std::cout << "wrote CURVE keys for " << FLAGS_servers << " server(s) and " << FLAGS_workers << " worker(s) to "
            << argv[1] << "\n";
  return 0;
}

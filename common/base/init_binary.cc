#include "common/base/init_binary.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

namespace nereus {

void InitBinary(const char* usage, int* argc, char*** argv) {
  gflags::SetUsageMessage(usage);
  gflags::ParseCommandLineFlags(argc, argv, true);
  google::InitGoogleLogging((*argv)[0]);
  FLAGS_logtostderr = true;
}

}  // namespace nereus

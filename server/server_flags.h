// Command-line flags of a parameter server, shared by the binaries that run
// one (nereus_server, and nereus_bench's in-process servers) so that their
// names and meanings agree. Linked only into binaries.
#ifndef NEREUS_SERVER_SERVER_FLAGS_H_
#define NEREUS_SERVER_SERVER_FLAGS_H_

#include <gflags/gflags.h>

#include "common/base/status.h"

DECLARE_int32(apply_threads);

namespace nereus {

// --apply_threads as ParamServerOptions::apply_threads: -1 becomes the cores
// this process may run on (AvailableCores). Errors name the flag.
StatusOr<int> ApplyThreadsFromFlags();

}  // namespace nereus

#endif  // NEREUS_SERVER_SERVER_FLAGS_H_

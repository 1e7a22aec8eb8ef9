// Command-line flags shared by every Nereus binary (server, coordinator,
// worker, bench), defined once so their names and meanings agree. Linked only
// into binaries, never into the libraries. The worker's scheduling flags are
// in worker/client/client_flags.h.
#ifndef NEREUS_COMMON_NET_NODE_FLAGS_H_
#define NEREUS_COMMON_NET_NODE_FLAGS_H_

#include <gflags/gflags.h>

#include "common/base/status.h"
#include "common/net/node.h"

DECLARE_string(coordinator);
DECLARE_int32(rank);
DECLARE_string(bind_host);
DECLARE_int32(startup_timeout_s);
DECLARE_int32(io_threads);
DECLARE_int32(streams);
DECLARE_bool(resume);
DECLARE_string(curve_dir);

namespace nereus {

// NodeOptions for `role` from the flags above; errors name the bad flag.
StatusOr<NodeOptions> NodeOptionsFromFlags(pb::Role role);

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_NODE_FLAGS_H_

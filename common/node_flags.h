// Command-line flags shared by every Nereus binary (server, coordinator,
// worker, bench), defined once so their names and meanings agree. Linked only
// into binaries, never into the libraries.
#ifndef NEREUS_COMMON_NODE_FLAGS_H_
#define NEREUS_COMMON_NODE_FLAGS_H_

#include <gflags/gflags.h>

#include "common/node.h"
#include "common/status.h"
#include "nereus/client.h"

DECLARE_string(coordinator);
DECLARE_int32(rank);
DECLARE_string(bind_host);
DECLARE_int32(startup_timeout_s);
DECLARE_int32(io_threads);
DECLARE_int32(streams);
DECLARE_string(schedule);
DECLARE_uint64(credit_bytes);
DECLARE_string(merge);
DECLARE_string(timeline);
DECLARE_int32(timeline_every);

namespace nereus {

// NodeOptions for `role` from the flags above; errors name the bad flag.
StatusOr<NodeOptions> NodeOptionsFromFlags(pb::Role role);

// A worker's ClientOptions from the flags above (node and scheduling flags).
StatusOr<ClientOptions> ClientOptionsFromFlags();

}  // namespace nereus

#endif  // NEREUS_COMMON_NODE_FLAGS_H_

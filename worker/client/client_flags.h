// The worker's communication flags (--schedule, --credit_bytes, --batch_bytes, --merge,
// --timeline, --timeline_every, --sfb and HybComm's rates --sfb_link_gbit, --sfb_rebuild_gflops,
// --sfb_update_gbytes, --sfb_apply_gbytes, its trials --sfb_trial_clocks and forced
// --sfb_schedule) and ClientOptionsFromFlags, for the binaries
// that make a Client (nereus_worker, nereus_bench). Linked only into
// binaries, never into the libraries; the node flags they build on are in
// common/net/node_flags.h.
#ifndef NEREUS_WORKER_CLIENT_CLIENT_FLAGS_H_
#define NEREUS_WORKER_CLIENT_CLIENT_FLAGS_H_

#include <gflags/gflags.h>

#include "common/base/status.h"
#include "common/net/node_flags.h"
#include "nereus/client.h"

DECLARE_string(schedule);
DECLARE_uint64(credit_bytes);
DECLARE_uint64(batch_bytes);
DECLARE_string(merge);
DECLARE_string(timeline);
DECLARE_int32(timeline_every);
DECLARE_string(sfb);
DECLARE_double(sfb_link_gbit);
DECLARE_double(sfb_rebuild_gflops);
DECLARE_double(sfb_update_gbytes);
DECLARE_double(sfb_apply_gbytes);
DECLARE_int32(sfb_trial_clocks);
DECLARE_string(sfb_schedule);

namespace nereus {

// A worker's ClientOptions from the flags above and the node flags; errors
// name the bad flag.
StatusOr<ClientOptions> ClientOptionsFromFlags();

}  // namespace nereus

#endif  // NEREUS_WORKER_CLIENT_CLIENT_FLAGS_H_

#include "server/server_flags.h"

#include "server/apply_pool.h"

DEFINE_int32(apply_threads, -1,
             "Server: threads that make this server's updates (average the workers' gradients of a partition and "
             "take the solver step), several partitions at once, each partition's updates one at a time and in "
             "order, so the weights are bitwise the same for any number; the receive thread then only checks, acks "
             "and stores, and goes on reading. -1 (default): one per core this process may run on (its CPU "
             "affinity); 0: no threads, every update on the receive thread. Updates of under 64 KB that one "
             "message makes ready stay on the receive thread.");

namespace nereus {

StatusOr<int> ApplyThreadsFromFlags() {
  if (FLAGS_apply_threads < -1 || FLAGS_apply_threads > 1024)
    return InvalidArgumentError("--apply_threads must be -1 (one per core), 0 or a count up to 1024, got " +
                                std::to_string(FLAGS_apply_threads));
  return FLAGS_apply_threads == -1 ? AvailableCores() : FLAGS_apply_threads;
}

}  // namespace nereus

// Simulator: an event-driven prediction of one BSP iteration of a data-parallel
// job with one worker and one server shard per host (as the emulated cluster
// and Poseidon run), from per-layer compute times and tensor sizes.
//
// What it models, event by event:
//  - each worker's forward, layer by layer, waiting for the layer's weights of
//    the clock (all its partitions pulled), then its backward, top down;
//  - at the end of a layer's backward (wfbp, priority, full) or of the whole
//    backward (sequential), one push per partition, placed on servers by the
//    same ShardMap the job uses, queued per server: by layer (nearer the input
//    first) under priority/full, first in first out otherwise, with at most
//    credit_bytes in flight per server under priority/full (an item larger
//    than the credit goes alone), the credit coming back with the ack;
//  - transfers: each host has an uplink and a downlink of `link_bytes_per_s`
//    each, first come first served; a message between two hosts holds the
//    sender's uplink and the receiver's downlink (cut through: it ends no
//    sooner than its own transfer on either, plus the latency); a message
//    within one host (a worker and its co-located shard) crosses no link;
//    every message also costs `alpha_s`;
//  - the server: once every worker's gradient of a partition's clock is in,
//    one apply of bytes x workers x apply_s_per_byte (one apply at a time per
//    server), then the new weights go back to every worker (the pull that rode
//    on the push), which completes that worker's layer for the next clock.
// Events due at the same time run in the order they were scheduled.
// Merging of small layers (MG-WFBP) and the acks' own bytes are not modelled.
#ifndef NEREUS_BENCH_SIM_SIMULATOR_H_
#define NEREUS_BENCH_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "nereus/client.h"

namespace nereus {
namespace bench {

struct SimLayer {
  double forward_s = 0;
  double backward_s = 0;
  std::vector<uint64_t> tensor_elements;  // float32 tensors, in registration order.
};

struct SimOptions {
  int hosts = 1;  // One worker and one server each.
  Schedule schedule = Schedule::kFull;
  double link_bytes_per_s = 1.25e9;  // Payload bytes a second, each direction, per host.
  double latency_s = 0;              // One way, between two hosts.
  double alpha_s = 0;                // Fixed cost of every message.
  double apply_s_per_byte = 0;       // Server: per byte of a partition, per worker gradient averaged.
  uint64_t partition_bytes = 1 << 20;
  uint64_t credit_bytes = 2 << 20;  // priority/full only.
  int iterations = 5;               // Simulated; the first is not counted.
};

struct SimResult {
  double iteration_s = 0;  // Mean time between the starts of consecutive iterations.
  double compute_s = 0;    // Forward plus backward of one iteration.
  double wait_s = 0;       // iteration_s - compute_s: waiting for weights.
  double link_busy_s = 0;  // Busiest link's transfer time in one iteration.
  uint64_t events = 0;
  // Per worker, when each iteration's first forward began (iterations + 1
  // entries: the last is the start of the one after the last simulated).
  std::vector<std::vector<double>> starts;
};

StatusOr<SimResult> Simulate(const std::vector<SimLayer>& layers, const SimOptions& options);

// Payload bytes a second a TCP stream gets from a link shaped to `mbit` Mbit/s
// at `mtu` (1448 payload bytes of every 1514 the shaper counts at MTU 1500).
double PayloadBytesPerSecond(double mbit, int mtu = 1500);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_SIM_SIMULATOR_H_

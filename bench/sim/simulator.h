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
//    on the push), which completes that worker's layer for the next clock;
//  - sufficient factors (a layer whose weight HybComm sends that way,
//    SimLayer::sfb): at the end of its backward a worker queues one message
//    of the factors (4 K (M + N) bytes) for every other worker, in a queue
//    per peer with the same priorities and credit as pushes (as the client's
//    FactorExchange); once a worker has every worker's factors of a clock,
//    its applier (one rebuild at a time per worker) takes 2 (K P) M N FLOPs
//    at sfb_flops_per_s plus the SGD step of 4 M N bytes x sfb_apply_s_per_byte,
//    and the weight is ready for the next clock. The layer's other tensors
//    (its bias) still go through the servers.
// Events due at the same time run in the order they were scheduled.
// Merging of small layers (MG-WFBP), batching of small units and the acks'
// own bytes are not modelled.
#ifndef NEREUS_BENCH_SIM_SIMULATOR_H_
#define NEREUS_BENCH_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/sim/models.h"
#include "common/base/status.h"
#include "common/update/hybcomm.h"
#include "nereus/client.h"

namespace nereus {
namespace bench {

struct SimLayer {
  double forward_s = 0;
  double backward_s = 0;
  std::vector<uint64_t> tensor_elements;  // float32 tensors, in registration order.
  // The first tensor, an sfb_rows x sfb_cols weight (M x N), travels as
  // sufficient factors of sfb_factor_rows (K) rows per worker among the
  // workers instead of through the servers.
  bool sfb = false;
  int64_t sfb_rows = 0, sfb_cols = 0, sfb_factor_rows = 0;
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
  // A worker's rebuild of an SFB layer's gradient from the factors (the
  // GEMM), FLOP/s; 0: free.
  double sfb_flops_per_s = 0;
  // Its SGD step on the M x N weight, per byte of it; < 0: apply_s_per_byte
  // (the client steps on the CPU as a server does).
  double sfb_apply_s_per_byte = -1;
};

struct SimResult {
  double iteration_s = 0;  // Mean time between the starts of consecutive iterations.
  double compute_s = 0;    // Forward plus backward of one iteration.
  double wait_s = 0;       // iteration_s - compute_s: waiting for weights.
  double link_busy_s = 0;  // Busiest link's transfer time in one iteration.
  // Per worker per iteration (mean): payload bytes it sent and received
  // over links (its own server's traffic crosses none), of which factors.
  double sent_bytes = 0, received_bytes = 0, factor_bytes_sent = 0;
  double rebuild_s = 0;  // Per worker per iteration: its applier's busy time.
  uint64_t events = 0;
  // Per worker, when each iteration's first forward began (iterations + 1
  // entries: the last is the start of the one after the last simulated).
  std::vector<std::vector<double>> starts;
};

StatusOr<SimResult> Simulate(const std::vector<SimLayer>& layers, const SimOptions& options);

// The rates HybComm prices its paths with in the job `options` simulates
// (options.hosts set): its link, the workers' rebuild (sfb_flops_per_s and
// the SGD step) and the servers' apply of one partition's gradients from
// every worker; a rate the options leave free (0) is +infinity.
HybCommRates HybCommRatesOf(const SimOptions& options);

// The simulator's layers of `model` on `hosts` hosts (one worker and one
// server each), with per-layer compute `forward_s` and `backward_s`: every
// learnable tensor, and for each fully connected layer HybComm's choice
// (common/update/hybcomm.h: `sfb`, P1 = P2 = hosts, BSP, K = FactorRows(layer,
// batch), priced at `rates`, e.g. HybCommRatesOf(the options simulated)), by
// the overlap-aware prior a job's client orders its trials with: the
// backward of the layers below a layer hides that much of its rebuild
// (FcLayerShape::overlap_s). `choices`, if given, gets the choices of the
// fully connected layers.
StatusOr<std::vector<SimLayer>> SimLayersOf(const ModelSpec& model, const std::vector<double>& forward_s,
                                            const std::vector<double>& backward_s, int hosts, SfbMode sfb, int batch,
                                            const HybCommRates& rates, std::vector<HybCommChoice>* choices = nullptr);

// Payload bytes a second a TCP stream gets from a link shaped to `mbit` Mbit/s
// at `mtu` (1448 payload bytes of every 1514 the shaper counts at MTU 1500).
double PayloadBytesPerSecond(double mbit, int mtu = 1500);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_SIM_SIMULATOR_H_

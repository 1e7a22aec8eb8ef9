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
//    one apply of bytes x workers x apply_s_per_byte on one of the server's
//    apply_threads (as a server applies several partitions at once, each
//    partition's updates in order: docs/SCALING.md, "Servers on every
//    core"), then the new weights go back to every worker (the pull that
//    rode on the push), which completes that worker's layer for the next
//    clock;
//  - sufficient factors (a layer whose weight HybComm sends that way,
//    SimLayer::sfb): at the end of its backward a worker queues one message
//    of the factors (4 K (M + N) bytes) for every other worker, in a queue
//    per peer with the same priorities and credit as pushes (as the client's
//    FactorExchange); once a worker has every worker's factors of a clock,
//    its applier (one rebuild at a time per worker) takes 2 (K_r P) M N FLOPs
//    at sfb_flops_per_s (K_r = SimLayer::sfb_rebuild_rows: the compute's
//    batch, so that in a model shrunk by F the rebuild costs the full-size
//    one's / F, as the compute does) plus the SGD step of 4 M N bytes x
//    sfb_apply_s_per_byte, and the weight is ready for the next clock. The
//    layer's other tensors (its bias) still go through the servers.
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
  // The rows K_r per worker the rebuild's GEMM is charged for (2 K_r P M N
  // FLOPs); 0: sfb_factor_rows. SimLayersOf sets the compute's batch K: in a
  // model shrunk by F (bench/sim/models.h) the factors sent have K / sqrt(F)
  // rows, and a GEMM over them alone would cost the full-size one's / F^1.5,
  // sqrt(F) times less than the compute's / F.
  int64_t sfb_rebuild_rows = 0;
};

struct SimOptions {
  int hosts = 1;  // One worker and one server each.
  Schedule schedule = Schedule::kFull;
  double link_bytes_per_s = 1.25e9;  // Payload bytes a second, each direction, per host.
  double latency_s = 0;              // One way, between two hosts.
  double alpha_s = 0;                // Fixed cost of every message.
  double apply_s_per_byte = 0;       // Server: per byte of a partition, per worker gradient averaged.
  // Partitions a server applies at once, each at apply_s_per_byte (one apply
  // thread's cost); a server's --apply_threads (default one per core: 0,
  // updates on the receive thread, is one here too).
  int apply_threads = 1;
  uint64_t partition_bytes = 1 << 20;
  uint64_t credit_bytes = 2 << 20;  // priority/full only.
  int iterations = 5;               // Simulated; the first is not counted.
  // A worker's rebuild of an SFB layer's gradient from the factors (the
  // GEMM), FLOP/s; 0: free.
  double sfb_flops_per_s = 0;
  // Its SGD step on the M x N weight, per byte of it; < 0: apply_s_per_byte
  // (the client steps on the CPU as a server does).
  double sfb_apply_s_per_byte = -1;
  // Where the rebuild runs. false: on the worker's applier, beside its
  // compute (a client rebuilding on its CPU). true: on the worker's device,
  // as the emulated cluster's --sfb_rebuild=device does (emulated_worker.h):
  // once every worker's factors of clock c are in, the layer's weights count
  // as arrived, and the device is held for the rebuild just before the
  // layer's forward of clock c + 1 (it adds to that iteration, not to
  // compute_s).
  bool rebuild_on_device = false;
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

// Scaling efficiency against compute alone, the one definition of every
// study (docs/SCALING.md): compute_s / iteration_s, a worker's throughput
// over that of the same device training by itself (no communication, as
// Poseidon measures speedup against single-machine training); at N hosts the
// job makes N x this of one device's standalone throughput. 0 if the
// iteration took no time.
double ScalingEfficiency(const SimResult& result);

// The rates HybComm prices its paths with in the job `options` simulates
// (options.hosts set): its link, the workers' rebuild (sfb_flops_per_s and
// the SGD step) and the servers' apply of one partition's gradients from
// every worker (all of a server's apply_threads together, as HybComm counts
// it); a rate the options leave free (0) is +infinity.
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
//
// What the rebuild is charged for (SimLayer::sfb_rebuild_rows):
//  - kFullSize: the compute's batch, 2 K P M N FLOPs of the layer as given:
//    in a model shrunk by F, the full-size rebuild / F, as its compute, which
//    at a device slowed as the emulation's (docs/SCALING.md) takes as long as
//    the full-size rebuild at full speed (the emulated device's rebuild,
//    RebuildSeconds);
//  - kFactorsSent: the GEMM over the factors sent (FactorRows rows each),
//    what the emulated client's real GEMM on this CPU computes
//    (--sfb_rebuild=cpu): in a shrunk model / F^1.5.
// At full size (F = 1) both are the same. HybComm prices the rebuild as
// charged: it counts the factor rows sent, so it is told the rebuild rate
// times sfb_factor_rows / sfb_rebuild_rows, as an emulated client is
// (SetRebuildOptions).
enum class RebuildCharge { kFullSize, kFactorsSent };
StatusOr<std::vector<SimLayer>> SimLayersOf(const ModelSpec& model, const std::vector<double>& forward_s,
                                            const std::vector<double>& backward_s, int hosts, SfbMode sfb, int batch,
                                            const HybCommRates& rates, std::vector<HybCommChoice>* choices = nullptr,
                                            RebuildCharge charge = RebuildCharge::kFullSize);

// Payload bytes a second a TCP stream gets from a link shaped to `mbit` Mbit/s
// at `mtu` (1448 payload bytes of every 1514 the shaper counts at MTU 1500).
double PayloadBytesPerSecond(double mbit, int mtu = 1500);

}  // namespace bench
}  // namespace nereus

#endif  // NEREUS_BENCH_SIM_SIMULATOR_H_

// HybComm (Poseidon, Zhang et al., USENIX ATC 2017): for each fully connected
// layer, whether its weight gradient travels as a full matrix through the
// parameter servers (PS) or as sufficient factors broadcast among the
// workers (SFB), decided by what each path costs per clock: the bytes it
// moves over a node's link plus the work it adds, the rebuild of the update
// from every worker's factors (SFB) or the servers' apply (PS). Pure: the
// rates are inputs (measured or declared by the client, worker/client). The
// mode (SfbMode) is public: nereus/options.h.
#ifndef NEREUS_COMMON_UPDATE_HYBCOMM_H_
#define NEREUS_COMMON_UPDATE_HYBCOMM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "nereus/options.h"
#include "proto/nereus.pb.h"

namespace nereus {

// One eligible layer: an M x N weight (M = rows, N = cols) whose gradient is
// left^T * right with `batch` (K) rows per worker.
struct FcLayerShape {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t batch = 0;
  // Seconds of backward that remain after this layer's (the layers below
  // it): the rebuild of an SFB update runs beside them, on its own thread
  // or device, and only what exceeds them lengthens the clock. 0: unknown
  // (then the whole rebuild counts, as at Init, before any backward ran).
  double overlap_s = 0;
};

// What the cost model turns bytes and work into seconds with. A rate of
// +infinity makes that part free (e.g. infinite compute rates reduce the rule
// to Poseidon's bytes-only one); 0 means unknown.
struct HybCommRates {
  // A node's link, bytes per second each way (full duplex: a node sends and
  // receives the same bytes per clock on either path, at once).
  double link_bytes_per_s = 0;
  // Where the workers rebuild an SFB layer's update: its GEMM (FLOPs per
  // second, 2 per multiply-add) and its SGD step (bytes of weights per second).
  double rebuild_flops_per_s = 0;
  double update_bytes_per_s = 0;
  // A server's apply: the average of the P1 workers' gradients and the SGD
  // step, in bytes of weights per second (all its apply threads together).
  double apply_bytes_per_s = 0;
  std::string rebuild_on = "cpu";  // Where the rebuild runs, for the table.
  std::string origin;              // How the rates were obtained, for the table.
};

struct HybCommChoice {
  FcLayerShape layer;
  // Bytes per clock (float32; the cost model of the Poseidon paper), sent and
  // received together (half of them each way):
  //   PS, per node with a worker and a server on it: 4 * 2MN(P1+P2-2)/P2
  //   SFB, per worker:                               4 * 2K(P1-1)(M+N)
  double ps_bytes = 0;
  double sfb_bytes = 0;
  // The rebuild's GEMM: 2 * (P1 K) * M * N FLOPs (every worker's factors).
  double rebuild_flops = 0;
  // Seconds per clock (set when `priced`: the rates were all known):
  //   ps_link_s   = ps_bytes / 2 / link          ps_apply_s    = 4MN / P2 / apply
  //   sfb_link_s  = sfb_bytes / 2 / link         sfb_rebuild_s = rebuild_flops / rebuild + 4MN / update
  //                                              sfb_hidden_s  = min(sfb_rebuild_s, layer.overlap_s)
  //   ps_s = ps_link_s + ps_apply_s              sfb_s = sfb_link_s + sfb_rebuild_s - sfb_hidden_s
  // Each server applies its 1/P2 of the layer; each worker rebuilds all of
  // it, beside the backward of the layers below (the link is not credited
  // so: every layer's bytes share it, the rebuild's thread nothing else).
  bool priced = false;
  double ps_link_s = 0, ps_apply_s = 0, ps_s = 0;
  double sfb_link_s = 0, sfb_rebuild_s = 0, sfb_hidden_s = 0, sfb_s = 0;
  bool sfb = false;
  std::string reason;  // Why, for the start-up table.
};

// The rule of auto: SFB iff sfb_s <= ps_s (a tie goes to SFB, as in
// Poseidon's rule). Only BSP can use SFB: under SSP or async, auto chooses PS
// for every layer (the reason says so) and `on` is an InvalidArgument error.
// Auto under BSP needs every rate > 0 (InvalidArgument naming the unknown or
// bad one otherwise); off, on and the fallback price the layers only if every
// rate is > 0. Errors also name a layer with a non-positive dimension or
// batch, and a job without workers or servers.
StatusOr<std::vector<HybCommChoice>> DecideHybComm(SfbMode mode, int workers, int servers, pb::Consistency consistency,
                                                   const HybCommRates& rates, const std::vector<FcLayerShape>& layers);

// The start-up table: a header naming the job and the rates, then one line
// per layer: name, shape, batch, bytes per clock by each path, each path's
// cost in ms (PS: link + apply = total; SFB: link + rebuild - hidden =
// total), the choice and why ("-" where unpriced).
std::string FormatHybCommTable(SfbMode mode, int workers, int servers, const HybCommRates& rates,
                               const std::vector<HybCommChoice>& choices);

}  // namespace nereus

#endif  // NEREUS_COMMON_UPDATE_HYBCOMM_H_

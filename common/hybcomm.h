// HybComm (Poseidon, Zhang et al., USENIX ATC 2017): for each
// fully connected layer, whether its weight gradient travels as a full matrix
// through the parameter servers (PS) or as sufficient factors broadcast among
// the workers (SFB), decided by the bytes each path moves per clock. The mode
// (SfbMode) is public: nereus/hybcomm.h.
#ifndef NEREUS_COMMON_HYBCOMM_H_
#define NEREUS_COMMON_HYBCOMM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "nereus/hybcomm.h"
#include "proto/nereus.pb.h"

namespace nereus {

// One eligible layer: an M x N weight (M = rows, N = cols) whose gradient is
// left^T * right with `batch` (K) rows per worker.
struct FcLayerShape {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t batch = 0;
};

struct HybCommChoice {
  FcLayerShape layer;
  // Bytes per clock (float32; the cost model of the Poseidon paper):
  //   PS, per node with a worker and a server on it: 4 * 2MN(P1+P2-2)/P2
  //   SFB, per worker:                               4 * 2K(P1-1)(M+N)
  double ps_bytes = 0;
  double sfb_bytes = 0;
  bool sfb = false;
  std::string reason;  // Why, for the start-up table.
};

// The rule: SFB iff 2K(P1-1)(M+N) <= 2MN(P1+P2-2)/P2 (compared exactly, in
// integers). Only BSP can use SFB: under SSP or async, auto chooses PS for
// every layer (the reason says so) and `on` is an InvalidArgument error.
// Errors also name a layer with a non-positive dimension or batch, and a job
// without workers or servers.
StatusOr<std::vector<HybCommChoice>> DecideHybComm(SfbMode mode, int workers, int servers, pb::Consistency consistency,
                                                   const std::vector<FcLayerShape>& layers);

// The start-up table: one line per layer (name, shape, batch, bytes per clock
// by each path, the choice and why), under a header naming the job.
std::string FormatHybCommTable(SfbMode mode, int workers, int servers, const std::vector<HybCommChoice>& choices);

}  // namespace nereus

#endif  // NEREUS_COMMON_HYBCOMM_H_

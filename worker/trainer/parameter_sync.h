// ParameterSync: the seam between the Solver and data-parallel distribution.
// With a ParameterSync, the Solver computes gradients locally but does not
// update the weights itself: it hands each layer's gradients over as soon as
// they are final and, before each layer's forward, waits for that layer's
// weights of the current iteration. Without one (nullptr) the Solver applies
// Caffe's SGD update locally.
//
// Threading: every method is called from the thread that drives the Solver.
// Layer indices are Net layer indices of the train net; map a layer to its
// parameters with Net::layer_learnable_param_ids(layer), whose entries index
// the `params` vector given to Init.
#ifndef NEREUS_WORKER_TRAINER_PARAMETER_SYNC_H_
#define NEREUS_WORKER_TRAINER_PARAMETER_SYNC_H_

#include <cstdint>
#include <vector>

#include "common/base/status.h"
#include "proto/nereus.pb.h"
#include "worker/trainer/blob.h"

namespace nereus {

class ParameterSync {  // owned by the caller, outlives the Solver
 public:
  virtual ~ParameterSync() = default;

  // Called once before the first training iteration (after any Restore) with
  // the train net's learnable params (Net::learnable_params(), in Net order),
  // their lr_mult and decay_mult, and the solver's SGD configuration. The
  // blobs stay valid for the Solver's lifetime; their data holds the initial
  // (or restored) weights.
  virtual Status Init(const std::vector<Blob*>& params, const std::vector<float>& lr_mult,
                      const std::vector<float>& decay_mult, const pb::SgdConfig& sgd) = 0;

  // Called right before layer `layer`'s forward in iteration `iter` (for
  // every layer, once per iteration even with iter_size > 1, and for every
  // layer before a test pass at iteration `iter`): blocks until that layer's
  // params hold the weights for `iter`, i.e. after `iter` updates. May be
  // called more than once for the same (layer, iter): the later calls must
  // return at once.
  virtual Status WaitWeights(int layer, int64_t iter) = 0;

  // Called after layer `layer`'s backward in iteration `iter`, for every
  // layer, last to first; the layer's param diffs are final (already
  // normalized by iter_size and clipped, not regularized: the servers
  // regularize). Must return at once. The diffs stay untouched until
  // FinishIteration(iter) returns (the next iteration starts by zeroing
  // them), so an implementation may read them until then.
  virtual Status GradientsReady(int layer, int64_t iter) = 0;

  // Called at the end of iteration `iter` instead of the local SGD update.
  virtual Status FinishIteration(int64_t iter) = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_PARAMETER_SYNC_H_

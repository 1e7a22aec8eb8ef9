// Filter, as Caffe's: bottoms 0 .. K-1 the blobs to filter (each N x ...),
// bottom K the selector (N, or N x 1 x ...); top k holds the rows of bottom
// k whose selector is nonzero, in order (M x ..., M the count of them). At
// set-up, before any selector has been read, the tops have all N rows (as
// Caffe's first Reshape); from the first forward on, M. M may be 0.
//
// Backward: each bottom row that was forwarded gets its top row's gradient,
// every other row 0. The selector gets no gradient: asking for it is fatal,
// naming the layer, as in Caffe, and a Net never asks (AllowForceBackward).
// The rows selected are the layer's only state: those of the last forward,
// which backward uses (a job runs backward right after forward).
//
// GPU code (filter_layer.cu): the selector is read on the host (as Caffe's
// Reshape does) and the selected rows and their inverse are sent to the
// device, then one thread per element copies (bitwise the CPU's).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_FILTER_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_FILTER_LAYER_H_

#include <memory>
#include <string>
#include <vector>

#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {

class FilterLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Filter"; }
  int MinBottomBlobs() const override { return 2; }
  int MinTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override {
    return bottom_index != static_cast<int>(layer_param_.bottom_size()) - 1;
  }

  // The bottom rows the last Reshape selected, in order.
  const std::vector<int>& indices_to_forward() const { return indices_to_forward_; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  std::string ShapeError(const std::vector<Blob*>& bottom) const;

  bool first_reshape_ = true;
  std::vector<int> indices_to_forward_;
#ifdef NEREUS_HAVE_CUDA
  // On the device: the selected rows (M), and each bottom row's top row or
  // -1 (N); sent once a Reshape.
  std::shared_ptr<SyncedMemory> gpu_forward_;
  std::shared_ptr<SyncedMemory> gpu_backward_;
#endif
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_FILTER_LAYER_H_

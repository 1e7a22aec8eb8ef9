// Layers that move or reshape data without arithmetic, as Caffe's:
//   Flatten: top = bottom with axes [axis, end_axis] merged into one; shares
//            the bottom's memory (not in place).
//   Reshape: top = bottom with the shape reshape_param gives (0 copies a
//            bottom dimension, one -1 is inferred; axis/num_axes choose the
//            bottom axes replaced); shares the bottom's memory.
//   Slice:   splits the bottom along `axis` (or the deprecated slice_dim) at
//            slice_point (or into equal parts, one per top).
//   Silence: consumes its bottoms, produces nothing; backward writes zeros.
//   Input:   no bottoms; tops of input_param.shape (one shape for all tops or
//            one per top), filled by the caller (deploy nets, tests).
//   ArgMax:  the indices (and with out_max_val the values) of the top_k
//            largest entries per item, or along `axis`; no gradient. The CPU
//            sorts each item's entries; the GPU, one thread an item, picks
//            them one rank at a time (ops::ArgMaxNext): the same result for
//            inputs without NaN.
// (Split, which the Net also inserts itself, is worker/trainer/split_layer.h.)
#ifndef NEREUS_WORKER_TRAINER_LAYERS_SHAPE_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_SHAPE_LAYERS_H_

#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace ops {

// ArgMax's ranks one at a time: the largest (value, index) pair of an item's
// `dim` entries, `stride` floats apart, below (prev_value, prev_index) in
// the pairs' order (by value, then by index: ties go to the larger index, as
// Caffe's sort of pairs), or the largest of all when `first`.
NEREUS_HOST_DEVICE inline void ArgMaxNext(const float* x, int dim, int stride, bool first, float prev_value,
                                          int prev_index, float* value, int* index) {
  bool found = false;
  for (int j = 0; j < dim; ++j) {
    const float v = x[j * stride];
    if (!first && !(v < prev_value || (v == prev_value && j < prev_index))) continue;
    if (!found || v >= *value) {  // j ascends: an equal value has the larger index
      *value = v;
      *index = j;
      found = true;
    }
  }
}

// Writes rank j (value, index) of item i to ArgMax's top (the layout of
// ArgMaxLayer::Reshape): along the axis with `axis`, else the indices then
// (out_max_val) the values per item.
NEREUS_HOST_DEVICE inline void ArgMaxWrite(float* out, int i, int j, int top_k, int axis_dist, bool has_axis,
                                           bool out_max_val, float value, int index) {
  if (has_axis) {
    out[(i / axis_dist * top_k + j) * axis_dist + i % axis_dist] = out_max_val ? value : static_cast<float>(index);
  } else if (out_max_val) {
    out[2 * i * top_k + j] = static_cast<float>(index);
    out[2 * i * top_k + top_k + j] = value;
  } else {
    out[i * top_k + j] = static_cast<float>(index);
  }
}

}  // namespace ops

class FlattenLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Flatten"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool HasGpuCode() const override { return true; }

 protected:
  // Sharing memory is the same on every device: the GPU passes are Layer's
  // defaults, which run these.
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
};

// A layer with nothing to compute on any device: empty passes, which
// Layer's default GPU passes run.
class NoComputeLayer : public Layer {
 public:
  using Layer::Layer;
  bool HasGpuCode() const override { return true; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
};

// The top shares the bottom's memory: nothing to compute.
class ReshapeLayer : public NoComputeLayer {
 public:
  using NoComputeLayer::NoComputeLayer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Reshape"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 private:
  // The top shape for `bottom`, or an error naming the mismatch.
  StatusOr<std::vector<int>> TopShape(const Blob& bottom) const;
};

class SliceLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Slice"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }

 protected:
  // On a GPU, Concat's copy (concat_layer.h's ConcatCopyGpu), the
  // other way.
  NEREUS_LAYER_PASSES;

 private:
  // Sizes of the tops along the slice axis for `bottom`, or an error.
  StatusOr<std::vector<int>> TopSizes(const Blob& bottom, int num_tops) const;
  int SliceAxis(const Blob& bottom) const;
  int slice_axis_ = 1;
  int num_slices_ = 0;
  int slice_size_ = 0;
};

class SilenceLayer : public Layer {
 public:
  using Layer::Layer;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  const char* type() const override { return "Silence"; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 0; }
  bool HasGpuCode() const override { return true; }

 protected:
  // Forward_gpu is Layer's default, which runs this.
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
#ifdef NEREUS_HAVE_CUDA
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;
#endif
};

// Nothing to compute: the caller fills the tops (on the host or, through
// mutable_gpu_data, on the device).
class InputLayer : public NoComputeLayer {
 public:
  using NoComputeLayer::NoComputeLayer;
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  // The caller shapes and fills the tops.
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  const char* type() const override { return "Input"; }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
};

class ArgMaxLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "ArgMax"; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  bool AllowForceBackward(int bottom_index) const override { return false; }

 protected:
  // Ties go to the larger index (Caffe sorts (value, index) pairs).
  // No gradient: asking for one is fatal, naming the layer.
  NEREUS_LAYER_PASSES;

 private:
  // Entries per item (`dim`) and their distance (`axis_dist`) for `bottom`.
  void ItemGeometry(const Blob& bottom, int* dim, int* axis_dist) const;

  bool out_max_val_ = false;
  int top_k_ = 1;
  bool has_axis_ = false;
  int axis_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_SHAPE_LAYERS_H_

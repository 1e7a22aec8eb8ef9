// Layers that combine several bottoms of compatible shapes into one top.
//
// Concat (Caffe's ConcatLayer): joins the bottoms along concat_param.axis
// (default 1; the deprecated concat_dim is accepted, not both). All other
// dimensions must agree. Its GPU code (and Slice's, its inverse) copies one
// element a thread to or from the place ops::ConcatIndex gives.
//
// Eltwise (Caffe's EltwiseLayer): element-wise PROD, SUM (with one optional
// coefficient per bottom) or MAX of bottoms of identical shape. MAX routes
// each gradient to the bottom that supplied the maximum (on ties: bottom 1
// over bottom 0, then the earlier bottom; Caffe's order).
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CONCAT_ELTWISE_LAYERS_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CONCAT_ELTWISE_LAYERS_H_

#include <memory>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace ops {

// Eltwise MAX, per element, shared by the CPU loops and the GPU kernels
// (concat_eltwise_layers.cc and .cu): the first pair (ties go to bottom 1,
// as in Caffe), then each further bottom i when strictly greater.
NEREUS_HOST_DEVICE inline void EltwiseMaxFirst(float a, float b, float* top, int* index) {
  if (a > b) {
    *top = a;
    *index = 0;
  } else {
    *top = b;
    *index = 1;
  }
}
NEREUS_HOST_DEVICE inline void EltwiseMaxNext(float c, int i, float* top, int* index) {
  if (c > *top) {
    *top = c;
    *index = i;
  }
}
NEREUS_HOST_DEVICE inline float EltwiseMaxBackward(float top_diff, int index, int i) {
  return index == i ? top_diff : 0.0f;
}

// Where element `index` of a part (outer x part_axis x inner) is in the whole
// (outer x whole_axis x inner) that joins it at `offset` along the axis:
// Concat's bottom in its top, Slice's top in its bottom.
NEREUS_HOST_DEVICE inline int ConcatIndex(int index, int inner, int whole_axis, int part_axis, int offset) {
  const int part_chunk = part_axis * inner;
  return (index / part_chunk * whole_axis + offset) * inner + index % part_chunk;
}

}  // namespace ops

#ifdef NEREUS_HAVE_CUDA
// Concat's and Slice's copy on the device: to_whole, whole[ConcatIndex(i)] =
// part[i]; otherwise part[i] = whole[ConcatIndex(i)], for the part_count
// elements of the part.
void ConcatCopyGpu(gpu::Device* device, bool to_whole, int part_count, const float* from, float* to, int inner,
                   int whole_axis, int part_axis, int offset);
#endif

// Calls f(i, part i, its size along `axis`, where it starts there) for the
// parts of a concatenation along `axis`, in order: Concat's bottoms, Slice's
// tops.
template <typename F>
void ForEachPart(const std::vector<Blob*>& parts, int axis, F f) {
  int offset = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const int size = parts[i]->shape(axis);
    f(i, parts[i], size, offset);
    offset += size;
  }
}

class ConcatLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Concat"; }
  int MinBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // Empty when the bottoms fit together; otherwise what is wrong.
  std::string ShapeProblem(const std::vector<Blob*>& bottom, int* axis) const;

  int concat_axis_ = 1;
  int num_concats_ = 0;        // count(0, axis)
  int concat_input_size_ = 0;  // count(axis + 1)
};

class EltwiseLayer : public Layer {
 public:
  using Layer::Layer;
  NEREUS_LAYER_SETUP_AND_RESHAPE;
  const char* type() const override { return "Eltwise"; }
  int MinBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 1; }

 protected:
  NEREUS_LAYER_PASSES;

 private:
  // SUM's and PROD's gradient of bottom i, for the CPU or the GPU
  // (`math`: CpuMath, GpuMath, blob_math.h).
  template <class Math>
  void BackwardSumProd(const Math& math, const std::vector<Blob*>& top, const std::vector<Blob*>& bottom,
                       size_t i) const;

  caffe::EltwiseParameter::EltwiseOp op_ = caffe::EltwiseParameter::SUM;
  std::vector<float> coeffs_;
  bool stable_prod_grad_ = true;
  std::shared_ptr<SyncedMemory> max_idx_;  // MAX: which bottom won, per element (ints)
  int max_idx_count_ = 0;
};

template <class Math>
void EltwiseLayer::BackwardSumProd(const Math& math, const std::vector<Blob*>& top, const std::vector<Blob*>& bottom,
                                   size_t i) const {
  const int count = top[0]->count();
  const float* top_diff = math.diff(*top[0]);
  float* bottom_diff = math.mutable_diff(bottom[i]);
  if (op_ == caffe::EltwiseParameter::SUM) {
    if (coeffs_[i] == 1.0f) {
      math.copy(count, top_diff, bottom_diff);
    } else {
      math.scale(count, coeffs_[i], top_diff, bottom_diff);
    }
    return;
  }
  if (stable_prod_grad_) {
    // Product of the other bottoms, without dividing by this one.
    bool initialized = false;
    for (size_t j = 0; j < bottom.size(); ++j) {
      if (j == i) continue;
      if (!initialized) {
        math.copy(count, math.data(*bottom[j]), bottom_diff);
        initialized = true;
      } else {
        math.mul(count, math.data(*bottom[j]), bottom_diff, bottom_diff);
      }
    }
  } else {
    math.div(count, math.data(*top[0]), math.data(*bottom[i]), bottom_diff);
  }
  math.mul(count, bottom_diff, top_diff, bottom_diff);
}

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CONCAT_ELTWISE_LAYERS_H_

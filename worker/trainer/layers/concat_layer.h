// Concat (Caffe's ConcatLayer): joins the bottoms along concat_param.axis
// (default 1; the deprecated concat_dim is accepted, not both). All other
// dimensions must agree. Its GPU code (and Slice's, its inverse) copies one
// element a thread to or from the place ops::ConcatIndex gives.
#ifndef NEREUS_WORKER_TRAINER_LAYERS_CONCAT_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYERS_CONCAT_LAYER_H_

#include <string>
#include <vector>

#include "common/base/host_device.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace ops {

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

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYERS_CONCAT_LAYER_H_

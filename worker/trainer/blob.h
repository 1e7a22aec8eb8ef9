// Blob: an N-d array of floats holding a value (data) and its gradient
// (diff), Caffe's Blob<float> without the template. Memory lives in
// SyncedMemory so it can sit on the host or a device (the current one,
// gpu/device.h); without CUDA and without a current device the gpu_*
// accessors fail loudly. Update and the asum/sumsq/scale functions compute on
// the current device when the device copy is fresh, as Caffe's do in GPU
// mode, and on the host otherwise.
//
// Not thread-safe. Shapes are row-major, axis 0 first; count() is the product
// of all dimensions (1 for a 0-axis blob).
#ifndef NEREUS_WORKER_TRAINER_BLOB_H_
#define NEREUS_WORKER_TRAINER_BLOB_H_

#include <memory>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {

// Caffe's limit on the number of axes of a blob.
inline constexpr int kMaxBlobAxes = 32;

// Whether a blob can take `shape` (from a prototxt or a file): at most
// kMaxBlobAxes axes, no negative dimension, at most INT_MAX values.
// InvalidArgument naming the shape otherwise (Blob::Reshape CHECKs the same).
Status CheckBlobShape(const caffe::BlobShape& shape);

class Blob {
 public:
  Blob() = default;
  explicit Blob(const std::vector<int>& shape) { Reshape(shape); }
  // Legacy 4-d constructor.
  Blob(int num, int channels, int height, int width) { Reshape(num, channels, height, width); }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Changes the shape. Reallocates (and loses the contents) only when the new
  // count exceeds the capacity; otherwise the memory is kept. Dimensions must
  // be >= 0.
  void Reshape(const std::vector<int>& shape);
  void Reshape(const caffe::BlobShape& shape);
  void Reshape(int num, int channels, int height, int width);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  // "2 3 4 (24)".
  std::string shape_string() const;
  const std::vector<int>& shape() const { return shape_; }
  // Dimension of axis `index` (negative counts from the end).
  int shape(int index) const { return shape_[CanonicalAxisIndex(index)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int count() const { return count_; }
  // Product of dimensions [start_axis, end_axis).
  int count(int start_axis, int end_axis) const;
  // Product of dimensions [start_axis, num_axes).
  int count(int start_axis) const { return count(start_axis, num_axes()); }
  // Maps -num_axes..num_axes-1 to 0..num_axes-1; CHECKs the range.
  int CanonicalAxisIndex(int axis_index) const;

  // Legacy 4-d accessors: axes beyond num_axes() read as 1.
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;

  int offset(int n, int c = 0, int h = 0, int w = 0) const;
  int offset(const std::vector<int>& indices) const;

  // Copies data (or diff when copy_diff) from `source`. With reshape, this
  // blob takes the source's shape; otherwise the counts must match.
  void CopyFrom(const Blob& source, bool copy_diff = false, bool reshape = false);

  float data_at(int n, int c, int h, int w) const { return cpu_data()[offset(n, c, h, w)]; }
  float diff_at(int n, int c, int h, int w) const { return cpu_diff()[offset(n, c, h, w)]; }

  const float* cpu_data() const;
  float* mutable_cpu_data();
  const float* cpu_diff() const;
  float* mutable_cpu_diff();
  // Uses `data` (owned by the caller, at least count() floats) as host data.
  void set_cpu_data(float* data);
  // Device accessors; LOG(FATAL) when built without CUDA.
  const float* gpu_data() const;
  float* mutable_gpu_data();
  const float* gpu_diff() const;
  float* mutable_gpu_diff();

  const std::shared_ptr<SyncedMemory>& data() const { return data_; }
  const std::shared_ptr<SyncedMemory>& diff() const { return diff_; }

  // data -= diff (Caffe's Blob::Update; the solver does not use it for SGD,
  // which goes through SgdStep, but layers and tests may).
  void Update();

  // Reads shape and data (and diff when present) from `proto`. With reshape,
  // this blob takes the proto's shape (legacy num/channels/height/width
  // accepted); otherwise the shapes must match. Returns InvalidArgument on a
  // shape mismatch or a data size that does not match the shape.
  Status FromProto(const caffe::BlobProto& proto, bool reshape = true);
  void ToProto(caffe::BlobProto* proto, bool write_diff = false) const;
  // True when `other` (legacy 4-d or N-d) describes this blob's shape.
  bool ShapeEquals(const caffe::BlobProto& other) const;

  float asum_data() const;
  float asum_diff() const;
  float sumsq_data() const;
  float sumsq_diff() const;
  void scale_data(float scale_factor);
  void scale_diff(float scale_factor);

  // Makes this blob use `other`'s data (or diff) memory; counts must match.
  // Used for in-place sharing of learned weights between nets.
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);

 private:
  // data_ or diff_, which a blob has once reshaped (CHECKed: using one before
  // is our bug).
  static SyncedMemory* Memory(const std::shared_ptr<SyncedMemory>& memory);

  std::shared_ptr<SyncedMemory> data_;
  std::shared_ptr<SyncedMemory> diff_;
  std::vector<int> shape_;
  int count_ = 0;
  int capacity_ = 0;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_BLOB_H_

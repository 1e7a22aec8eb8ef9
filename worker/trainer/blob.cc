#include "worker/trainer/blob.h"

#include <climits>
#include <cmath>
#include <sstream>

#include "worker/trainer/gpu/device.h"
#include "worker/trainer/math/math_functions.h"

#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/math/gpu_math_functions.h"
#endif

namespace nereus {
#ifdef NEREUS_HAVE_CUDA
namespace {

// Where an operation on `mem` runs, as Caffe's Blob decides: on the current
// device when the device copy is the fresh one (or both are), else on the
// host (nullptr). Without a current CUDA device it is always the host (a
// SyncedMemory copies what is needed), so CPU runs never take this path.
gpu::Device* ComputeDeviceFor(const std::shared_ptr<SyncedMemory>& mem) {
  const SyncedMemory::Head head = mem->head();
  if (head != SyncedMemory::Head::kAtGpu && head != SyncedMemory::Head::kSynced) return nullptr;
  gpu::Device* device = gpu::CurrentDevice();
  return device != nullptr && !device->is_stand_in() ? device : nullptr;
}

}  // namespace
#endif

Status CheckBlobShape(const caffe::BlobShape& shape) {
  std::string text;
  for (int i = 0; i < shape.dim_size(); ++i) text += (i > 0 ? " x " : "") + std::to_string(shape.dim(i));
  if (shape.dim_size() > kMaxBlobAxes) {
    return InvalidArgumentError("shape " + text + " has " + std::to_string(shape.dim_size()) + " axes (at most " +
                                std::to_string(kMaxBlobAxes) + ")");
  }
  int64_t count = 1;
  for (int i = 0; i < shape.dim_size(); ++i) {
    const int64_t d = shape.dim(i);
    if (d < 0) return InvalidArgumentError("shape " + text + " has a negative dimension");
    if (d > INT_MAX || (d > 0 && count > INT_MAX / d)) {
      return InvalidArgumentError("shape " + text + " holds more than INT_MAX values");
    }
    count *= d;
  }
  return Status::OK();
}

void Blob::Reshape(const std::vector<int>& shape) {
  CHECK_LE(shape.size(), static_cast<size_t>(kMaxBlobAxes));
  int count = 1;
  for (int dim : shape) {
    CHECK_GE(dim, 0) << "negative blob dimension";
    if (count != 0) CHECK_LE(dim, INT_MAX / count) << "blob size exceeds INT_MAX";
    count *= dim;
  }
  shape_ = shape;
  count_ = count;
  if (count_ > capacity_ || data_ == nullptr) {
    capacity_ = count_;
    data_ = std::make_shared<SyncedMemory>(static_cast<size_t>(capacity_) * sizeof(float));
    diff_ = std::make_shared<SyncedMemory>(static_cast<size_t>(capacity_) * sizeof(float));
  }
}

void Blob::Reshape(const caffe::BlobShape& shape) {
  CHECK_LE(shape.dim_size(), kMaxBlobAxes);
  std::vector<int> dims(shape.dim_size());
  for (int i = 0; i < shape.dim_size(); ++i) {
    CHECK_LE(shape.dim(i), INT_MAX);
    dims[i] = static_cast<int>(shape.dim(i));
  }
  Reshape(dims);
}

void Blob::Reshape(int num, int channels, int height, int width) {
  Reshape(std::vector<int>{num, channels, height, width});
}

std::string Blob::shape_string() const {
  std::ostringstream os;
  for (int dim : shape_) os << dim << " ";
  os << "(" << count_ << ")";
  return os.str();
}

int Blob::count(int start_axis, int end_axis) const {
  CHECK_LE(start_axis, end_axis);
  CHECK_GE(start_axis, 0);
  CHECK_GE(end_axis, 0);
  CHECK_LE(start_axis, num_axes());
  CHECK_LE(end_axis, num_axes());
  int count = 1;
  for (int i = start_axis; i < end_axis; ++i) count *= shape_[i];
  return count;
}

int Blob::CanonicalAxisIndex(int axis_index) const {
  CHECK_GE(axis_index, -num_axes()) << "axis " << axis_index << " out of range for a " << num_axes()
                                    << "-D blob with shape " << shape_string();
  CHECK_LT(axis_index, num_axes()) << "axis " << axis_index << " out of range for a " << num_axes()
                                   << "-D blob with shape " << shape_string();
  return axis_index < 0 ? axis_index + num_axes() : axis_index;
}

int Blob::LegacyShape(int index) const {
  CHECK_LE(num_axes(), 4) << "cannot use legacy accessors on blobs with > 4 axes";
  CHECK_LT(index, 4);
  CHECK_GE(index, -4);
  if (index >= num_axes() || index < -num_axes()) return 1;
  return shape(index);
}

int Blob::offset(int n, int c, int h, int w) const {
  CHECK_GE(n, 0);
  CHECK_LE(n, num());
  CHECK_GE(c, 0);
  CHECK_LE(c, channels());
  CHECK_GE(h, 0);
  CHECK_LE(h, height());
  CHECK_GE(w, 0);
  CHECK_LE(w, width());
  return ((n * channels() + c) * height() + h) * width() + w;
}

int Blob::offset(const std::vector<int>& indices) const {
  CHECK_LE(indices.size(), shape_.size());
  int offset = 0;
  for (int i = 0; i < num_axes(); ++i) {
    offset *= shape_[i];
    if (static_cast<size_t>(i) < indices.size()) {
      CHECK_GE(indices[i], 0);
      CHECK_LT(indices[i], shape_[i]);
      offset += indices[i];
    }
  }
  return offset;
}

void Blob::CopyFrom(const Blob& source, bool copy_diff, bool reshape) {
  if (source.count() != count_ || source.shape() != shape_) {
    CHECK(reshape) << "trying to copy blobs of different sizes: " << source.shape_string() << " into "
                   << shape_string();
    ReshapeLike(source);
  }
  if (copy_diff) {
    caffe_copy(count_, source.cpu_diff(), mutable_cpu_diff());
  } else {
    caffe_copy(count_, source.cpu_data(), mutable_cpu_data());
  }
}

SyncedMemory* Blob::Memory(const std::shared_ptr<SyncedMemory>& memory) {
  CHECK(memory != nullptr) << "blob used before Reshape";
  return memory.get();
}

const float* Blob::cpu_data() const { return static_cast<const float*>(Memory(data_)->cpu_data()); }
float* Blob::mutable_cpu_data() { return static_cast<float*>(Memory(data_)->mutable_cpu_data()); }
const float* Blob::cpu_diff() const { return static_cast<const float*>(Memory(diff_)->cpu_data()); }
float* Blob::mutable_cpu_diff() { return static_cast<float*>(Memory(diff_)->mutable_cpu_data()); }
void Blob::set_cpu_data(float* data) {
  CHECK(data_ != nullptr) << "blob used before Reshape";
  // Make sure data_ has the current size (another blob may share it).
  const size_t size = static_cast<size_t>(count_) * sizeof(float);
  if (data_->size() != size) {
    data_ = std::make_shared<SyncedMemory>(size);
    diff_ = std::make_shared<SyncedMemory>(size);
  }
  data_->set_cpu_data(data);
}
const float* Blob::gpu_data() const { return static_cast<const float*>(Memory(data_)->gpu_data()); }
float* Blob::mutable_gpu_data() { return static_cast<float*>(Memory(data_)->mutable_gpu_data()); }
const float* Blob::gpu_diff() const { return static_cast<const float*>(Memory(diff_)->gpu_data()); }
float* Blob::mutable_gpu_diff() { return static_cast<float*>(Memory(diff_)->mutable_gpu_data()); }

void Blob::Update() {
  if (count_ == 0) return;
#ifdef NEREUS_HAVE_CUDA
  if (gpu::Device* device = ComputeDeviceFor(data_)) {
    caffe_gpu_axpy(device, count_, -1.0f, gpu_diff(), mutable_gpu_data());
    return;
  }
#endif
  caffe_axpy(count_, -1.0f, cpu_diff(), mutable_cpu_data());
}

bool Blob::ShapeEquals(const caffe::BlobProto& other) const {
  if (other.has_num() || other.has_channels() || other.has_height() || other.has_width()) {
    // Legacy 4-d proto: compare as 4-d (missing leading axes read as 1).
    return num_axes() <= 4 && LegacyShape(-4) == other.num() && LegacyShape(-3) == other.channels() &&
           LegacyShape(-2) == other.height() && LegacyShape(-1) == other.width();
  }
  if (other.shape().dim_size() != num_axes()) return false;
  for (int i = 0; i < num_axes(); ++i) {
    if (other.shape().dim(i) != shape_[i]) return false;
  }
  return true;
}

Status Blob::FromProto(const caffe::BlobProto& proto, bool reshape) {
  std::vector<int> shape;
  if (proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width()) {
    shape = {proto.num(), proto.channels(), proto.height(), proto.width()};
    for (int d : shape) {
      if (d < 0) return InvalidArgumentError("blob dimension out of range: " + std::to_string(d));
    }
  } else {
    for (int i = 0; i < proto.shape().dim_size(); ++i) {
      const int64_t d = proto.shape().dim(i);
      if (d < 0 || d > INT_MAX) return InvalidArgumentError("blob dimension out of range: " + std::to_string(d));
      shape.push_back(static_cast<int>(d));
    }
  }
  if (reshape) {
    if (shape.size() > static_cast<size_t>(kMaxBlobAxes))
      return InvalidArgumentError("blob has " + std::to_string(shape.size()) + " axes (max 32)");
    int64_t total = 1;
    for (int d : shape) {
      total *= d;
      if (total > INT_MAX) return InvalidArgumentError("blob size exceeds INT_MAX");
    }
    Reshape(shape);
  } else if (!ShapeEquals(proto)) {
    std::ostringstream os;
    for (int d : shape) os << d << " ";
    return InvalidArgumentError("shape mismatch: stored blob has shape " + os.str() + "but the layer expects " +
                                shape_string());
  }
  const size_t n = static_cast<size_t>(count_);
  float* data = mutable_cpu_data();
  if (proto.double_data_size() > 0) {
    if (static_cast<size_t>(proto.double_data_size()) != n)
      return InvalidArgumentError("blob holds " + std::to_string(proto.double_data_size()) +
                                  " values, its shape needs " + std::to_string(n));
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(proto.double_data(i));
  } else {
    if (static_cast<size_t>(proto.data_size()) != n)
      return InvalidArgumentError("blob holds " + std::to_string(proto.data_size()) + " values, its shape needs " +
                                  std::to_string(n));
    for (size_t i = 0; i < n; ++i) data[i] = proto.data(i);
  }
  if (proto.double_diff_size() > 0) {
    if (static_cast<size_t>(proto.double_diff_size()) != n) return InvalidArgumentError("blob diff has the wrong size");
    float* diff = mutable_cpu_diff();
    for (size_t i = 0; i < n; ++i) diff[i] = static_cast<float>(proto.double_diff(i));
  } else if (proto.diff_size() > 0) {
    if (static_cast<size_t>(proto.diff_size()) != n) return InvalidArgumentError("blob diff has the wrong size");
    float* diff = mutable_cpu_diff();
    for (size_t i = 0; i < n; ++i) diff[i] = proto.diff(i);
  }
  return Status::OK();
}

void Blob::ToProto(caffe::BlobProto* proto, bool write_diff) const {
  proto->Clear();
  for (int dim : shape_) proto->mutable_shape()->add_dim(dim);
  const float* data = cpu_data();
  proto->mutable_data()->Reserve(count_);
  for (int i = 0; i < count_; ++i) proto->add_data(data[i]);
  if (write_diff) {
    const float* diff = cpu_diff();
    proto->mutable_diff()->Reserve(count_);
    for (int i = 0; i < count_; ++i) proto->add_diff(diff[i]);
  }
}

namespace {

// The asum or the sum of squares of the n floats of `memory`, on the device
// that computes on it, else on the host.
enum class Reduction { kAsum, kSumsq };
float Reduce(Reduction reduction, int n, const std::shared_ptr<SyncedMemory>& memory) {
  if (n == 0) return 0.0f;
#ifdef NEREUS_HAVE_CUDA
  if (gpu::Device* device = ComputeDeviceFor(memory)) {
    const float* d = static_cast<const float*>(memory->gpu_data());
    return reduction == Reduction::kAsum ? caffe_gpu_asum(device, n, d) : caffe_gpu_dot(device, n, d, d);
  }
#endif
  const float* d = static_cast<const float*>(memory->cpu_data());
  return reduction == Reduction::kAsum ? caffe_cpu_asum(n, d) : caffe_cpu_dot(n, d, d);
}

// Multiplies the n floats of `memory` by s, where Reduce computes.
void Scale(int n, float s, const std::shared_ptr<SyncedMemory>& memory) {
  if (n == 0) return;
#ifdef NEREUS_HAVE_CUDA
  if (gpu::Device* device = ComputeDeviceFor(memory)) {
    caffe_gpu_scal(device, n, s, static_cast<float*>(memory->mutable_gpu_data()));
    return;
  }
#endif
  caffe_scal(n, s, static_cast<float*>(memory->mutable_cpu_data()));
}

}  // namespace

float Blob::asum_data() const { return Reduce(Reduction::kAsum, count_, data_); }
float Blob::asum_diff() const { return Reduce(Reduction::kAsum, count_, diff_); }
float Blob::sumsq_data() const { return Reduce(Reduction::kSumsq, count_, data_); }
float Blob::sumsq_diff() const { return Reduce(Reduction::kSumsq, count_, diff_); }
void Blob::scale_data(float s) { Scale(count_, s, data_); }
void Blob::scale_diff(float s) { Scale(count_, s, diff_); }

void Blob::ShareData(const Blob& other) {
  CHECK_EQ(count_, other.count());
  data_ = other.data();
}
void Blob::ShareDiff(const Blob& other) {
  CHECK_EQ(count_, other.count());
  diff_ = other.diff();
}

}  // namespace nereus

// Layer: Caffe's layer interface (set-up, reshape, forward, backward) for
// float blobs on the CPU or a GPU. A layer computes its top blobs from its
// bottom blobs in Forward and, in Backward, the gradients of its bottoms (and
// accumulates those of its parameter blobs) from its tops' gradients.
//
// Where it computes: a layer given a device (set_device, as the Net does for
// a net built with NetOptions::device) runs Forward_gpu/Backward_gpu, else
// Forward_cpu/Backward_cpu. A layer without GPU code keeps the defaults,
// which run its CPU code (its blobs are copied to the host and back by
// SyncedMemory), as Caffe does; HasGpuCode() says which layers have their own
// (layer_gpu_coverage_test lists the ones that do not). docs/GPU.md says how
// to add a layer's GPU code.
//
// Contract for implementations (the same as Caffe's):
// - LayerSetUp reads layer_param() once, checks it and creates/fills blobs_
//   (learnable parameters) with a Filler driven by rng(). It must not size
//   the tops; Reshape does that and may be called many times.
// - Backward_cpu ADDS to the parameter diffs (the solver clears them once per
//   iteration; iter_size accumulation relies on it) and WRITES the bottom
//   diffs.
// - A layer that needs randomness (fillers, dropout, data) takes it from
//   rng(), which the Net sets before SetUp; there is no global RNG.
// - Configuration errors a prototxt can cause (a missing num_output, a bad
//   pad) are returned as a Status from LayerSetUpStatus, naming the layer
//   (LayerError helps); CHECK only our own invariants.
//
// Not thread-safe.
#ifndef NEREUS_WORKER_TRAINER_LAYER_H_
#define NEREUS_WORKER_TRAINER_LAYER_H_

#include <glog/logging.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/math/math_functions.h"

// NEREUS_LAYER_PASSES declares, in a layer's protected section, the passes
// of a layer with GPU code of its own: Forward_cpu and Backward_cpu (its .cc
// file) and, in CUDA builds, Forward_gpu and Backward_gpu (its .cu file;
// without CUDA the Layer defaults run the CPU code), and says so in
// HasGpuCode(). Caffe's layers write the four out; one macro keeps their
// signatures from drifting apart. Use it as a declaration:
// `NEREUS_LAYER_PASSES;`.
#ifdef NEREUS_HAVE_CUDA
#define NEREUS_LAYER_GPU_PASSES_                                                              \
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override; \
  void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,   \
                    const std::vector<Blob*>& bottom) override
#else
#define NEREUS_LAYER_GPU_PASSES_ static_assert(true, "no GPU passes without CUDA")
#endif
#define NEREUS_LAYER_PASSES                                                                   \
  bool HasGpuCode() const override { return true; }                                           \
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override; \
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,   \
                    const std::vector<Blob*>& bottom) override;                               \
  NEREUS_LAYER_GPU_PASSES_

// NEREUS_LAYER_SETUP_AND_RESHAPE declares, in a layer's public section, the
// two overrides nearly every layer has: LayerSetUpStatus (reads the prototxt
// once, may reject it) and Reshape (sizes the tops from the bottoms, before
// every forward), in their .cc file. A layer that does either inline writes
// it out instead. Use it as a declaration: `NEREUS_LAYER_SETUP_AND_RESHAPE;`.
#define NEREUS_LAYER_SETUP_AND_RESHAPE                                                               \
  Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override; \
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override

namespace nereus {

class Layer {
 public:
  // Does not read param.blobs(): the Net copies stored blobs into blobs()
  // after SetUp (and reports a shape mismatch as a Status).
  explicit Layer(const caffe::LayerParameter& param) : layer_param_(param), phase_(param.phase()) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // Checks the blob counts, calls LayerSetUp then Reshape, and sets up the
  // loss weights of the tops (a top with a non-zero loss weight gets its diff
  // filled with that weight). Returns the first error of CheckBlobCounts or
  // LayerSetUpStatus; a layer reports bad configuration through
  // LayerSetUpStatus, whose default calls LayerSetUp and returns OK.
  Status SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);

  // Layer-specific set-up, Caffe's signature. Layers that can reject a
  // prototxt value override LayerSetUpStatus instead (or as well).
  virtual void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {}
  // Status-returning variant called by SetUp; by default it calls LayerSetUp.
  virtual Status LayerSetUpStatus(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    LayerSetUp(bottom, top);
    return Status::OK();
  }

  // Sizes the tops (and internal buffers) from the bottoms' shapes.
  virtual void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;

  // Reshape, then Forward_gpu with a device, else Forward_cpu; returns the
  // weighted loss sum over the tops with non-zero loss weight (sum of top
  // data * top diff, as Caffe does). When the forward recorded an error
  // (set_forward_error) it returns 0 and forward_error() says why.
  float Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top);

  // Forward keeps Caffe's signature. A layer whose forward can meet bad input
  // that a file causes (a Data layer's corrupt record, a label out of range)
  // records it with set_forward_error and leaves its tops as they are;
  // Net::ForwardFromTo returns the error right after this layer's Forward,
  // before any later layer or hook runs. OK again at the next Forward.
  const Status& forward_error() const { return forward_error_; }

  // Backward_gpu with a device, else Backward_cpu. propagate_down[i] says
  // whether bottom[i]'s diff is needed.
  void Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                const std::vector<Blob*>& bottom);

  // Learnable parameter blobs (weights, biases), shared_ptr so nets can share.
  std::vector<std::shared_ptr<Blob>>& blobs() { return blobs_; }
  const std::vector<std::shared_ptr<Blob>>& blobs() const { return blobs_; }
  const caffe::LayerParameter& layer_param() const { return layer_param_; }
  caffe::Phase phase() const { return phase_; }

  // Writes the layer's parameter and its blobs (data; diff when write_diff).
  virtual void ToProto(caffe::LayerParameter* param, bool write_diff = false) const;

  float loss(int top_index) const { return static_cast<size_t>(top_index) < loss_.size() ? loss_[top_index] : 0.0f; }
  void set_loss(int top_index, float value) {
    if (loss_.size() <= static_cast<size_t>(top_index)) loss_.resize(top_index + 1, 0.0f);
    loss_[top_index] = value;
  }

  // The layer type as written in prototxt ("Convolution"). Defaults to the
  // parameter's type.
  virtual const char* type() const { return layer_param_.type().c_str(); }

  // Blob-count constraints; -1 means unconstrained.
  virtual int ExactNumBottomBlobs() const { return -1; }
  virtual int MinBottomBlobs() const { return -1; }
  virtual int MaxBottomBlobs() const { return -1; }
  virtual int ExactNumTopBlobs() const { return -1; }
  virtual int MinTopBlobs() const { return -1; }
  virtual int MaxTopBlobs() const { return -1; }
  virtual bool EqualNumBottomTopBlobs() const { return false; }
  // When true, the Net creates anonymous tops up to ExactNumTopBlobs /
  // MinTopBlobs if the prototxt lists fewer.
  virtual bool AutoTopBlobs() const { return false; }
  // False for inputs such as labels that can never get a gradient.
  virtual bool AllowForceBackward(int bottom_index) const { return true; }

  // Class labels. A layer that reads class labels from bottom[bottom_index]
  // (SoftmaxWithLoss, Accuracy) returns, once set up, the labels it accepts
  // there; num_classes 0 means the bottom holds no labels. The Net hands the
  // range to the layer producing that blob (through Split layers) with
  // RestrictLabels, so that a Data layer can name the file and record of a
  // label out of range instead of the consumer failing on it.
  struct LabelRange {
    int num_classes = 0;              // Labels 0 .. num_classes - 1 are accepted,
    std::optional<int> ignore_label;  // and this one when set.
    std::string consumer;             // "layer loss (SoftmaxWithLoss)".
    bool Accepts(int label) const { return (label >= 0 && label < num_classes) || ignore_label == label; }
  };
  virtual LabelRange AcceptedLabels(int bottom_index) const { return LabelRange(); }
  // Called by the Net after set-up, once per consumer of top[top_index] that
  // reads labels from it. By default ignored.
  virtual void RestrictLabels(int top_index, const LabelRange& range) {}

  // Whether blobs()[blob_id] is state the layer itself updates in Forward
  // (BatchNorm's running mean, variance and count) rather than a parameter
  // the solver learns from a gradient. Such blobs are still Net learnable
  // params (with lr_mult 0, so .caffemodel and .solverstate files match
  // Caffe's), but a data-parallel job keeps them local to each worker: they
  // are never pushed as gradients nor overwritten by a pull.
  virtual bool IsLocalState(int blob_id) const { return false; }

  // Sufficient factors (docs/CLIENT.md, "Sufficient factors"): after this layer's backward,
  // the gradient of blobs()[param] over the batch is left^T * right, left =
  // rows x (the weight's first dimension), right = rows x (its second), both
  // row-major: each the data or the diff of a blob of `bottom` or `top`
  // (valid until their next forward/backward). Layers whose weight gradient
  // is such a product (InnerProduct) fill `out` and return true; the rest
  // return false. Naming the blobs reads nothing: cpu() gives a factor on the
  // host, gpu() on the device (each moving the blob's fresh copy there, as
  // Blob::cpu_data() and gpu_data() do).
  struct GradientFactors {
    struct Side {
      const Blob* blob = nullptr;
      bool diff = false;  // The blob's diff, else its data.
      const float* cpu() const { return diff ? blob->cpu_diff() : blob->cpu_data(); }
      const float* gpu() const { return diff ? blob->gpu_diff() : blob->gpu_data(); }
    };
    int rows = 0;
    Side left, right;
  };
  virtual bool WeightGradientFactors(int param, const std::vector<Blob*>& bottom, const std::vector<Blob*>& top,
                                     GradientFactors* out) const {
    return false;
  }

  // Whether backward should compute the gradient of blobs()[param_id].
  bool param_propagate_down(int param_id) const {
    return static_cast<size_t>(param_id) < param_propagate_down_.size() ? param_propagate_down_[param_id] : false;
  }
  void set_param_propagate_down(int param_id, bool value) {
    if (param_propagate_down_.size() <= static_cast<size_t>(param_id)) param_propagate_down_.resize(param_id + 1, true);
    param_propagate_down_[param_id] = value;
  }
  // Whether backward may leave the gradient of blobs()[param_id] uncomputed
  // because nothing reads it: its update is rebuilt from its sufficient
  // factors (WeightGradientFactors, whose inputs backward still computes).
  // Set through Net::SetParamGradientUnused; a layer honours it where it can.
  bool param_gradient_unused(int param_id) const {
    return static_cast<size_t>(param_id) < param_gradient_unused_.size() && param_gradient_unused_[param_id];
  }
  void set_param_gradient_unused(int param_id, bool unused) {
    if (param_gradient_unused_.size() <= static_cast<size_t>(param_id)) param_gradient_unused_.resize(param_id + 1);
    param_gradient_unused_[param_id] = unused;
  }

  // The random engine layers use for fillers, dropout masks, crops and
  // mirrors. Owned by the Net (seeded from the solver's random_seed); must be
  // set before SetUp by whoever builds the layer.
  void set_rng(std::mt19937* rng) { rng_ = rng; }
  std::mt19937* rng() const {
    CHECK(rng_ != nullptr) << "layer " << layer_param_.name() << " asked for an RNG, but none was set";
    return rng_;
  }

  // The GPU this layer computes on (owned by whoever built the Net, set
  // before SetUp like the RNG); nullptr: the CPU. A layer that owns inner
  // layers (SoftmaxWithLoss's Softmax) hands them the same device.
  void set_device(gpu::Device* device) { device_ = device; }
  gpu::Device* device() const { return device_; }
  // Whether this layer has GPU code of its own (overrides Forward_gpu and
  // Backward_gpu, as NEREUS_LAYER_PASSES declares them); the others run their
  // CPU code on a GPU net.
  virtual bool HasGpuCode() const { return false; }

 protected:
  virtual void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) = 0;
  virtual void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) = 0;
  // The GPU code (a layer's .cu file beside its .cc, compiled in CUDA builds
  // only). The defaults run the CPU code: Caffe's fallback for a layer
  // without GPU code.
  virtual void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
    Forward_cpu(bottom, top);
  }
  virtual void Backward_gpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                            const std::vector<Blob*>& bottom) {
    Backward_cpu(top, propagate_down, bottom);
  }

  // Returns InvalidArgument naming the layer when the counts break the
  // constraints above.
  Status CheckBlobCounts(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const;
  // Error helper: "layer <name> (<type>): <message>".
  Status LayerError(const std::string& message) const;
  // LayerSetUp of a layer with a weight and an optional bias (Convolution,
  // InnerProduct): blobs_ already there (shared or loaded) are kept once the
  // weight's shape is checked; else the weight and, with bias_term, a bias
  // [num_output] are created and filled. Every blob gets a gradient.
  Status SetUpWeightAndBias(const std::vector<int>& weight_shape, const caffe::FillerParameter& weight_filler,
                            bool bias_term, int num_output, const caffe::FillerParameter& bias_filler);
  // Appends a blob of `shape` to blobs_, filled by `filler`; an error names
  // `what` (the filler's field, "weight_filler").
  Status AddFilledBlob(const std::vector<int>& shape, const caffe::FillerParameter& filler, const std::string& what);
  // OK when `blob` (a parameter already there, shared or loaded) has
  // `shape`, else "existing <what> has shape ..., expected ...".
  Status CheckExistingShape(const Blob& blob, const std::vector<int>& shape, const std::string& what) const;
  // For AcceptedLabels: labels 0 .. num_classes - 1, and `ignore_label` when
  // `has_ignore_label`, consumed by this layer.
  LabelRange LabelsBelow(int num_classes, bool has_ignore_label, int ignore_label) const;
  // What a label bottom's bad entry is called, on either device: "label 12 at
  // position 3 is out of range [0, 10)".
  static std::string LabelOutOfRange(int label, int position, int num_classes);
  // From Forward_cpu: the error Forward reports (see forward_error()). The
  // message is prefixed with "layer <name> (<type>): ".
  void set_forward_error(StatusCode code, const std::string& message);

  caffe::LayerParameter layer_param_;
  caffe::Phase phase_;
  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<bool> param_propagate_down_;
  std::vector<bool> param_gradient_unused_;
  std::vector<float> loss_;

 private:
  void SetLossWeights(const std::vector<Blob*>& top);

  std::mt19937* rng_ = nullptr;
  Status forward_error_;
  gpu::Device* device_ = nullptr;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_LAYER_H_

// Net: a directed acyclic graph of layers built from a NetParameter, as
// Caffe's Net: phase/level/stage filtering with include/exclude rules,
// in-place layers, automatic Split layers for blobs consumed more than once,
// loss weights (on any layer's top), propagate_down, parameter sharing by
// name, and weights shared with another net (the test net uses the train
// net's weights).
//
// Layer names may repeat, as Caffe allows (its mnist_autoencoder has two
// layers named "loss" in one net). Where a name is a key: weights go by name
// to the first layer of that name, as in Caffe's CopyTrainedLayersFrom and
// ShareTrainedLayersWith; when the source repeats a name too, its k-th layer
// of that name goes to the k-th of ours (Caffe would copy them all into the
// first and leave the others as filled: a snapshot of such a net would not
// restore). layer_index/layer_by_name give the first layer of a name
// (Caffe's layer_by_name gives the last). UniqueLayerName tells repeats apart
// where Nereus needs one name per layer (the servers' tensor names, the
// timeline).
//
// GPU: a net built with NetOptions::device computes its layers there (the
// ones with GPU code; the others run their CPU code on copies), and reports
// a GPU failure (out of device memory, a failed kernel or cuBLAS call) as the
// Status of Create/Forward/Backward, naming the net, the layer and the pass.
//
// Hooks: callers register callbacks that run around each layer's forward and
// backward with the layer's index. The data-parallel worker waits for a
// layer's weights in before_forward and hands its gradients over in
// after_backward. A hook returning an error aborts the pass and the error is
// returned by Forward/Backward.
//
// Not thread-safe: one thread drives a Net (hooks run on that thread).
#ifndef NEREUS_WORKER_TRAINER_NET_H_
#define NEREUS_WORKER_TRAINER_NET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/prototxt.h"

namespace nereus {

struct NetOptions {
  // Seed of the Net's random engine (fillers, dropout, data shuffling).
  uint64_t seed = 1701;
  // Where the NetParameter's layers were written (for error messages); may
  // be null. Indexed by the layer's position in the unfiltered parameter.
  const PrototxtLocations* locations = nullptr;
  // The GPU the net computes on (not owned; must outlive the net), or null
  // for the CPU. Every layer gets it (Layer::set_device); the net allocates
  // its blobs there as it is built (running out is an error naming the
  // layer and the bytes asked for) and makes it current while it works.
  gpu::Device* device = nullptr;
};

// Caffe's StateMeetsRule: whether `state` satisfies `rule` (phase, level
// range, required stages and excluded stages).
bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule);

// Caffe's FilterNet: copies `param` keeping the layers whose include/exclude
// rules admit param.state(). `kept` (may be null) receives the original
// index of every kept layer. A layer with both include and exclude rules is
// an error.
Status FilterNet(const caffe::NetParameter& param, caffe::NetParameter* filtered, std::vector<int>* kept = nullptr);

// Caffe's InsertSplits: adds a Split layer after every blob consumed by more
// than one bottom (or as a bottom and as a loss). `origin` (may be null)
// receives, per output layer, the index of the input layer it copies, or -1
// for an inserted Split layer. Unknown bottoms are errors.
Status InsertSplits(const caffe::NetParameter& param, caffe::NetParameter* split, std::vector<int>* origin = nullptr);

class Net {
 public:
  // Per-layer callback; the argument is the layer index.
  using Hook = std::function<Status(int layer_id)>;

  // Builds the net for param.state() (phase, level, stages), creating layers
  // through `registry`, which must outlive the call only. Errors (unknown
  // layer type or bottom, a layer's configuration error, a shared parameter
  // with a different shape) name the layer and, when `options.locations` is
  // given, its file and line.
  static StatusOr<std::unique_ptr<Net>> Create(const caffe::NetParameter& param, const LayerRegistry& registry,
                                               const NetOptions& options = NetOptions());
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // Runs forward over all layers (the inputs must be filled); returns the
  // total weighted loss.
  StatusOr<float> Forward();
  // Same as Forward (Caffe's name for a net whose data layers fill it).
  StatusOr<float> ForwardPrefilled() { return Forward(); }
  // Layers [start, end], inclusive.
  StatusOr<float> ForwardFromTo(int start, int end);
  // Backward over all layers, last to first, skipping layers that need no
  // backward (hooks still run for them).
  Status Backward();
  Status BackwardFromTo(int start, int end);  // start >= end; runs start..end.
  // Forward then Backward; returns the loss.
  StatusOr<float> ForwardBackward();
  // Reshapes every layer from its bottoms (after the inputs changed shape).
  void Reshape();

  // Hooks run in registration order.
  void add_before_forward(Hook hook) { before_forward_.push_back(std::move(hook)); }
  void add_after_forward(Hook hook) { after_forward_.push_back(std::move(hook)); }
  void add_before_backward(Hook hook) { before_backward_.push_back(std::move(hook)); }
  void add_after_backward(Hook hook) { after_backward_.push_back(std::move(hook)); }

  // Sets every learnable parameter's diff to zero.
  void ClearParamDiffs();
  // Learnable parameter `id`'s gradient is (or is again) not read: its update
  // comes from its sufficient factors. Its owner layer may skip computing it
  // (Layer::param_gradient_unused) and ClearParamDiffs leaves it alone, so a
  // GPU net never allocates it.
  void SetParamGradientUnused(int id, bool unused);
  // data -= diff for every learnable parameter (Caffe's Net::Update).
  void Update();

  // Makes this net's layers use `other`'s weights for every layer with the
  // same name (the test net shares the train net's; repeated names as in the
  // header comment). Blob counts and shapes must match.
  Status ShareTrainedLayersWith(const Net& other);
  // Copies weights from a trained NetParameter (a .caffemodel) into layers of
  // the same name (repeated names as in the header comment); layers missing
  // on either side are skipped. A blob count or shape mismatch is an error
  // naming the layer.
  Status CopyTrainedLayersFrom(const caffe::NetParameter& param);
  Status CopyTrainedLayersFromBinaryProto(const std::string& path);
  // Writes the layers (with their blobs; diffs when write_diff).
  void ToProto(caffe::NetParameter* param, bool write_diff = false) const;

  const std::string& name() const { return name_; }
  caffe::Phase phase() const { return phase_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<std::string>& layer_names() const { return layer_names_; }
  const std::vector<std::string>& blob_names() const { return blob_names_; }
  const std::vector<std::shared_ptr<Blob>>& blobs() const { return blobs_; }
  const std::vector<std::vector<Blob*>>& bottom_vecs() const { return bottom_vecs_; }
  const std::vector<std::vector<Blob*>>& top_vecs() const { return top_vecs_; }
  const std::vector<std::vector<int>>& bottom_ids() const { return bottom_id_vecs_; }
  const std::vector<std::vector<int>>& top_ids() const { return top_id_vecs_; }
  const std::vector<bool>& layer_need_backward() const { return layer_need_backward_; }
  const std::vector<std::vector<bool>>& bottom_need_backward() const { return bottom_need_backward_; }
  const std::vector<float>& blob_loss_weights() const { return blob_loss_weights_; }

  // All parameter blobs, one per (layer, blob) including shared duplicates.
  const std::vector<std::shared_ptr<Blob>>& params() const { return params_; }
  // -1 for a parameter its layer owns, else the index of the owner in params().
  const std::vector<int>& param_owners() const { return param_owners_; }
  const std::vector<std::string>& param_display_names() const { return param_display_names_; }
  // The distinct learnable parameters in net order, and their multipliers.
  const std::vector<Blob*>& learnable_params() const { return learnable_params_; }
  bool param_gradient_unused(int id) const {
    return static_cast<size_t>(id) < gradient_unused_.size() && gradient_unused_[id];
  }
  const std::vector<float>& params_lr() const { return params_lr_; }
  const std::vector<float>& params_weight_decay() const { return params_weight_decay_; }
  // Learnable parameter ids (indices into learnable_params()) owned by layer
  // `layer_id`. A parameter shared by name is owned by the first layer that
  // uses it, which is also the last one backward reaches: its gradient is
  // final after that layer's backward, and its weights are needed first by
  // that layer's forward.
  const std::vector<int>& layer_learnable_param_ids(int layer_id) const { return layer_learnable_param_ids_[layer_id]; }
  // Total number of learnable scalars (LeNet: 431,080).
  int64_t num_learnable_scalars() const;

  const std::vector<Blob*>& input_blobs() const { return net_input_blobs_; }
  const std::vector<Blob*>& output_blobs() const { return net_output_blobs_; }
  // Blob ids (indices into blobs()/blob_names()) of output_blobs().
  const std::vector<int>& output_blob_indices() const { return net_output_blob_indices_; }
  bool has_blob(const std::string& name) const { return blob_names_index_.count(name) > 0; }
  // nullptr when absent.
  Blob* blob_by_name(const std::string& name) const;
  bool has_layer(const std::string& name) const { return layer_names_index_.count(name) > 0; }
  // The first layer of that name; nullptr / -1 when absent.
  Layer* layer_by_name(const std::string& name) const;
  int layer_index(const std::string& name) const;
  // The layer's name, or for a name several layers share "<name>#<k>", the
  // k-th of them (1-based, in net order).
  const std::string& UniqueLayerName(int layer_id) const { return unique_layer_names_[layer_id]; }

  std::mt19937* rng() { return &rng_; }
  // The GPU the net computes on; nullptr: the CPU.
  gpu::Device* device() const { return device_; }

 private:
  explicit Net(const NetOptions& options);
  Status Init(const caffe::NetParameter& in_param, const LayerRegistry& registry, const NetOptions& options);
  Status AppendTop(const caffe::NetParameter& param, int layer_id, int top_id,
                   std::map<std::string, int>* available_blobs, std::map<std::string, int>* blob_name_to_idx);
  Status AppendBottom(const caffe::NetParameter& param, int layer_id, int bottom_id,
                      std::map<std::string, int>* available_blobs, std::map<std::string, int>* blob_name_to_idx,
                      int* blob_id);
  Status AppendParam(const caffe::NetParameter& param, int layer_id, int param_id);
  Status RunHooks(const std::vector<Hook>& hooks, int layer_id) const;
  // The layer a source layer named `name` copies into: our k-th layer of that
  // name for the source's k-th (counted in *seen), else our first; -1 when
  // we have none.
  int TargetOfSource(const std::string& name, std::map<std::string, int>* seen) const;
  // Tells each producer of a label blob what its consumers accept
  // (Layer::AcceptedLabels / RestrictLabels).
  void HandOverLabelRanges();
  // With a device: the error its layer_id's `pass` left on it, naming the
  // net and the layer; OK without one.
  Status CheckDevice(int layer_id, const char* pass) const;
  // Allocates the device memory of every top (and, in a TRAIN net, every
  // parameter and every diff backward will write), layer by layer.
  Status AllocateOnDevice();

  std::string name_;
  caffe::Phase phase_ = caffe::TRAIN;
  std::mt19937 rng_;
  gpu::Device* device_ = nullptr;

  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::string> layer_names_;
  std::map<std::string, int> layer_names_index_;  // The first layer of each name.
  std::vector<std::string> unique_layer_names_;
  std::vector<bool> layer_need_backward_;

  std::vector<std::shared_ptr<Blob>> blobs_;
  std::vector<std::string> blob_names_;
  std::map<std::string, int> blob_names_index_;
  std::vector<bool> blob_need_backward_;

  std::vector<std::vector<Blob*>> bottom_vecs_;
  std::vector<std::vector<int>> bottom_id_vecs_;
  std::vector<std::vector<bool>> bottom_need_backward_;
  std::vector<std::vector<Blob*>> top_vecs_;
  std::vector<std::vector<int>> top_id_vecs_;
  std::vector<float> blob_loss_weights_;

  std::vector<std::vector<int>> param_id_vecs_;
  std::vector<int> param_owners_;
  std::vector<std::string> param_display_names_;
  std::vector<std::pair<int, int>> param_layer_indices_;
  std::map<std::string, int> param_names_index_;
  std::vector<std::shared_ptr<Blob>> params_;
  std::vector<Blob*> learnable_params_;
  std::vector<bool> gradient_unused_;  // Per learnable parameter: SetParamGradientUnused.
  std::vector<int> learnable_param_ids_;
  std::vector<float> params_lr_;
  std::vector<bool> has_params_lr_;
  std::vector<float> params_weight_decay_;
  std::vector<bool> has_params_decay_;
  std::vector<std::vector<int>> layer_learnable_param_ids_;

  std::vector<int> net_input_blob_indices_;
  std::vector<Blob*> net_input_blobs_;
  std::vector<Blob*> net_output_blobs_;
  std::vector<int> net_output_blob_indices_;

  std::vector<Hook> before_forward_;
  std::vector<Hook> after_forward_;
  std::vector<Hook> before_backward_;
  std::vector<Hook> after_backward_;
};

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_NET_H_

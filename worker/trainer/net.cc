#include "worker/trainer/net.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "worker/trainer/math/math_functions.h"

#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/math/gpu_math_functions.h"
#endif
#include "worker/trainer/split_layer.h"
#include "worker/trainer/upgrade_net.h"

namespace nereus {
namespace {

std::string SplitLayerName(const std::string& layer_name, const std::string& blob_name, int blob_idx) {
  std::ostringstream os;
  os << blob_name << "_" << layer_name << "_" << blob_idx << "_split";
  return os.str();
}

std::string SplitBlobName(const std::string& layer_name, const std::string& blob_name, int blob_idx, int split_idx) {
  std::ostringstream os;
  os << blob_name << "_" << layer_name << "_" << blob_idx << "_split_" << split_idx;
  return os.str();
}

void ConfigureSplitLayer(const std::string& layer_name, const std::string& blob_name, int blob_idx, int split_count,
                         float loss_weight, caffe::LayerParameter* split) {
  split->Clear();
  split->add_bottom(blob_name);
  split->set_name(SplitLayerName(layer_name, blob_name, blob_idx));
  split->set_type("Split");
  for (int k = 0; k < split_count; ++k) {
    split->add_top(SplitBlobName(layer_name, blob_name, blob_idx, k));
    if (loss_weight != 0.0f) split->add_loss_weight(k == 0 ? loss_weight : 0.0f);
  }
}

// A multiplier (`what`: lr_mult, decay_mult) that a layer sharing param
// `param_name` gives: the first to give one sets the learnable parameter's
// (`id`) in (*has)[id], (*values)[id]; a later one must agree.
Status ShareMultiplier(const std::string& param_name, const char* what, float value, int id, std::vector<bool>* has,
                       std::vector<float>* values) {
  if ((*has)[id]) {
    if (value != (*values)[id]) {
      return InvalidArgumentError("shared param \"" + param_name + "\" has mismatched " + what);
    }
  } else {
    (*has)[id] = true;
    (*values)[id] = value;
  }
  return Status::OK();
}

}  // namespace

bool StateMeetsRule(const caffe::NetState& state, const caffe::NetStateRule& rule) {
  if (rule.has_phase() && rule.phase() != state.phase()) return false;
  if (rule.has_min_level() && state.level() < rule.min_level()) return false;
  if (rule.has_max_level() && state.level() > rule.max_level()) return false;
  for (const std::string& stage : rule.stage()) {
    if (std::find(state.stage().begin(), state.stage().end(), stage) == state.stage().end()) return false;
  }
  for (const std::string& stage : rule.not_stage()) {
    if (std::find(state.stage().begin(), state.stage().end(), stage) != state.stage().end()) return false;
  }
  return true;
}

Status FilterNet(const caffe::NetParameter& param, caffe::NetParameter* filtered, std::vector<int>* kept) {
  const caffe::NetState& state = param.state();
  filtered->CopyFrom(param);
  filtered->clear_layer();
  if (kept != nullptr) kept->clear();
  for (int i = 0; i < param.layer_size(); ++i) {
    const caffe::LayerParameter& layer = param.layer(i);
    if (layer.include_size() > 0 && layer.exclude_size() > 0) {
      return InvalidArgumentError("layer \"" + layer.name() +
                                  "\" specifies both include and exclude rules; use one or the other");
    }
    // No include rules: included unless an exclude rule matches.
    bool include = layer.include_size() == 0;
    for (const auto& rule : layer.exclude()) {
      if (StateMeetsRule(state, rule)) include = false;
    }
    for (const auto& rule : layer.include()) {
      if (StateMeetsRule(state, rule)) include = true;
    }
    if (include) {
      *filtered->add_layer() = layer;
      if (kept != nullptr) kept->push_back(i);
    }
  }
  return Status::OK();
}

Status InsertSplits(const caffe::NetParameter& param, caffe::NetParameter* param_split, std::vector<int>* origin) {
  using Idx = std::pair<int, int>;
  param_split->CopyFrom(param);
  param_split->clear_layer();
  if (origin != nullptr) origin->clear();
  std::map<std::string, Idx> blob_name_to_last_top_idx;
  std::map<Idx, Idx> bottom_idx_to_source_top_idx;
  std::map<Idx, int> top_idx_to_bottom_count;
  std::map<Idx, float> top_idx_to_loss_weight;
  std::map<Idx, int> top_idx_to_bottom_split_idx;
  std::map<int, std::string> layer_idx_to_layer_name;
  for (int i = 0; i < param.input_size(); ++i) blob_name_to_last_top_idx[param.input(i)] = {-1, i};
  for (int i = 0; i < param.layer_size(); ++i) {
    const caffe::LayerParameter& layer = param.layer(i);
    layer_idx_to_layer_name[i] = layer.name();
    for (int j = 0; j < layer.bottom_size(); ++j) {
      const std::string& blob_name = layer.bottom(j);
      auto it = blob_name_to_last_top_idx.find(blob_name);
      if (it == blob_name_to_last_top_idx.end()) {
        return InvalidArgumentError("unknown bottom blob \"" + blob_name + "\" (layer \"" + layer.name() +
                                    "\", bottom index " + std::to_string(j) + ")");
      }
      bottom_idx_to_source_top_idx[{i, j}] = it->second;
      ++top_idx_to_bottom_count[it->second];
    }
    for (int j = 0; j < layer.top_size(); ++j) blob_name_to_last_top_idx[layer.top(j)] = {i, j};
    // A use of a top blob as a loss counts like a use as a bottom.
    const int last_loss = std::min(layer.loss_weight_size(), layer.top_size());
    for (int j = 0; j < last_loss; ++j) {
      const Idx& top_idx = blob_name_to_last_top_idx[layer.top(j)];
      top_idx_to_loss_weight[top_idx] = layer.loss_weight(j);
      if (top_idx_to_loss_weight[top_idx] != 0.0f) ++top_idx_to_bottom_count[top_idx];
    }
  }
  for (int i = 0; i < param.input_size(); ++i) {
    const int split_count = top_idx_to_bottom_count[{-1, i}];
    if (split_count > 1) {
      ConfigureSplitLayer(layer_idx_to_layer_name[-1], param.input(i), i, split_count, 0.0f, param_split->add_layer());
      if (origin != nullptr) origin->push_back(-1);
    }
  }
  for (int i = 0; i < param.layer_size(); ++i) {
    caffe::LayerParameter* layer = param_split->add_layer();
    layer->CopyFrom(param.layer(i));
    if (origin != nullptr) origin->push_back(i);
    for (int j = 0; j < layer->bottom_size(); ++j) {
      const Idx& top_idx = bottom_idx_to_source_top_idx[{i, j}];
      const int split_count = top_idx_to_bottom_count[top_idx];
      if (split_count > 1) {
        layer->set_bottom(j, SplitBlobName(layer_idx_to_layer_name[top_idx.first], layer->bottom(j), top_idx.second,
                                           top_idx_to_bottom_split_idx[top_idx]++));
      }
    }
    for (int j = 0; j < layer->top_size(); ++j) {
      const Idx top_idx{i, j};
      const int split_count = top_idx_to_bottom_count[top_idx];
      if (split_count > 1) {
        const float loss_weight = top_idx_to_loss_weight[top_idx];
        ConfigureSplitLayer(layer_idx_to_layer_name[i], layer->top(j), j, split_count, loss_weight,
                            param_split->add_layer());
        if (origin != nullptr) origin->push_back(-1);
        if (loss_weight != 0.0f) {
          layer->clear_loss_weight();
          top_idx_to_bottom_split_idx[top_idx]++;
        }
      }
    }
  }
  return Status::OK();
}

Net::Net(const NetOptions& options)
    : rng_(static_cast<std::mt19937::result_type>(options.seed)), device_(options.device) {}

StatusOr<std::unique_ptr<Net>> Net::Create(const caffe::NetParameter& param, const LayerRegistry& registry,
                                           const NetOptions& options) {
  std::unique_ptr<Net> net(new Net(options));
  gpu::ScopedDevice scope(options.device);
  RETURN_IF_ERROR(net->Init(param, registry, options));
  RETURN_IF_ERROR(net->AllocateOnDevice());
  return net;
}

Status Net::CheckDevice(int layer_id, const char* pass) const {
  if (device_ == nullptr) return Status::OK();
  Status s = device_->TakeError();
  if (s.ok()) return s;
  return s.Annotate("net \"" + name_ + "\", layer \"" + layer_names_[layer_id] + "\" (" + layers_[layer_id]->type() +
                    "), " + pass);
}

Status Net::AllocateOnDevice() {
  if (device_ == nullptr) return Status::OK();
  for (int i = 0; i < num_layers(); ++i) {
    const Layer* layer = layers_[i].get();
    if (!layer->HasGpuCode()) {
      LOG(WARNING) << "net \"" << name_ << "\", layer \"" << layer_names_[i] << "\" (" << layer->type()
                   << ") has no GPU code: it runs its CPU code, its blobs copied between host and device";
    }
    for (size_t t = 0; t < top_vecs_[i].size(); ++t) {
      Blob* top = top_vecs_[i][t];
      if (top->count() == 0) continue;
      top->gpu_data();
      if (blob_need_backward_[top_id_vecs_[i][t]]) top->gpu_diff();
    }
    if (phase_ == caffe::TRAIN) {
      for (const auto& p : layer->blobs()) {
        if (p->count() == 0) continue;
        p->gpu_data();
        p->gpu_diff();
      }
    }
    RETURN_IF_ERROR(CheckDevice(i, "allocating its blobs on the device"));
  }
  return Status::OK();
}

Status Net::Init(const caffe::NetParameter& in_param, const LayerRegistry& registry, const NetOptions& options) {
  phase_ = in_param.state().phase();
  name_ = in_param.name();
  caffe::NetParameter filtered;
  std::vector<int> kept;
  RETURN_IF_ERROR(FilterNet(in_param, &filtered, &kept));
  caffe::NetParameter param;
  std::vector<int> origin;
  RETURN_IF_ERROR(InsertSplits(filtered, &param, &origin));

  // "layer \"conv1\" (lenet.prototxt:12)".
  auto where = [&](int layer_id) {
    std::string s = "layer \"" + param.layer(layer_id).name() + "\"";
    const int o = origin[layer_id];
    if (options.locations != nullptr && o >= 0) {
      const int original = kept[o];
      if (static_cast<size_t>(original) < options.locations->layer_lines.size() &&
          options.locations->layer_lines[original] > 0) {
        s += " (" + options.locations->source + ":" + std::to_string(options.locations->layer_lines[original]) + ")";
      }
    }
    return s;
  };

  std::map<std::string, int> available_blobs;  // name -> blob id
  std::map<std::string, int> blob_name_to_idx;

  // Deprecated net inputs (input / input_shape).
  if (param.input_shape_size() > 0 && param.input_shape_size() != param.input_size()) {
    return InvalidArgumentError("net \"" + name_ + "\" has " + std::to_string(param.input_size()) + " inputs but " +
                                std::to_string(param.input_shape_size()) +
                                " input_shape entries; give one shape per input");
  }
  for (int i = 0; i < param.input_size(); ++i) {
    const std::string& blob_name = param.input(i);
    if (blob_name_to_idx.count(blob_name)) {
      return InvalidArgumentError("net input \"" + blob_name + "\" listed twice");
    }
    auto blob = std::make_shared<Blob>();
    if (i < param.input_shape_size()) {
      Status valid = CheckBlobShape(param.input_shape(i));
      if (!valid.ok()) return InvalidArgumentError("net input \"" + blob_name + "\": " + valid.message());
      blob->Reshape(param.input_shape(i));
    }
    const int blob_id = static_cast<int>(blobs_.size());
    blobs_.push_back(blob);
    blob_names_.push_back(blob_name);
    blob_need_backward_.push_back(false);
    blob_name_to_idx[blob_name] = blob_id;
    available_blobs[blob_name] = blob_id;
    net_input_blob_indices_.push_back(blob_id);
    net_input_blobs_.push_back(blob.get());
  }

  const int num_layers = param.layer_size();
  bottom_vecs_.resize(num_layers);
  top_vecs_.resize(num_layers);
  bottom_id_vecs_.resize(num_layers);
  top_id_vecs_.resize(num_layers);
  bottom_need_backward_.resize(num_layers);
  param_id_vecs_.resize(num_layers);
  layer_learnable_param_ids_.resize(num_layers);

  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    caffe::LayerParameter* layer_param = param.mutable_layer(layer_id);
    if (!layer_param->has_phase()) layer_param->set_phase(phase_);
    if (layer_param->propagate_down_size() > 0 && layer_param->propagate_down_size() != layer_param->bottom_size()) {
      return InvalidArgumentError(where(layer_id) + ": propagate_down has " +
                                  std::to_string(layer_param->propagate_down_size()) + " entries but the layer has " +
                                  std::to_string(layer_param->bottom_size()) + " bottoms");
    }
    if (layer_param->loss_weight_size() > 0 && layer_param->loss_weight_size() != layer_param->top_size()) {
      return InvalidArgumentError(where(layer_id) + ": loss_weight must be unspecified or given once per top blob");
    }
    std::unique_ptr<Layer> layer;
    if (layer_param->type() == "Split" && origin[layer_id] < 0) {
      layer = std::make_unique<SplitLayer>(*layer_param);
    } else {
      auto created = registry.Create(*layer_param);
      if (!created.ok()) {
        return Status(created.status().code(), where(layer_id) + ": " + created.status().message());
      }
      layer = std::move(created).value();
    }
    layer->set_rng(&rng_);
    // Names may repeat, as in Caffe (two layers named "loss"); the index
    // keeps the first layer of each name.
    layer_names_index_.emplace(layer_param->name(), layer_id);
    layer->set_device(options.device);
    layer_names_.push_back(layer_param->name());
    layers_.push_back(std::move(layer));
    Layer* l = layers_.back().get();

    bool need_backward = false;
    for (int bottom_id = 0; bottom_id < layer_param->bottom_size(); ++bottom_id) {
      int blob_id = -1;
      RETURN_IF_ERROR(AppendBottom(param, layer_id, bottom_id, &available_blobs, &blob_name_to_idx, &blob_id));
      need_backward |= blob_need_backward_[blob_id];
    }
    for (int top_id = 0; top_id < layer_param->top_size(); ++top_id) {
      RETURN_IF_ERROR(AppendTop(param, layer_id, top_id, &available_blobs, &blob_name_to_idx));
    }
    // Anonymous tops for layers that want them (e.g. an Accuracy or loss
    // layer whose top the prototxt omits).
    if (l->AutoTopBlobs()) {
      const int needed = std::max(l->MinTopBlobs(), l->ExactNumTopBlobs());
      for (int top_id = layer_param->top_size(); top_id < needed; ++top_id) {
        auto blob = std::make_shared<Blob>();
        const int blob_id = static_cast<int>(blobs_.size());
        blobs_.push_back(blob);
        blob_names_.push_back("(automatic)");
        blob_need_backward_.push_back(false);
        top_id_vecs_[layer_id].push_back(blob_id);
        top_vecs_[layer_id].push_back(blob.get());
      }
    }

    Status setup = l->SetUp(bottom_vecs_[layer_id], top_vecs_[layer_id]);
    if (!setup.ok()) return Status(setup.code(), where(layer_id) + ": " + setup.message());
    for (size_t top_id = 0; top_id < top_id_vecs_[layer_id].size(); ++top_id) {
      const int blob_id = top_id_vecs_[layer_id][top_id];
      if (blob_loss_weights_.size() <= static_cast<size_t>(blob_id)) blob_loss_weights_.resize(blob_id + 1, 0.0f);
      blob_loss_weights_[blob_id] = l->loss(static_cast<int>(top_id));
      VLOG(1) << "Top shape " << blob_names_[blob_id] << ": " << top_vecs_[layer_id][top_id]->shape_string();
    }
    // Weights stored in the prototxt (rare; normally they come from a
    // .caffemodel through CopyTrainedLayersFrom).
    if (layer_param->blobs_size() > 0) {
      if (static_cast<size_t>(layer_param->blobs_size()) != l->blobs().size()) {
        return InvalidArgumentError(where(layer_id) + ": stores " + std::to_string(layer_param->blobs_size()) +
                                    " blobs but the layer has " + std::to_string(l->blobs().size()));
      }
      for (int b = 0; b < layer_param->blobs_size(); ++b) {
        Status st = l->blobs()[b]->FromProto(layer_param->blobs(b), /*reshape=*/false);
        if (!st.ok()) return Status(st.code(), where(layer_id) + " blob " + std::to_string(b) + ": " + st.message());
      }
    }

    const int param_size = layer_param->param_size();
    const int num_param_blobs = static_cast<int>(l->blobs().size());
    if (param_size > num_param_blobs) {
      return InvalidArgumentError(where(layer_id) + ": " + std::to_string(param_size) +
                                  " param specs given but the layer has only " + std::to_string(num_param_blobs) +
                                  " parameter blobs");
    }
    caffe::ParamSpec default_spec;
    for (int param_id = 0; param_id < num_param_blobs; ++param_id) {
      const caffe::ParamSpec& spec = param_id < param_size ? layer_param->param(param_id) : default_spec;
      const bool param_need_backward = spec.lr_mult() != 0.0f;
      need_backward |= param_need_backward;
      l->set_param_propagate_down(param_id, param_need_backward);
    }
    for (int param_id = 0; param_id < num_param_blobs; ++param_id) {
      Status st = AppendParam(param, layer_id, param_id);
      if (!st.ok()) return Status(st.code(), where(layer_id) + ": " + st.message());
    }
    layer_need_backward_.push_back(need_backward);
    if (need_backward) {
      for (int blob_id : top_id_vecs_[layer_id]) blob_need_backward_[blob_id] = true;
    }
  }

  // Walk backward to find the layers that contribute to a loss and the
  // blobs that need no gradient (Caffe's pruning).
  std::set<std::string> blobs_under_loss;
  std::set<std::string> blobs_skip_backp;
  for (int layer_id = num_layers - 1; layer_id >= 0; --layer_id) {
    bool layer_contributes_loss = false;
    bool layer_skip_propagate_down = true;
    for (size_t top_id = 0; top_id < top_vecs_[layer_id].size(); ++top_id) {
      const std::string& blob_name = blob_names_[top_id_vecs_[layer_id][top_id]];
      if (layers_[layer_id]->loss(static_cast<int>(top_id)) != 0.0f || blobs_under_loss.count(blob_name)) {
        layer_contributes_loss = true;
      }
      if (!blobs_skip_backp.count(blob_name)) layer_skip_propagate_down = false;
      if (layer_contributes_loss && !layer_skip_propagate_down) break;
    }
    if (layer_need_backward_[layer_id] && layer_skip_propagate_down) {
      layer_need_backward_[layer_id] = false;
      for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) bottom_need_backward_[layer_id][b] = false;
    }
    if (!layer_contributes_loss) layer_need_backward_[layer_id] = false;
    VLOG(1) << layer_names_[layer_id]
            << (layer_need_backward_[layer_id] ? " needs backward computation."
                                               : " does not need backward computation.");
    for (size_t b = 0; b < bottom_vecs_[layer_id].size(); ++b) {
      const std::string& blob_name = blob_names_[bottom_id_vecs_[layer_id][b]];
      if (layer_contributes_loss) {
        blobs_under_loss.insert(blob_name);
      } else {
        bottom_need_backward_[layer_id][b] = false;
      }
      if (!bottom_need_backward_[layer_id][b]) blobs_skip_backp.insert(blob_name);
    }
  }
  if (param.force_backward()) {
    for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
      layer_need_backward_[layer_id] = true;
      for (size_t b = 0; b < bottom_need_backward_[layer_id].size(); ++b) {
        bottom_need_backward_[layer_id][b] =
            bottom_need_backward_[layer_id][b] || layers_[layer_id]->AllowForceBackward(static_cast<int>(b));
        const int blob_id = bottom_id_vecs_[layer_id][b];
        blob_need_backward_[blob_id] = blob_need_backward_[blob_id] || bottom_need_backward_[layer_id][b];
      }
      for (size_t p = 0; p < layers_[layer_id]->blobs().size(); ++p) {
        layers_[layer_id]->set_param_propagate_down(static_cast<int>(p), true);
      }
    }
  }
  // A gradient the layer cannot compute (a loss layer's labels, anything of
  // an Accuracy or ArgMax): Caffe dies in that layer's Backward; refused here.
  for (int layer_id = 0; layer_id < num_layers; ++layer_id) {
    if (!layer_need_backward_[layer_id]) continue;
    const caffe::LayerParameter& lp = param.layer(layer_id);
    for (size_t b = 0; b < bottom_need_backward_[layer_id].size(); ++b) {
      if (!bottom_need_backward_[layer_id][b] || layers_[layer_id]->AllowForceBackward(static_cast<int>(b))) continue;
      const bool asked = lp.propagate_down_size() > 0 && lp.propagate_down(static_cast<int>(b));
      return InvalidArgumentError(where(layer_id) + ": bottom " + std::to_string(b) + " (\"" + lp.bottom(b) +
                                  "\") cannot get a gradient from a " + layers_[layer_id]->type() + " layer, but " +
                                  (asked ? "propagate_down asks for one" : "the layer that produces it needs one") +
                                  (asked ? " (set propagate_down: false for it)" : ""));
    }
  }
  // Every blob nobody consumed is an output, in name order as in Caffe.
  for (const auto& [blob_name, blob_id] : available_blobs) {
    net_output_blobs_.push_back(blobs_[blob_id].get());
    net_output_blob_indices_.push_back(blob_id);
  }
  blob_names_index_ = blob_name_to_idx;
  // Shared parameters use their owner's memory.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (param_owners_[i] < 0) continue;
    params_[i]->ShareData(*params_[param_owners_[i]]);
    params_[i]->ShareDiff(*params_[param_owners_[i]]);
  }
  blob_loss_weights_.resize(blobs_.size(), 0.0f);
  HandOverLabelRanges();
  std::map<std::string, int> name_count, name_seen;
  for (const std::string& n : layer_names_) ++name_count[n];
  for (const std::string& n : layer_names_) {
    const int k = ++name_seen[n];
    unique_layer_names_.push_back(name_count[n] == 1 ? n : n + "#" + std::to_string(k));
  }
  LOG(INFO) << "Net \"" << name_ << "\" (" << (phase_ == caffe::TRAIN ? "TRAIN" : "TEST") << "): " << num_layers
            << " layers, " << learnable_params_.size() << " learnable blobs, " << num_learnable_scalars()
            << " parameters";
  return Status::OK();
}

Status Net::AppendTop(const caffe::NetParameter& param, int layer_id, int top_id,
                      std::map<std::string, int>* available_blobs, std::map<std::string, int>* blob_name_to_idx) {
  const caffe::LayerParameter& layer_param = param.layer(layer_id);
  const std::string& blob_name = layer_param.top(top_id);
  int blob_id;
  if (layer_param.bottom_size() > top_id && blob_name == layer_param.bottom(top_id)) {
    // In-place computation: the top is the bottom blob.
    blob_id = (*blob_name_to_idx)[blob_name];
    VLOG(1) << layer_param.name() << " -> " << blob_name << " (in-place)";
  } else if (blob_name_to_idx->count(blob_name)) {
    return InvalidArgumentError("layer \"" + layer_param.name() + "\": top blob \"" + blob_name +
                                "\" is produced by more than one layer (in-place use must put it "
                                "at the same position in bottom and top)");
  } else {
    auto blob = std::make_shared<Blob>();
    blob_id = static_cast<int>(blobs_.size());
    blobs_.push_back(blob);
    blob_names_.push_back(blob_name);
    blob_need_backward_.push_back(false);
    (*blob_name_to_idx)[blob_name] = blob_id;
  }
  top_id_vecs_[layer_id].push_back(blob_id);
  top_vecs_[layer_id].push_back(blobs_[blob_id].get());
  (*available_blobs)[blob_name] = blob_id;
  return Status::OK();
}

Status Net::AppendBottom(const caffe::NetParameter& param, int layer_id, int bottom_id,
                         std::map<std::string, int>* available_blobs, std::map<std::string, int>* blob_name_to_idx,
                         int* blob_id) {
  const caffe::LayerParameter& layer_param = param.layer(layer_id);
  const std::string& blob_name = layer_param.bottom(bottom_id);
  auto it = available_blobs->find(blob_name);
  if (it == available_blobs->end()) {
    return InvalidArgumentError("unknown bottom blob \"" + blob_name + "\" (layer \"" + layer_param.name() +
                                "\", bottom index " + std::to_string(bottom_id) + ")");
  }
  *blob_id = (*blob_name_to_idx)[blob_name];
  bottom_vecs_[layer_id].push_back(blobs_[*blob_id].get());
  bottom_id_vecs_[layer_id].push_back(*blob_id);
  available_blobs->erase(it);
  bool need_backward = blob_need_backward_[*blob_id];
  if (layer_param.propagate_down_size() > 0) need_backward = layer_param.propagate_down(bottom_id);
  bottom_need_backward_[layer_id].push_back(need_backward);
  return Status::OK();
}

Status Net::AppendParam(const caffe::NetParameter& param, int layer_id, int param_id) {
  const caffe::LayerParameter& layer_param = layers_[layer_id]->layer_param();
  const int param_size = layer_param.param_size();
  const std::string param_name = param_size > param_id ? layer_param.param(param_id).name() : "";
  const int net_param_id = static_cast<int>(params_.size());
  param_display_names_.push_back(param_name.empty() ? std::to_string(net_param_id) : param_name);
  params_.push_back(layers_[layer_id]->blobs()[param_id]);
  param_id_vecs_[layer_id].push_back(net_param_id);
  param_layer_indices_.emplace_back(layer_id, param_id);
  caffe::ParamSpec default_spec;
  const caffe::ParamSpec& spec = param_size > param_id ? layer_param.param(param_id) : default_spec;
  if (param_name.empty() || !param_names_index_.count(param_name)) {
    // This layer owns the parameter.
    param_owners_.push_back(-1);
    if (!param_name.empty()) param_names_index_[param_name] = net_param_id;
    const int learnable_param_id = static_cast<int>(learnable_params_.size());
    learnable_params_.push_back(params_[net_param_id].get());
    learnable_param_ids_.push_back(learnable_param_id);
    layer_learnable_param_ids_[layer_id].push_back(learnable_param_id);
    has_params_lr_.push_back(spec.has_lr_mult());
    has_params_decay_.push_back(spec.has_decay_mult());
    params_lr_.push_back(spec.lr_mult());
    params_weight_decay_.push_back(spec.decay_mult());
    return Status::OK();
  }
  // A name seen before: share the owner's blob.
  const int owner_net_param_id = param_names_index_[param_name];
  param_owners_.push_back(owner_net_param_id);
  const auto& [owner_layer_id, owner_param_id] = param_layer_indices_[owner_net_param_id];
  const Blob* this_blob = layers_[layer_id]->blobs()[param_id].get();
  const Blob* owner_blob = layers_[owner_layer_id]->blobs()[owner_param_id].get();
  if (spec.share_mode() == caffe::ParamSpec::PERMISSIVE) {
    if (this_blob->count() != owner_blob->count()) {
      return InvalidArgumentError("cannot share param \"" + param_name + "\" owned by layer \"" +
                                  layer_names_[owner_layer_id] + "\": count " + std::to_string(owner_blob->count()) +
                                  " vs " + std::to_string(this_blob->count()));
    }
  } else if (this_blob->shape() != owner_blob->shape()) {
    return InvalidArgumentError("cannot share param \"" + param_name + "\" owned by layer \"" +
                                layer_names_[owner_layer_id] + "\": shape " + owner_blob->shape_string() + " vs " +
                                this_blob->shape_string() + " (share_mode PERMISSIVE compares counts)");
  }
  const int learnable_param_id = learnable_param_ids_[owner_net_param_id];
  learnable_param_ids_.push_back(learnable_param_id);
  if (spec.has_lr_mult()) {
    RETURN_IF_ERROR(
        ShareMultiplier(param_name, "lr_mult", spec.lr_mult(), learnable_param_id, &has_params_lr_, &params_lr_));
  }
  if (spec.has_decay_mult()) {
    RETURN_IF_ERROR(ShareMultiplier(param_name, "decay_mult", spec.decay_mult(), learnable_param_id, &has_params_decay_,
                                    &params_weight_decay_));
  }
  return Status::OK();
}

void Net::HandOverLabelRanges() {
  for (int consumer = 0; consumer < num_layers(); ++consumer) {
    for (size_t b = 0; b < bottom_id_vecs_[consumer].size(); ++b) {
      const Layer::LabelRange range = layers_[consumer]->AcceptedLabels(static_cast<int>(b));
      if (range.num_classes <= 0) continue;
      // The last layer before `consumer` that wrote the blob; through Split
      // layers (their tops are copies of their bottom) to the one before.
      int blob_id = bottom_id_vecs_[consumer][b];
      for (int l = consumer - 1; l >= 0; --l) {
        const auto& tops = top_id_vecs_[l];
        const auto it = std::find(tops.begin(), tops.end(), blob_id);
        if (it == tops.end()) continue;
        if (std::string(layers_[l]->type()) == "Split") {
          blob_id = bottom_id_vecs_[l][0];
          continue;
        }
        layers_[l]->RestrictLabels(static_cast<int>(it - tops.begin()), range);
        break;
      }
    }
  }
}

Status Net::RunHooks(const std::vector<Hook>& hooks, int layer_id) const {
  for (const Hook& hook : hooks) RETURN_IF_ERROR(hook(layer_id));
  return Status::OK();
}

StatusOr<float> Net::ForwardFromTo(int start, int end) {
  CHECK_GE(start, 0);
  CHECK_LT(end, num_layers());
  gpu::ScopedDevice scope(device_);
  float loss = 0.0f;
  for (int i = start; i <= end; ++i) {
    RETURN_IF_ERROR(RunHooks(before_forward_, i));
    loss += layers_[i]->Forward(bottom_vecs_[i], top_vecs_[i]);
    RETURN_IF_ERROR(layers_[i]->forward_error());
    RETURN_IF_ERROR(CheckDevice(i, "forward"));
    RETURN_IF_ERROR(RunHooks(after_forward_, i));
  }
  return loss;
}

StatusOr<float> Net::Forward() { return ForwardFromTo(0, num_layers() - 1); }

Status Net::BackwardFromTo(int start, int end) {
  CHECK_GE(end, 0);
  CHECK_LT(start, num_layers());
  gpu::ScopedDevice scope(device_);
  for (int i = start; i >= end; --i) {
    RETURN_IF_ERROR(RunHooks(before_backward_, i));
    if (layer_need_backward_[i]) {
      layers_[i]->Backward(top_vecs_[i], bottom_need_backward_[i], bottom_vecs_[i]);
      RETURN_IF_ERROR(CheckDevice(i, "backward"));
    }
    RETURN_IF_ERROR(RunHooks(after_backward_, i));
  }
  return Status::OK();
}

Status Net::Backward() { return BackwardFromTo(num_layers() - 1, 0); }

StatusOr<float> Net::ForwardBackward() {
  ASSIGN_OR_RETURN(float loss, Forward());
  RETURN_IF_ERROR(Backward());
  return loss;
}

void Net::Reshape() {
  gpu::ScopedDevice scope(device_);
  for (int i = 0; i < num_layers(); ++i) layers_[i]->Reshape(bottom_vecs_[i], top_vecs_[i]);
}

void Net::ClearParamDiffs() {
#ifdef NEREUS_HAVE_CUDA
  if (device_ != nullptr) {
    gpu::ScopedDevice scope(device_);
    for (size_t i = 0; i < learnable_params_.size(); ++i) {
      Blob* blob = learnable_params_[i];
      if (!param_gradient_unused(static_cast<int>(i)))
        caffe_gpu_set(device_, blob->count(), 0.0f, blob->mutable_gpu_diff());
    }
    return;
  }
#endif
  for (size_t i = 0; i < learnable_params_.size(); ++i) {
    Blob* blob = learnable_params_[i];
    if (!param_gradient_unused(static_cast<int>(i))) caffe_set(blob->count(), 0.0f, blob->mutable_cpu_diff());
  }
}

void Net::SetParamGradientUnused(int id, bool unused) {
  CHECK_GE(id, 0);
  CHECK_LT(static_cast<size_t>(id), learnable_params_.size());
  if (gradient_unused_.size() < learnable_params_.size()) gradient_unused_.resize(learnable_params_.size());
  gradient_unused_[id] = unused;
  for (int l = 0; l < num_layers(); ++l) {
    const auto& blobs = layers_[l]->blobs();
    for (size_t b = 0; b < blobs.size(); ++b) {
      if (blobs[b].get() == learnable_params_[id]) layers_[l]->set_param_gradient_unused(static_cast<int>(b), unused);
    }
  }
}

void Net::Update() {
  gpu::ScopedDevice scope(device_);
  for (Blob* blob : learnable_params_) blob->Update();
}

int64_t Net::num_learnable_scalars() const {
  int64_t total = 0;
  for (const Blob* blob : learnable_params_) total += blob->count();
  return total;
}

int Net::TargetOfSource(const std::string& name, std::map<std::string, int>* seen) const {
  const int occurrence = (*seen)[name]++;
  int first = -1;
  int count = 0;
  for (int l = 0; l < num_layers(); ++l) {
    if (layer_names_[l] != name) continue;
    if (first < 0) first = l;
    if (count++ == occurrence) return l;
  }
  return first;
}

Status Net::ShareTrainedLayersWith(const Net& other) {
  std::map<std::string, int> seen;
  for (int i = 0; i < other.num_layers(); ++i) {
    const Layer* source = other.layers()[i].get();
    const std::string& source_name = other.layer_names()[i];
    const int target_id = TargetOfSource(source_name, &seen);
    if (target_id < 0) continue;
    auto& target_blobs = layers_[target_id]->blobs();
    if (target_blobs.size() != source->blobs().size()) {
      return InvalidArgumentError("cannot share weights of layer \"" + source_name +
                                  "\": " + std::to_string(source->blobs().size()) + " blobs vs " +
                                  std::to_string(target_blobs.size()));
    }
    for (size_t j = 0; j < target_blobs.size(); ++j) {
      const Blob* source_blob = source->blobs()[j].get();
      if (target_blobs[j]->shape() != source_blob->shape()) {
        return InvalidArgumentError("cannot share weights of layer \"" + source_name + "\" blob " + std::to_string(j) +
                                    ": shape " + source_blob->shape_string() + " vs " +
                                    target_blobs[j]->shape_string());
      }
      target_blobs[j]->ShareData(*source_blob);
    }
  }
  return Status::OK();
}

Status Net::CopyTrainedLayersFrom(const caffe::NetParameter& param) {
  std::map<std::string, int> seen;
  for (const caffe::LayerParameter& source_layer : param.layer()) {
    const int target_id = TargetOfSource(source_layer.name(), &seen);
    if (target_id < 0) {
      VLOG(1) << "Ignoring source layer " << source_layer.name();
      continue;
    }
    auto& target_blobs = layers_[target_id]->blobs();
    if (target_blobs.size() != static_cast<size_t>(source_layer.blobs_size())) {
      return InvalidArgumentError("incompatible number of blobs for layer \"" + source_layer.name() +
                                  "\": the weights file has " + std::to_string(source_layer.blobs_size()) +
                                  ", the net has " + std::to_string(target_blobs.size()));
    }
    for (size_t j = 0; j < target_blobs.size(); ++j) {
      Status st = target_blobs[j]->FromProto(source_layer.blobs(static_cast<int>(j)), /*reshape=*/false);
      if (!st.ok()) {
        return Status(st.code(),
                      "layer \"" + source_layer.name() + "\" blob " + std::to_string(j) + ": " + st.message());
      }
    }
  }
  return Status::OK();
}

Status Net::CopyTrainedLayersFromBinaryProto(const std::string& path) {
  caffe::NetParameter param;
  RETURN_IF_ERROR(ReadProtoFromBinaryFile(path, &param));
  RETURN_IF_ERROR(UpgradeNetAsNeeded(path, &param));  // weights saved by an old Caffe
  return CopyTrainedLayersFrom(param).Annotate(path);
}

void Net::ToProto(caffe::NetParameter* param, bool write_diff) const {
  param->Clear();
  param->set_name(name_);
  for (int idx : net_input_blob_indices_) param->add_input(blob_names_[idx]);
  for (const auto& layer : layers_) layer->ToProto(param->add_layer(), write_diff);
}

Blob* Net::blob_by_name(const std::string& name) const {
  auto it = blob_names_index_.find(name);
  return it == blob_names_index_.end() ? nullptr : blobs_[it->second].get();
}

Layer* Net::layer_by_name(const std::string& name) const {
  const int id = layer_index(name);
  return id < 0 ? nullptr : layers_[id].get();
}

int Net::layer_index(const std::string& name) const {
  auto it = layer_names_index_.find(name);
  return it == layer_names_index_.end() ? -1 : it->second;
}

}  // namespace nereus

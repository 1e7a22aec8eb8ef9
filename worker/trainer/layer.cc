#include "worker/trainer/layer.h"

#include "worker/trainer/filler.h"

#ifdef NEREUS_HAVE_CUDA
#include "worker/trainer/math/gpu_math_functions.h"
#endif

namespace nereus {

Status Layer::SetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  RETURN_IF_ERROR(CheckBlobCounts(bottom, top));
  RETURN_IF_ERROR(LayerSetUpStatus(bottom, top));
  Reshape(bottom, top);
  SetLossWeights(top);
  return Status::OK();
}

float Layer::Forward(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  forward_error_ = Status::OK();
  Reshape(bottom, top);
  if (device_ != nullptr) {
    CHECK(!device_->is_stand_in()) << "layer " << layer_param_.name()
                                   << ": a host stand-in device keeps memory only; it cannot run layers";
    Forward_gpu(bottom, top);
  } else {
    Forward_cpu(bottom, top);
  }
  if (!forward_error_.ok()) return 0.0f;
  float total = 0.0f;
  for (size_t top_id = 0; top_id < top.size(); ++top_id) {
    if (loss(static_cast<int>(top_id)) == 0.0f) continue;
    const int count = top[top_id]->count();
#ifdef NEREUS_HAVE_CUDA
    if (device_ != nullptr) {
      total += caffe_gpu_dot(device_, count, top[top_id]->gpu_data(), top[top_id]->gpu_diff());
      continue;
    }
#endif
    total += caffe_cpu_dot(count, top[top_id]->cpu_data(), top[top_id]->cpu_diff());
  }
  return total;
}

void Layer::Backward(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                     const std::vector<Blob*>& bottom) {
  if (device_ != nullptr) {
    CHECK(!device_->is_stand_in()) << "layer " << layer_param_.name()
                                   << ": a host stand-in device keeps memory only; it cannot run layers";
    Backward_gpu(top, propagate_down, bottom);
  } else {
    Backward_cpu(top, propagate_down, bottom);
  }
}

void Layer::ToProto(caffe::LayerParameter* param, bool write_diff) const {
  param->Clear();
  param->CopyFrom(layer_param_);
  param->clear_blobs();
  for (const auto& blob : blobs_) blob->ToProto(param->add_blobs(), write_diff);
}

Status Layer::SetUpWeightAndBias(const std::vector<int>& weight_shape, const caffe::FillerParameter& weight_filler,
                                 bool bias_term, int num_output, const caffe::FillerParameter& bias_filler) {
  if (!blobs_.empty()) {
    RETURN_IF_ERROR(CheckExistingShape(*blobs_[0], weight_shape, "weight blob"));
  } else {
    RETURN_IF_ERROR(AddFilledBlob(weight_shape, weight_filler, "weight_filler"));
    if (bias_term) RETURN_IF_ERROR(AddFilledBlob({num_output}, bias_filler, "bias_filler"));
  }
  param_propagate_down_.assign(blobs_.size(), true);
  return Status::OK();
}

Status Layer::AddFilledBlob(const std::vector<int>& shape, const caffe::FillerParameter& filler,
                            const std::string& what) {
  blobs_.push_back(std::make_shared<Blob>(shape));
  const Status filled = FillBlob(filler, blobs_.back().get(), rng());
  return filled.ok() ? filled : LayerError(what + ": " + filled.message());
}

Status Layer::CheckExistingShape(const Blob& blob, const std::vector<int>& shape, const std::string& what) const {
  if (blob.shape() == shape) return Status::OK();
  return LayerError("existing " + what + " has shape " + blob.shape_string() + ", expected " +
                    Blob(shape).shape_string());
}

Status Layer::LayerError(const std::string& message) const {
  return InvalidArgumentError("layer " + layer_param_.name() + " (" + layer_param_.type() + "): " + message);
}

Layer::LabelRange Layer::LabelsBelow(int num_classes, bool has_ignore_label, int ignore_label) const {
  LabelRange range;
  range.num_classes = num_classes;
  if (has_ignore_label) range.ignore_label = ignore_label;
  range.consumer = "layer " + layer_param_.name() + " (" + type() + ")";
  return range;
}

std::string Layer::LabelOutOfRange(int label, int position, int num_classes) {
  return "label " + std::to_string(label) + " at position " + std::to_string(position) + " is out of range [0, " +
         std::to_string(num_classes) + ")";
}

void Layer::set_forward_error(StatusCode code, const std::string& message) {
  forward_error_ = Status(code, "layer " + layer_param_.name() + " (" + layer_param_.type() + "): " + message);
}

namespace {

// The first of the exact, least and most blob counts (each: < 0 none) that `got`
// breaks, as "<verb> [at least|at most] <n> <kind> blob(s), got <got>";
// empty if none.
std::string BlobCountError(const char* verb, const char* kind, int got, int exact, int least, int most) {
  const auto says = [&](const char* bound, int n) {
    return std::string(verb) + bound + std::to_string(n) + " " + kind + " blob(s), got " + std::to_string(got);
  };
  if (exact >= 0 && got != exact) return says(" ", exact);
  if (least >= 0 && got < least) return says(" at least ", least);
  if (most >= 0 && got > most) return says(" at most ", most);
  return "";
}

}  // namespace

Status Layer::CheckBlobCounts(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) const {
  const int nb = static_cast<int>(bottom.size());
  const int nt = static_cast<int>(top.size());
  std::string error = BlobCountError("takes", "bottom", nb, ExactNumBottomBlobs(), MinBottomBlobs(), MaxBottomBlobs());
  if (error.empty()) error = BlobCountError("produces", "top", nt, ExactNumTopBlobs(), MinTopBlobs(), MaxTopBlobs());
  if (!error.empty()) return LayerError(error);
  if (EqualNumBottomTopBlobs() && nb != nt)
    return LayerError("needs as many top blobs as bottom blobs, got " + std::to_string(nb) + " bottom and " +
                      std::to_string(nt) + " top");
  return Status::OK();
}

void Layer::SetLossWeights(const std::vector<Blob*>& top) {
  const int num_loss_weights = layer_param_.loss_weight_size();
  if (num_loss_weights == 0) return;
  CHECK_EQ(static_cast<size_t>(num_loss_weights), top.size())
      << "the Net checks that loss_weight has one entry per top";
  for (int top_id = 0; top_id < num_loss_weights; ++top_id) {
    const float loss_weight = layer_param_.loss_weight(top_id);
    if (loss_weight == 0.0f) continue;
    set_loss(top_id, loss_weight);
    const int count = top[top_id]->count();
    float* diff = top[top_id]->mutable_cpu_diff();
    caffe_set(count, loss_weight, diff);
  }
}

}  // namespace nereus

#include "worker/trainer/upgrade_net.h"

namespace nereus {

bool NetNeedsUpgrade(const caffe::NetParameter& param) { return param.layers_size() > 0 || param.input_dim_size() > 0; }

std::string UpgradeV1LayerType(caffe::V1LayerParameter::LayerType type) {
  using V1 = caffe::V1LayerParameter;
  switch (type) {
    case V1::NONE:
      return "";
    case V1::ABSVAL:
      return "AbsVal";
    case V1::ACCURACY:
      return "Accuracy";
    case V1::ARGMAX:
      return "ArgMax";
    case V1::BNLL:
      return "BNLL";
    case V1::CONCAT:
      return "Concat";
    case V1::CONTRASTIVE_LOSS:
      return "ContrastiveLoss";
    case V1::CONVOLUTION:
      return "Convolution";
    case V1::DECONVOLUTION:
      return "Deconvolution";
    case V1::DATA:
      return "Data";
    case V1::DROPOUT:
      return "Dropout";
    case V1::DUMMY_DATA:
      return "DummyData";
    case V1::EUCLIDEAN_LOSS:
      return "EuclideanLoss";
    case V1::ELTWISE:
      return "Eltwise";
    case V1::EXP:
      return "Exp";
    case V1::FLATTEN:
      return "Flatten";
    case V1::HDF5_DATA:
      return "HDF5Data";
    case V1::HDF5_OUTPUT:
      return "HDF5Output";
    case V1::HINGE_LOSS:
      return "HingeLoss";
    case V1::IM2COL:
      return "Im2col";
    case V1::IMAGE_DATA:
      return "ImageData";
    case V1::INFOGAIN_LOSS:
      return "InfogainLoss";
    case V1::INNER_PRODUCT:
      return "InnerProduct";
    case V1::LRN:
      return "LRN";
    case V1::MEMORY_DATA:
      return "MemoryData";
    case V1::MULTINOMIAL_LOGISTIC_LOSS:
      return "MultinomialLogisticLoss";
    case V1::MVN:
      return "MVN";
    case V1::POOLING:
      return "Pooling";
    case V1::POWER:
      return "Power";
    case V1::RELU:
      return "ReLU";
    case V1::SIGMOID:
      return "Sigmoid";
    case V1::SIGMOID_CROSS_ENTROPY_LOSS:
      return "SigmoidCrossEntropyLoss";
    case V1::SILENCE:
      return "Silence";
    case V1::SOFTMAX:
      return "Softmax";
    case V1::SOFTMAX_LOSS:
      return "SoftmaxWithLoss";
    case V1::SPLIT:
      return "Split";
    case V1::SLICE:
      return "Slice";
    case V1::TANH:
      return "TanH";
    case V1::WINDOW_DATA:
      return "WindowData";
    case V1::THRESHOLD:
      return "Threshold";
  }
  return "";
}

void UpgradeV1LayerParameter(const caffe::V1LayerParameter& v1, caffe::LayerParameter* layer) {
  layer->Clear();
  for (const std::string& b : v1.bottom()) layer->add_bottom(b);
  for (const std::string& t : v1.top()) layer->add_top(t);
  if (v1.has_name()) layer->set_name(v1.name());
  for (const auto& rule : v1.include()) *layer->add_include() = rule;
  for (const auto& rule : v1.exclude()) *layer->add_exclude() = rule;
  if (v1.has_type()) layer->set_type(UpgradeV1LayerType(v1.type()));
  for (const auto& blob : v1.blobs()) *layer->add_blobs() = blob;
  // One ParamSpec per parameter blob that any of the per-blob lists mentions.
  auto spec = [layer](int i) {
    while (layer->param_size() <= i) layer->add_param();
    return layer->mutable_param(i);
  };
  for (int i = 0; i < v1.param_size(); ++i) spec(i)->set_name(v1.param(i));
  for (int i = 0; i < v1.blob_share_mode_size(); ++i) {
    spec(i)->set_share_mode(v1.blob_share_mode(i) == caffe::V1LayerParameter::PERMISSIVE ? caffe::ParamSpec::PERMISSIVE
                                                                                         : caffe::ParamSpec::STRICT);
  }
  for (int i = 0; i < v1.blobs_lr_size(); ++i) spec(i)->set_lr_mult(v1.blobs_lr(i));
  for (int i = 0; i < v1.weight_decay_size(); ++i) spec(i)->set_decay_mult(v1.weight_decay(i));
  for (float w : v1.loss_weight()) layer->add_loss_weight(w);
  if (v1.has_accuracy_param()) *layer->mutable_accuracy_param() = v1.accuracy_param();
  if (v1.has_argmax_param()) *layer->mutable_argmax_param() = v1.argmax_param();
  if (v1.has_concat_param()) *layer->mutable_concat_param() = v1.concat_param();
  if (v1.has_contrastive_loss_param()) *layer->mutable_contrastive_loss_param() = v1.contrastive_loss_param();
  if (v1.has_convolution_param()) *layer->mutable_convolution_param() = v1.convolution_param();
  if (v1.has_data_param()) *layer->mutable_data_param() = v1.data_param();
  if (v1.has_dropout_param()) *layer->mutable_dropout_param() = v1.dropout_param();
  if (v1.has_dummy_data_param()) *layer->mutable_dummy_data_param() = v1.dummy_data_param();
  if (v1.has_eltwise_param()) *layer->mutable_eltwise_param() = v1.eltwise_param();
  if (v1.has_exp_param()) *layer->mutable_exp_param() = v1.exp_param();
  if (v1.has_hdf5_data_param()) *layer->mutable_hdf5_data_param() = v1.hdf5_data_param();
  if (v1.has_hdf5_output_param()) *layer->mutable_hdf5_output_param() = v1.hdf5_output_param();
  if (v1.has_image_data_param()) *layer->mutable_image_data_param() = v1.image_data_param();
  if (v1.has_inner_product_param()) *layer->mutable_inner_product_param() = v1.inner_product_param();
  if (v1.has_lrn_param()) *layer->mutable_lrn_param() = v1.lrn_param();
  if (v1.has_memory_data_param()) *layer->mutable_memory_data_param() = v1.memory_data_param();
  if (v1.has_hinge_loss_param()) *layer->mutable_hinge_loss_param() = v1.hinge_loss_param();
  if (v1.has_infogain_loss_param()) *layer->mutable_infogain_loss_param() = v1.infogain_loss_param();
  if (v1.has_mvn_param()) *layer->mutable_mvn_param() = v1.mvn_param();
  if (v1.has_pooling_param()) *layer->mutable_pooling_param() = v1.pooling_param();
  if (v1.has_power_param()) *layer->mutable_power_param() = v1.power_param();
  if (v1.has_relu_param()) *layer->mutable_relu_param() = v1.relu_param();
  if (v1.has_sigmoid_param()) *layer->mutable_sigmoid_param() = v1.sigmoid_param();
  if (v1.has_softmax_param()) *layer->mutable_softmax_param() = v1.softmax_param();
  if (v1.has_slice_param()) *layer->mutable_slice_param() = v1.slice_param();
  if (v1.has_tanh_param()) *layer->mutable_tanh_param() = v1.tanh_param();
  if (v1.has_threshold_param()) *layer->mutable_threshold_param() = v1.threshold_param();
  if (v1.has_window_data_param()) *layer->mutable_window_data_param() = v1.window_data_param();
  if (v1.has_transform_param()) *layer->mutable_transform_param() = v1.transform_param();
  if (v1.has_loss_param()) *layer->mutable_loss_param() = v1.loss_param();
}

Status UpgradeNetAsNeeded(const std::string& source, caffe::NetParameter* param) {
  if (param->layers_size() > 0) {
    if (param->layer_size() > 0) {
      return InvalidArgumentError(source +
                                  ": the net defines both `layer` and the deprecated V1 "
                                  "`layers`; use one or the other");
    }
    for (int i = 0; i < param->layers_size(); ++i) {
      const caffe::V1LayerParameter& v1 = param->layers(i);
      if (!v1.has_type() || v1.type() == caffe::V1LayerParameter::NONE) {
        return InvalidArgumentError(source + ": V1 layer " + std::to_string(i) + " (\"" + v1.name() +
                                    "\") has no type");
      }
      UpgradeV1LayerParameter(v1, param->add_layer());
    }
    param->clear_layers();
    LOG(INFO) << source << ": upgraded a V1 net (`layers`) to the current format (`layer`)";
  }
  if (param->input_dim_size() > 0) {
    if (param->input_shape_size() > 0) {
      return InvalidArgumentError(source + ": give either input_dim or input_shape, not both");
    }
    if (param->input_dim_size() != 4 * param->input_size()) {
      return InvalidArgumentError(source + ": input_dim must give four dimensions per input (" +
                                  std::to_string(param->input_size()) + " inputs, " +
                                  std::to_string(param->input_dim_size()) + " input_dim values)");
    }
    for (int i = 0; i < param->input_size(); ++i) {
      caffe::BlobShape* shape = param->add_input_shape();
      for (int d = 0; d < 4; ++d) shape->add_dim(param->input_dim(4 * i + d));
    }
    param->clear_input_dim();
  }
  return Status::OK();
}

}  // namespace nereus

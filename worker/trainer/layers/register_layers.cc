// Registers every compute layer under its Caffe type string.
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/layers/accuracy_layer.h"
#include "worker/trainer/layers/base_conv_layer.h"
#include "worker/trainer/layers/batch_norm_layer.h"
#include "worker/trainer/layers/batch_reindex_layer.h"
#include "worker/trainer/layers/bias_layer.h"
#include "worker/trainer/layers/concat_layer.h"
#include "worker/trainer/layers/contrastive_loss_layer.h"
#include "worker/trainer/layers/crop_layer.h"
#include "worker/trainer/layers/eltwise_layer.h"
#include "worker/trainer/layers/embed_layer.h"
#include "worker/trainer/layers/filter_layer.h"
#include "worker/trainer/layers/im2col_layer.h"
#include "worker/trainer/layers/inner_product_layer.h"
#include "worker/trainer/layers/label_loss_layers.h"
#include "worker/trainer/layers/loss_layers.h"
#include "worker/trainer/layers/lrn_layer.h"
#include "worker/trainer/layers/lstm_layer.h"
#include "worker/trainer/layers/lstm_unit_layer.h"
#include "worker/trainer/layers/mvn_layer.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/layers/parameter_layer.h"
#include "worker/trainer/layers/pooling_layer.h"
#include "worker/trainer/layers/python_layer.h"
#include "worker/trainer/layers/reduction_layer.h"
#include "worker/trainer/layers/rnn_layer.h"
#include "worker/trainer/layers/scale_layer.h"
#include "worker/trainer/layers/shape_layers.h"
#include "worker/trainer/layers/softmax_layer.h"
#include "worker/trainer/layers/spp_layer.h"
#include "worker/trainer/layers/tile_layer.h"
#include "worker/trainer/split_layer.h"

namespace nereus {

void RegisterComputeLayers(LayerRegistry* registry) {
  registry->Register<AbsValLayer>("AbsVal");
  registry->Register<AccuracyLayer>("Accuracy");
  registry->Register<ArgMaxLayer>("ArgMax");
  registry->Register<BatchNormLayer>("BatchNorm");
  registry->Register<BiasLayer>("Bias");
  registry->Register<BNLLLayer>("BNLL");
  registry->Register<ClipLayer>("Clip");
  registry->Register<ConcatLayer>("Concat");
  registry->Register<ConvolutionLayer>("Convolution");
  registry->Register<DeconvolutionLayer>("Deconvolution");
  registry->Register<DropoutLayer>("Dropout");
  registry->Register<EltwiseLayer>("Eltwise");
  registry->Register<ELULayer>("ELU");
  registry->Register<EuclideanLossLayer>("EuclideanLoss");
  registry->Register<ExpLayer>("Exp");
  registry->Register<FlattenLayer>("Flatten");
  registry->Register<InnerProductLayer>("InnerProduct");
  registry->Register<InputLayer>("Input");
  registry->Register<LogLayer>("Log");
  registry->Register<LRNLayer>("LRN");
  registry->Register<PoolingLayer>("Pooling");
  registry->Register<PowerLayer>("Power");
  registry->Register<PReLULayer>("PReLU");
  registry->Register<ReLULayer>("ReLU");
  registry->Register<ReshapeLayer>("Reshape");
  registry->Register<ScaleLayer>("Scale");
  registry->Register<SigmoidCrossEntropyLossLayer>("SigmoidCrossEntropyLoss");
  registry->Register<SigmoidLayer>("Sigmoid");
  registry->Register<SilenceLayer>("Silence");
  registry->Register<SliceLayer>("Slice");
  registry->Register<SoftmaxLayer>("Softmax");
  registry->Register<SoftmaxWithLossLayer>("SoftmaxWithLoss");
  registry->Register<SplitLayer>("Split");
  registry->Register<SwishLayer>("Swish");
  registry->Register<TanHLayer>("TanH");
  registry->Register<ThresholdLayer>("Threshold");
  registry->Register<ContrastiveLossLayer>("ContrastiveLoss");
  registry->Register<HingeLossLayer>("HingeLoss");
  registry->Register<InfogainLossLayer>("InfogainLoss");
  registry->Register<MultinomialLogisticLossLayer>("MultinomialLogisticLoss");
  registry->Register<BatchReindexLayer>("BatchReindex");
  registry->Register<FilterLayer>("Filter");
  registry->Register<EmbedLayer>("Embed");
  registry->Register<ParameterLayer>("Parameter");
  registry->Register<PythonLayer>("Python");  // Refused at set-up: no Python is embedded.
  registry->Register<TileLayer>("Tile");
  registry->Register<ReductionLayer>("Reduction");
  registry->Register<CropLayer>("Crop");
  registry->Register<MVNLayer>("MVN");
  registry->Register<Im2colLayer>("Im2col");
  registry->Register<SPPLayer>("SPP");
  registry->Register<LSTMUnitLayer>("LSTMUnit");
  registry->Register<LSTMLayer>("LSTM");
  registry->Register<RNNLayer>("RNN");
}

}  // namespace nereus

// Registers every compute layer under its Caffe type string.
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/layers/accuracy_layer.h"
#include "worker/trainer/layers/concat_eltwise_layers.h"
#include "worker/trainer/layers/conv_layer.h"
#include "worker/trainer/layers/inner_product_layer.h"
#include "worker/trainer/layers/lrn_layer.h"
#include "worker/trainer/layers/neuron_layers.h"
#include "worker/trainer/layers/pooling_layer.h"
#include "worker/trainer/layers/softmax_layers.h"

namespace nereus {

void RegisterComputeLayers(LayerRegistry* registry) {
  registry->Register<AccuracyLayer>("Accuracy");
  registry->Register<ConcatLayer>("Concat");
  registry->Register<ConvolutionLayer>("Convolution");
  registry->Register<DropoutLayer>("Dropout");
  registry->Register<EltwiseLayer>("Eltwise");
  registry->Register<InnerProductLayer>("InnerProduct");
  registry->Register<LRNLayer>("LRN");
  registry->Register<PoolingLayer>("Pooling");
  registry->Register<ReLULayer>("ReLU");
  registry->Register<SigmoidLayer>("Sigmoid");
  registry->Register<SoftmaxLayer>("Softmax");
  registry->Register<SoftmaxWithLossLayer>("SoftmaxWithLoss");
  registry->Register<TanHLayer>("TanH");
}

}  // namespace nereus

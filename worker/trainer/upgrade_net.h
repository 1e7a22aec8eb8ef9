// Reading nets written in Caffe's older formats, upgraded as Caffe's
// util/upgrade_proto.cpp does:
// - V1 nets: `layers { type: CONVOLUTION ... }` (an enum type, blobs_lr,
//   weight_decay, param names, blob_share_mode) become `layer { type:
//   "Convolution" param { lr_mult decay_mult name share_mode } ... }`; the
//   layer-specific parameters, include/exclude rules, loss weights and stored
//   blobs are carried over unchanged.
// - `input_dim` (four per `input`) becomes `input_shape`.
// Text nets (ParseNetParameter, solvers' inline nets) and binary weights
// (Net::CopyTrainedLayersFromBinaryProto) are upgraded when read.
#ifndef NEREUS_WORKER_TRAINER_UPGRADE_NET_H_
#define NEREUS_WORKER_TRAINER_UPGRADE_NET_H_

#include <string>

#include "common/base/status.h"
#include "proto/caffe.pb.h"

namespace nereus {

// Whether `param` uses a deprecated format UpgradeNetAsNeeded rewrites.
bool NetNeedsUpgrade(const caffe::NetParameter& param);

// Upgrades `param` in place. Errors (a net with both `layer` and `layers`, a
// V1 layer of type NONE, input_dim not four per input) name `source`.
Status UpgradeNetAsNeeded(const std::string& source, caffe::NetParameter* param);

// The V2 type string of a V1 layer type ("CONVOLUTION" -> "Convolution");
// empty for NONE.
std::string UpgradeV1LayerType(caffe::V1LayerParameter::LayerType type);

// One V1 layer to a LayerParameter.
void UpgradeV1LayerParameter(const caffe::V1LayerParameter& v1, caffe::LayerParameter* layer);

}  // namespace nereus

#endif  // NEREUS_WORKER_TRAINER_UPGRADE_NET_H_

// A Net for a test, from prototxt text: what the trainer's tests that run a
// whole net write before anything else.
#ifndef NEREUS_TESTS_SUPPORT_NET_TEST_UTIL_H_
#define NEREUS_TESTS_SUPPORT_NET_TEST_UTIL_H_

#include <memory>
#include <string>

#include "common/base/status.h"
#include "proto/caffe.pb.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace test {

// The TRAIN phase's net of the prototxt `text` (`file` names it in errors),
// its layers from `registry`, built with `options`.
inline StatusOr<std::unique_ptr<Net>> TrainNetFromText(const std::string& text, const std::string& file,
                                                       const LayerRegistry& registry = DefaultLayerRegistry(),
                                                       const NetOptions& options = NetOptions()) {
  caffe::NetParameter param;
  RETURN_IF_ERROR(ParseNetParameter(text, file, &param));
  param.mutable_state()->set_phase(caffe::TRAIN);
  return Net::Create(param, registry, options);
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_NET_TEST_UTIL_H_

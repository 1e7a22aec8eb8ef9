// A Net for a test, from prototxt text: what the trainer's tests that run a
// whole net write before anything else; a tiny net that does not fit a
// device of 100 bytes.
#ifndef NEREUS_TESTS_SUPPORT_NET_TEST_UTIL_H_
#define NEREUS_TESTS_SUPPORT_NET_TEST_UTIL_H_

#include <gtest/gtest.h>

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

// Input [2, 8] (64 bytes), then InnerProduct 8 -> 4: its top (32 bytes),
// that top's diff (32 more), its weights...
constexpr char kTinyIpNet[] = R"(name: "tiny_ip"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 8 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
  inner_product_param { num_output: 4 weight_filler { type: "constant" value: 0.5 } } }
)";

// kTinyIpNet built on `device`, which holds 100 bytes: it runs out at the
// InnerProduct's top, the error naming the net, the layer, the device
// (`device_name`) and the bytes.
inline void ExpectTinyIpNetRunsOutOfMemory(gpu::Device* device, const std::string& device_name) {
  NetOptions options;
  options.device = device;
  auto net = TrainNetFromText(kTinyIpNet, "tiny_ip.prototxt", DefaultLayerRegistry(), options);
  ASSERT_FALSE(net.ok());
  EXPECT_EQ(StatusCode::kResourceExhausted, net.status().code());
  EXPECT_EQ(
      "net \"tiny_ip\", layer \"ip\" (InnerProduct), allocating its blobs on the device: out of device memory on " +
          device_name + ": asked for 32 bytes with 96 bytes in use and a limit of 100 bytes",
      net.status().message());
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_NET_TEST_UTIL_H_

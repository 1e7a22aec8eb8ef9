// Parameter: a learned blob as a top (shared, not copied), its gradient
// accumulated; in a Net, a learnable parameter trained through a loss; and
// Python layers refused at net construction, naming the layer and why.
#include "worker/trainer/layers/parameter_layer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/net_test_util.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/layers/python_layer.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace test {
namespace {

TEST(ParameterLayerTest, TopIsTheBlobAndBackwardAccumulates) {
  ParameterLayer layer(ParseLayerParameter("name: 'p' type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }"));
  Blob top;
  ASSERT_TRUE(layer.SetUp({}, {&top}).ok());
  ASSERT_EQ(1u, layer.blobs().size());
  Blob* blob = layer.blobs()[0].get();
  EXPECT_EQ((std::vector<int>{2, 3}), blob->shape());
  EXPECT_EQ((std::vector<int>{2, 3}), top.shape());
  EXPECT_EQ(std::vector<float>(6, 0.0f), BlobData(*blob));  // zeros, as Caffe's
  SetBlobData(blob, {1, 2, 3, 4, 5, 6});
  layer.Forward({}, {&top});
  EXPECT_EQ(blob->cpu_data(), top.cpu_data());  // shared, not copied
  EXPECT_EQ((std::vector<float>{1, 2, 3, 4, 5, 6}), BlobData(top));
  const std::vector<float> g = {1, -1, 0.5f, 0, 2, 3};
  std::copy(g.begin(), g.end(), top.mutable_cpu_diff());
  std::fill(blob->mutable_cpu_diff(), blob->mutable_cpu_diff() + 6, 0.0f);
  layer.Backward({&top}, {}, {});
  EXPECT_EQ(g, BlobDiff(*blob));
  layer.Backward({&top}, {}, {});  // a second iter_size pass adds
  EXPECT_EQ((std::vector<float>{2, -2, 1, 0, 4, 6}), BlobDiff(*blob));
  layer.set_param_propagate_down(0, false);  // lr_mult 0
  layer.Backward({&top}, {}, {});
  EXPECT_EQ((std::vector<float>{2, -2, 1, 0, 4, 6}), BlobDiff(*blob));
}

TEST(ParameterLayerTest, Gradient) {
  ParameterLayer layer(ParseLayerParameter("name: 'p' type: 'Parameter' parameter_param { shape { dim: 4 } }"));
  Blob top;
  ASSERT_TRUE(layer.SetUp({}, {&top}).ok());
  SetBlobData(layer.blobs()[0].get(), {0.5f, -1, 2, 0.25f});
  test::ExpectGradient(&layer, {}, {&top}, {test::GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0, -1, -2});
}

TEST(ParameterLayerTest, ExistingBlobOfAnotherShapeIsAnError) {
  ParameterLayer layer(ParseLayerParameter("name: 'p2' type: 'Parameter' parameter_param { shape { dim: 4 } }"));
  layer.blobs().push_back(std::make_shared<Blob>(std::vector<int>{5}));
  test::ExpectErrorContains(test::SetUpOn(&layer, {}), {"layer p2 (Parameter)", "existing parameter blob"});
  ParameterLayer bottoms(ParseLayerParameter("name: 'p3' type: 'Parameter'"));
  test::ExpectErrorContains(test::SetUpOn(&bottoms, {{2}}), {"layer p3 (Parameter)", "0 bottom"});
}

// p (Parameter, 1 x 3) is trained towards the input t by EuclideanLoss:
// its gradient is p - t, as a learnable parameter of the net.
TEST(ParameterLayerTest, LearnedInANet) {
  auto net = test::TrainNetFromText(R"(
    name: "p"
    input: "t" input_shape { dim: 1 dim: 3 }
    layer { name: "p" type: "Parameter" top: "p" parameter_param { shape { dim: 1 dim: 3 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "t" top: "loss" }
  )",
                                    "test.prototxt");
  ASSERT_TRUE(net.ok()) << net.status();
  ASSERT_EQ(1u, (*net)->learnable_params().size());
  Blob* p = (*net)->learnable_params()[0];
  SetBlobData(p, {1, 2, 3});
  SetBlobData((*net)->blob_by_name("t"), {0, 2, 5});
  auto loss = (*net)->ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_FLOAT_EQ((1 + 0 + 4) / 2.0f, *loss);
  EXPECT_EQ((std::vector<float>{1, 0, -2}), BlobDiff(*p));
}

TEST(PythonLayerTest, RefusedAtNetConstructionNamingTheLayerAndWhy) {
  caffe::NetParameter param;
  ASSERT_TRUE(ParseNetParameter(R"(
    name: "py"
    input: "x" input_shape { dim: 1 dim: 3 }
    layer {
      name: "my_py" type: "Python" bottom: "x" top: "y"
      python_param { module: "my_module" layer: "MyLayer" param_str: "{}" }
    }
  )",
                                "test.prototxt", &param)
                  .ok());
  auto net = Net::Create(param, DefaultLayerRegistry());
  test::ExpectErrorContains(net.status(), {"layer my_py (Python)", "no Python interpreter is embedded",
                                           "module: 'my_module' layer: 'MyLayer'"});
  PythonLayer layer(ParseLayerParameter("name: 'q' type: 'Python'"));
  test::ExpectErrorContains(test::SetUpOn(&layer, {{2}}), {"layer q (Python)", "cannot run in Nereus"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

#include "worker/trainer/prototxt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/support/status_util.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("NEREUS_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

std::string Model(const std::string& name) { return SourceDir() + "/worker/trainer/models/" + name; }

// A Data layer stand-in with fixed top shapes, so the example nets can be
// built without their LMDBs.
class ShapeOnlyDataLayer : public Layer {
 public:
  ShapeOnlyDataLayer(const caffe::LayerParameter& p, std::vector<int> shape) : Layer(p), shape_(std::move(shape)) {}
  int ExactNumBottomBlobs() const override { return 0; }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    std::vector<int> s = shape_;
    s[0] = static_cast<int>(layer_param_.data_param().batch_size());
    top[0]->Reshape(s);
    if (top.size() > 1) top[1]->Reshape(std::vector<int>{s[0]});
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) override {}

 private:
  std::vector<int> shape_;
};

LayerRegistry RegistryWithFakeData(std::vector<int> shape) {
  LayerRegistry r;
  RegisterComputeLayers(&r);
  r.Register("Data", [shape](const caffe::LayerParameter& p) -> std::unique_ptr<Layer> {
    return std::make_unique<ShapeOnlyDataLayer>(p, shape);
  });
  return r;
}

std::vector<std::string> FilteredLayerNames(const caffe::NetParameter& param, caffe::Phase phase) {
  caffe::NetParameter p = param;
  p.mutable_state()->set_phase(phase);
  caffe::NetParameter filtered;
  EXPECT_TRUE(FilterNet(p, &filtered).ok());
  std::vector<std::string> names;
  for (const auto& l : filtered.layer()) names.push_back(l.name());
  return names;
}

TEST(PrototxtTest, LeNetParsesAndCountsParameters) {
  caffe::NetParameter param;
  PrototxtLocations loc;
  Status st = ReadNetParameterFromTextFile(Model("lenet_train_test.prototxt"), &param, &loc);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(param.name(), "LeNet");
  ASSERT_EQ(param.layer_size(), 11);
  EXPECT_EQ(param.layer(2).convolution_param().num_output(), 20u);
  EXPECT_EQ(param.layer(2).param(1).lr_mult(), 2.0f);
  EXPECT_EQ(param.layer(0).data_param().backend(), caffe::DataParameter::LMDB);
  EXPECT_FLOAT_EQ(param.layer(0).transform_param().scale(), 0.00390625f);
  ASSERT_EQ(loc.layer_lines.size(), 11u);
  EXPECT_EQ(loc.layer_lines[0], 5);  // After the 4 comment/name lines.

  LayerRegistry registry = RegistryWithFakeData({64, 1, 28, 28});
  param.mutable_state()->set_phase(caffe::TRAIN);
  auto net = Net::Create(param, registry);
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_EQ((*net)->num_learnable_scalars(), 431080);
  EXPECT_EQ((*net)->learnable_params().size(), 8u);
  EXPECT_EQ((*net)->params_lr()[1], 2.0f);

  // With all-zero images the logits are all equal (ip2's bias starts at 0),
  // so the softmax loss is exactly ln(10); backward runs through every layer.
  auto loss = (*net)->ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(*loss, std::log(10.0f), 1e-5);
  EXPECT_GT((*net)->learnable_params()[7]->asum_diff(), 0.0f);  // ip2 bias gradient.
}

TEST(PrototxtTest, Cifar10QuickParsesAndCountsParameters) {
  caffe::NetParameter param;
  Status st = ReadNetParameterFromTextFile(Model("cifar10_quick_train_test.prototxt"), &param);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(param.name(), "CIFAR10_quick");
  EXPECT_EQ(param.layer(0).transform_param().mean_file(), "data/cifar10/mean.binaryproto");
  LayerRegistry registry = RegistryWithFakeData({100, 3, 32, 32});
  for (caffe::Phase phase : {caffe::TRAIN, caffe::TEST}) {
    param.mutable_state()->set_phase(phase);
    auto net = Net::Create(param, registry);
    ASSERT_TRUE(net.ok()) << net.status();
    EXPECT_EQ((*net)->num_learnable_scalars(), 145578);
  }
}

TEST(PrototxtTest, PhaseFilteringKeepsTheRightLayers) {
  caffe::NetParameter param;
  ASSERT_TRUE(ReadNetParameterFromTextFile(Model("lenet_train_test.prototxt"), &param).ok());
  const std::vector<std::string> train = FilteredLayerNames(param, caffe::TRAIN);
  const std::vector<std::string> test = FilteredLayerNames(param, caffe::TEST);
  const std::vector<std::string> expected_train = {"mnist", "conv1", "pool1", "conv2", "pool2",
                                                   "ip1",   "relu1", "ip2",   "loss"};
  const std::vector<std::string> expected_test = {"mnist", "conv1", "pool1", "conv2",    "pool2",
                                                  "ip1",   "relu1", "ip2",   "accuracy", "loss"};
  EXPECT_EQ(train, expected_train);
  EXPECT_EQ(test, expected_test);

  caffe::NetParameter p = param;
  p.mutable_state()->set_phase(caffe::TRAIN);
  caffe::NetParameter filtered;
  ASSERT_TRUE(FilterNet(p, &filtered).ok());
  EXPECT_EQ(filtered.layer(0).data_param().source(), "data/mnist/mnist_train_lmdb");
  p.mutable_state()->set_phase(caffe::TEST);
  ASSERT_TRUE(FilterNet(p, &filtered).ok());
  EXPECT_EQ(filtered.layer(0).data_param().source(), "data/mnist/mnist_test_lmdb");

  // In TEST, ip2 and label feed both Accuracy and the loss: Split layers.
  LayerRegistry registry = RegistryWithFakeData({100, 1, 28, 28});
  auto net = Net::Create(p, registry);
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_TRUE((*net)->has_layer("ip2_ip2_0_split"));
  EXPECT_TRUE((*net)->has_layer("label_mnist_1_split"));
  EXPECT_TRUE((*net)->has_blob("accuracy"));
}

TEST(PrototxtTest, StageAndLevelRules) {
  caffe::NetState state;
  state.set_phase(caffe::TEST);
  state.set_level(2);
  state.add_stage("deploy");
  caffe::NetStateRule rule;
  EXPECT_TRUE(StateMeetsRule(state, rule));
  rule.set_min_level(3);
  EXPECT_FALSE(StateMeetsRule(state, rule));
  rule.set_min_level(1);
  rule.set_max_level(2);
  EXPECT_TRUE(StateMeetsRule(state, rule));
  rule.add_stage("deploy");
  EXPECT_TRUE(StateMeetsRule(state, rule));
  rule.add_not_stage("deploy");
  EXPECT_FALSE(StateMeetsRule(state, rule));
  caffe::NetStateRule train_only;
  train_only.set_phase(caffe::TRAIN);
  EXPECT_FALSE(StateMeetsRule(state, train_only));
}

TEST(PrototxtTest, SolversParse) {
  caffe::SolverParameter lenet;
  Status st = ReadSolverParameterFromTextFile(Model("lenet_solver.prototxt"), &lenet);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(lenet.net(), "worker/trainer/models/lenet_train_test.prototxt");
  EXPECT_FLOAT_EQ(lenet.base_lr(), 0.01f);
  EXPECT_FLOAT_EQ(lenet.momentum(), 0.9f);
  EXPECT_FLOAT_EQ(lenet.weight_decay(), 0.0005f);
  EXPECT_EQ(lenet.lr_policy(), "inv");
  EXPECT_FLOAT_EQ(lenet.gamma(), 0.0001f);
  EXPECT_FLOAT_EQ(lenet.power(), 0.75f);
  EXPECT_EQ(lenet.display(), 100);
  EXPECT_EQ(lenet.max_iter(), 10000);
  EXPECT_EQ(lenet.test_iter(0), 100);
  EXPECT_EQ(lenet.test_interval(), 500);
  EXPECT_EQ(lenet.solver_mode(), caffe::SolverParameter::CPU);

  caffe::SolverParameter quick;
  ASSERT_TRUE(ReadSolverParameterFromTextFile(Model("lenet_solver_quick.prototxt"), &quick).ok());
  EXPECT_EQ(quick.max_iter(), 1500);
  EXPECT_FLOAT_EQ(quick.base_lr(), 0.03f);

  caffe::SolverParameter cifar;
  st = ReadSolverParameterFromTextFile(Model("cifar10_quick_solver.prototxt"), &cifar);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_FLOAT_EQ(cifar.base_lr(), 0.001f);
  EXPECT_FLOAT_EQ(cifar.weight_decay(), 0.004f);
  EXPECT_EQ(cifar.lr_policy(), "fixed");
  EXPECT_EQ(cifar.max_iter(), 4000);
  EXPECT_EQ(cifar.snapshot_format(), caffe::SolverParameter::HDF5);  // Caffe's file, unchanged.
}

TEST(PrototxtTest, UnknownFieldIsAnErrorWithNameAndLine) {
  const std::string text =
      "name: \"t\"\n"              // 1
      "layer {\n"                  // 2
      "  name: \"conv1\"\n"        // 3
      "  type: \"Convolution\"\n"  // 4
      "  convolution_param {\n"    // 5
      "    num_output: 4\n"        // 6
      "    foo: 1\n"               // 7
      "  }\n"
      "}\n";
  caffe::NetParameter param;
  Status st = ParseNetParameter(text, "lenet.prototxt", &param);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("lenet.prototxt:7:5: unknown field \"foo\" in caffe.ConvolutionParameter: not a "
                              "Caffe field"),
            std::string::npos)
      << st;

  // A Caffe field Nereus does not support (not in our caffe.proto) fails the
  // same way, and the message says it is a Caffe field.
  caffe::NetParameter p2;
  st = ParseNetParameter("layer {\n  name: \"x\"\n  pooling_param {\n    round_mode: FLOOR\n  }\n}\n", "n.prototxt",
                         &p2);
  test::ExpectErrorContains(st, {"n.prototxt:4:5: unknown field \"round_mode\" in caffe.PoolingParameter: a Caffe "
                                 "field that Nereus does not support"});

  caffe::SolverParameter solver;
  st = ParseSolverParameter("base_lr: 0.1\nweights: \"a.caffemodel\"\n", "s.prototxt", &solver);
  test::ExpectErrorContains(st, {"s.prototxt:2:1: unknown field \"weights\" in caffe.SolverParameter: a Caffe field "
                                 "that Nereus does not support"});
  st = ParseSolverParameter("base_lr: 0.1\nmomentum3: 0.5\n", "s.prototxt", &solver);
  EXPECT_NE(st.message().find("s.prototxt:2:1: unknown field \"momentum3\" in caffe.SolverParameter: not a Caffe "
                              "field"),
            std::string::npos)
      << st;
  // The fields of Caffe's adaptive solvers are read.
  st = ParseSolverParameter("type: \"Adam\"\ndelta: 1e-6\nmomentum2: 0.99\nrms_decay: 0.9\n", "s.prototxt", &solver);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_FLOAT_EQ(solver.delta(), 1e-6f);
  EXPECT_FLOAT_EQ(solver.momentum2(), 0.99f);
  EXPECT_FLOAT_EQ(solver.rms_decay(), 0.9f);
}

TEST(PrototxtTest, UnsupportedLayerTypeNamesTypeLayerAndLine) {
  const std::string text =
      "name: \"t\"\n"
      "input: \"data\"\n"
      "input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }\n"
      "layer {\n"  // 4
      "  name: \"up\"\n"
      "  type: \"Upsample\"\n"
      "  bottom: \"data\"\n"
      "  top: \"up\"\n"
      "}\n";
  caffe::NetParameter param;
  PrototxtLocations loc;
  ASSERT_TRUE(ParseNetParameter(text, "deconv.prototxt", &param, &loc).ok());
  LayerRegistry registry = RegistryWithFakeData({1, 1, 4, 4});
  NetOptions options;
  options.locations = &loc;
  auto net = Net::Create(param, registry, options);
  ASSERT_FALSE(net.ok());
  const std::string& msg = net.status().message();
  EXPECT_NE(msg.find("layer \"up\" (deconv.prototxt:4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown layer type \"Upsample\""), std::string::npos) << msg;
}

TEST(PrototxtTest, BinaryRoundTripAndMissingFile) {
  caffe::SolverState state;
  state.set_iter(42);
  state.add_history()->add_data(1.5f);
  const std::string path = ::testing::TempDir() + "/prototxt_test_state.bin";
  ASSERT_TRUE(WriteProtoToBinaryFile(state, path).ok());
  caffe::SolverState back;
  ASSERT_TRUE(ReadProtoFromBinaryFile(path, &back).ok());
  EXPECT_EQ(back.iter(), 42);
  EXPECT_EQ(back.history(0).data(0), 1.5f);
  std::remove(path.c_str());

  Status st = ReadProtoFromBinaryFile(path + ".missing", &back);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  st = ReadNetParameterFromTextFile("/nonexistent/net.prototxt", nullptr);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace nereus

#include "worker/trainer/net.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/support/status_util.h"
#include "tests/support/trainer_test_layers.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace {

using testing_layers::TestRegistry;

caffe::NetParameter Parse(const std::string& text, caffe::Phase phase = caffe::TRAIN) {
  caffe::NetParameter p;
  Status st = ParseNetParameter(text, "test.prototxt", &p);
  EXPECT_TRUE(st.ok()) << st;
  p.mutable_state()->set_phase(phase);
  return p;
}

// Building the TRAIN net of `text` fails with an error holding each of `parts`.
void ExpectNetError(const std::string& text, const std::vector<std::string>& parts) {
  test::ExpectErrorContains(Net::Create(Parse(text), TestRegistry()).status(), parts);
}

std::unique_ptr<Net> Build(const caffe::NetParameter& p) {
  LayerRegistry registry = TestRegistry();
  auto net = Net::Create(p, registry);
  EXPECT_TRUE(net.ok()) << net.status();
  return net.ok() ? std::move(net).value() : nullptr;
}

// x (2 x 3) -> fc (TestLinear, 2 outputs) -> y; y feeds two losses.
const char* kTwoLosses = R"(
name: "two_losses"
input: "x"
input_shape { dim: 2 dim: 3 }
layer {
  name: "fc" type: "TestLinear" bottom: "x" top: "y"
  inner_product_param { num_output: 2 weight_filler { type: "constant" value: 0.5 } bias_filler { type: "constant" value: 0.1 } }
}
layer { name: "loss1" type: "TestSquareLoss" bottom: "y" top: "l1" }
layer { name: "loss2" type: "TestSquareLoss" bottom: "y" top: "l2" loss_weight: 3 }
)";

void FillInput(Net* net) {
  Blob* x = net->input_blobs()[0];
  for (int i = 0; i < x->count(); ++i) x->mutable_cpu_data()[i] = 0.1f * (i + 1);
}

TEST(NetTest, SplitInsertedForBlobUsedTwiceAndGradientsSum) {
  auto net = Build(Parse(kTwoLosses));
  ASSERT_NE(net, nullptr);
  // fc, the split, loss1, loss2.
  ASSERT_EQ(net->num_layers(), 4);
  EXPECT_EQ(net->layer_names()[1], "y_fc_0_split");
  EXPECT_STREQ(net->layers()[1]->type(), "Split");
  EXPECT_EQ(net->top_vecs()[1].size(), 2u);
  EXPECT_TRUE(net->has_blob("y_fc_0_split_0"));
  EXPECT_TRUE(net->has_blob("y_fc_0_split_1"));

  FillInput(net.get());
  net->ClearParamDiffs();
  auto loss = net->ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  // y = 0.5 * sum(x_row) + 0.1: row0 x = .1 .2 .3 -> 0.4, row1 x = .4 .5 .6 -> 0.85.
  const float y0 = 0.5f * (0.1f + 0.2f + 0.3f) + 0.1f, y1 = 0.5f * (0.4f + 0.5f + 0.6f) + 0.1f;
  const float sq = (2 * y0 * y0 + 2 * y1 * y1) / 4.0f;  // sum(y^2) / (2N), 2 outputs per row.
  EXPECT_NEAR(*loss, sq * (1 + 3), 1e-6);
  // dL/dy = (1 + 3) * y / N; the bias gradient sums it over the batch.
  const float* db = net->learnable_params()[1]->cpu_diff();
  EXPECT_NEAR(db[0], 4.0f * (y0 + y1) / 2.0f, 1e-6);
  EXPECT_NEAR(db[1], 4.0f * (y0 + y1) / 2.0f, 1e-6);
}

TEST(NetTest, InPlaceLayerSharesItsBlob) {
  auto net = Build(Parse(R"(
input: "x"
input_shape { dim: 1 dim: 2 }
layer { name: "id" type: "TestIdentity" bottom: "x" top: "x" }
layer { name: "loss" type: "TestSquareLoss" bottom: "x" top: "l" }
)"));
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->top_vecs()[0][0], net->bottom_vecs()[0][0]);
  EXPECT_EQ(net->top_vecs()[0][0], net->input_blobs()[0]);
  EXPECT_EQ(net->num_layers(), 2);  // No split for an in-place chain.
}

TEST(NetTest, TopProducedTwiceIsAnError) {
  ExpectNetError(R"(
input: "x"
input_shape { dim: 1 dim: 2 }
layer { name: "a" type: "TestIdentity" bottom: "x" top: "y" }
layer { name: "b" type: "TestIdentity" bottom: "x" top: "y" }
)",
                 {"top blob \"y\" is produced by more than one layer"});
}

TEST(NetTest, UnknownBottomIsAnError) {
  ExpectNetError(R"(
layer { name: "a" type: "TestIdentity" bottom: "nothere" top: "y" }
)",
                 {"unknown bottom blob \"nothere\" (layer \"a\""});
}

TEST(NetTest, LayerSetUpErrorNamesTheLayer) {
  ExpectNetError(R"(
input: "x"
input_shape { dim: 1 dim: 2 }
layer { name: "fc" type: "TestLinear" bottom: "x" top: "y" }
)",
                 {"layer \"fc\"", "num_output must be > 0"});
}

// Layer::SetUp's blob-count checks (exact, at least, at most; bottoms, then
// tops), each naming the layer, its bound and what it got.
TEST(NetTest, BlobCountErrorsNameTheLayerTheBoundAndTheCount) {
  const std::string inputs = R"(
input: "x" input_shape { dim: 2 dim: 3 }
input: "y" input_shape { dim: 2 dim: 3 }
input: "z" input_shape { dim: 2 dim: 3 }
)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(layer { name: "l" type: "ReLU" bottom: "x" bottom: "y" top: "a" })",
       "layer l (ReLU): takes 1 bottom blob(s), got 2"},
      {R"(layer { name: "l" type: "LSTM" bottom: "x" top: "a" })",
       "layer l (LSTM): takes at least 2 bottom blob(s), got 1"},
      {R"(layer { name: "l" type: "Bias" bottom: "x" bottom: "y" bottom: "z" top: "a" })",
       "layer l (Bias): takes at most 2 bottom blob(s), got 3"},
      {R"(layer { name: "l" type: "ReLU" bottom: "x" top: "a" top: "b" })",
       "layer l (ReLU): produces 1 top blob(s), got 2"},
      {R"(layer { name: "l" type: "Slice" bottom: "x" })", "layer l (Slice): produces at least 1 top blob(s), got 0"},
      {R"(layer { name: "l" type: "Accuracy" bottom: "x" bottom: "y" top: "a" top: "b" top: "c" })",
       "layer l (Accuracy): produces at most 2 top blob(s), got 3"},
  };
  for (const auto& [layer, error] : cases) {
    SCOPED_TRACE(layer);
    const auto net = Net::Create(Parse(inputs + layer), DefaultLayerRegistry());
    ASSERT_FALSE(net.ok());
    EXPECT_EQ(net.status().message(), "layer \"l\": " + error);  // The net's prefix, then the layer's error.
  }
}

// Shapes a prototxt gives that no blob can take are errors, not CHECKs.
TEST(NetTest, InputShapesPastIntMaxAreErrorsNamingTheInput) {
  caffe::NetParameter p = Parse(R"(
input: "x"
input_shape { dim: 100000 dim: 100000 }
layer { name: "id" type: "TestIdentity" bottom: "x" top: "y" }
)");
  auto net = Net::Create(p, TestRegistry());
  EXPECT_EQ(net.status().ToString(),
            "INVALID_ARGUMENT: net input \"x\": shape 100000 x 100000 holds more than INT_MAX values");
  auto input = Net::Create(Parse(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: -3 } } }
)"),
                           DefaultLayerRegistry());
  EXPECT_EQ(input.status().message(),
            "layer \"in\": layer in (Input): input_param shape 2 x -3 has a negative dimension");
}

TEST(NetTest, HooksFireInLayerOrder) {
  auto net = Build(Parse(kTwoLosses));
  ASSERT_NE(net, nullptr);
  std::vector<std::string> events;
  // A hook that records `tag` and the layer.
  auto record = [&events](const std::string& tag) {
    return [&events, tag](int l) {
      events.push_back(tag + std::to_string(l));
      return Status::OK();
    };
  };
  net->add_before_forward(record("bf"));
  net->add_after_forward(record("af"));
  net->add_before_backward(record("bb"));
  net->add_after_backward(record("ab"));
  FillInput(net.get());
  ASSERT_TRUE(net->ForwardBackward().ok());
  const std::vector<std::string> expected = {"bf0", "af0", "bf1", "af1", "bf2", "af2", "bf3", "af3",
                                             "bb3", "ab3", "bb2", "ab2", "bb1", "ab1", "bb0", "ab0"};
  EXPECT_EQ(events, expected);
}

TEST(NetTest, HookErrorAbortsThePass) {
  auto net = Build(Parse(kTwoLosses));
  ASSERT_NE(net, nullptr);
  int forwards = 0;
  net->add_before_forward([&](int l) -> Status {
    if (l == 2) return UnavailableError("server 1 is gone");
    ++forwards;
    return Status::OK();
  });
  auto loss = net->Forward();
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ(loss.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(forwards, 2);
}

TEST(NetTest, ParamSharingByNameAndMultipliers) {
  auto net = Build(Parse(R"(
input: "x"
input_shape { dim: 2 dim: 2 }
layer {
  name: "fc1" type: "TestLinear" bottom: "x" top: "h"
  param { name: "w" lr_mult: 3 decay_mult: 0.5 } param { lr_mult: 2 decay_mult: 0 }
  inner_product_param { num_output: 2 weight_filler { type: "constant" value: 1 } }
}
layer {
  name: "fc2" type: "TestLinear" bottom: "h" top: "y"
  param { name: "w" } param { lr_mult: 0 }
  inner_product_param { num_output: 2 weight_filler { type: "constant" value: 2 } }
}
layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "l" }
)"));
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->params().size(), 4u);
  ASSERT_EQ(net->learnable_params().size(), 3u);  // w, fc1 bias, fc2 bias.
  EXPECT_EQ(net->param_owners()[2], 0);
  EXPECT_EQ(net->params()[2]->cpu_data(), net->params()[0]->cpu_data());
  EXPECT_EQ(net->params()[2]->cpu_diff(), net->params()[0]->cpu_diff());
  EXPECT_EQ(net->params_lr(), (std::vector<float>{3, 2, 0}));
  EXPECT_EQ(net->params_weight_decay(), (std::vector<float>{0.5f, 0, 1}));
  EXPECT_EQ(net->layer_learnable_param_ids(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(net->layer_learnable_param_ids(1), (std::vector<int>{2}));
  EXPECT_EQ(net->num_learnable_scalars(), 4 + 2 + 2);
  EXPECT_FALSE(net->layers()[1]->param_propagate_down(1));  // lr_mult 0.
}

TEST(NetTest, TestNetSharesTrainNetWeights) {
  const char* text = R"(
input: "x"
input_shape { dim: 1 dim: 2 }
layer {
  name: "fc" type: "TestLinear" bottom: "x" top: "y"
  inner_product_param { num_output: 1 weight_filler { type: "gaussian" } }
}
layer { name: "id" type: "TestIdentity" bottom: "y" top: "z" include { phase: TEST } }
layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "l" include { phase: TRAIN } }
)";
  auto train = Build(Parse(text, caffe::TRAIN));
  auto test = Build(Parse(text, caffe::TEST));
  ASSERT_NE(train, nullptr);
  ASSERT_NE(test, nullptr);
  EXPECT_TRUE(train->has_layer("loss"));
  EXPECT_FALSE(train->has_layer("id"));
  EXPECT_TRUE(test->has_layer("id"));
  EXPECT_FALSE(test->has_layer("loss"));
  ASSERT_TRUE(test->ShareTrainedLayersWith(*train).ok());
  train->learnable_params()[0]->mutable_cpu_data()[1] = 42.0f;
  EXPECT_EQ(test->layer_by_name("fc")->blobs()[0]->cpu_data()[1], 42.0f);
}

TEST(NetTest, ToProtoAndCopyTrainedLayersRoundTrip) {
  caffe::NetParameter p = Parse(kTwoLosses);
  auto a = Build(p);
  ASSERT_NE(a, nullptr);
  for (Blob* b : a->learnable_params()) {
    for (int i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = 0.01f * i - 0.3f;
  }
  caffe::NetParameter weights;
  a->ToProto(&weights);
  EXPECT_EQ(weights.layer_size(), 4);
  EXPECT_EQ(weights.layer(0).blobs_size(), 2);

  auto b = Build(p);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->CopyTrainedLayersFrom(weights).ok());
  for (size_t k = 0; k < a->learnable_params().size(); ++k) {
    for (int i = 0; i < a->learnable_params()[k]->count(); ++i) {
      EXPECT_EQ(b->learnable_params()[k]->cpu_data()[i], a->learnable_params()[k]->cpu_data()[i]);
    }
  }
  // A shape mismatch is an error naming the layer.
  weights.mutable_layer(0)->mutable_blobs(0)->mutable_shape()->set_dim(0, 7);
  Status st = b->CopyTrainedLayersFrom(weights);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layer \"fc\""), std::string::npos) << st;
}

TEST(NetTest, BackwardPruningSkipsLayersWithoutLoss) {
  auto net = Build(Parse(R"(
input: "x"
input_shape { dim: 1 dim: 2 }
layer { name: "side" type: "TestIdentity" bottom: "x" top: "s" }
layer {
  name: "fc" type: "TestLinear" bottom: "x" top: "y"
  inner_product_param { num_output: 1 }
}
layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "l" }
)"));
  ASSERT_NE(net, nullptr);
  // x is split (side, fc); "side" has no loss above it.
  const int side = net->layer_index("side");
  const int fc = net->layer_index("fc");
  ASSERT_GE(side, 0);
  EXPECT_FALSE(net->layer_need_backward()[side]);
  EXPECT_TRUE(net->layer_need_backward()[fc]);
  EXPECT_FALSE(net->bottom_need_backward()[fc][0]);  // Net inputs get no gradient.
  // Outputs: the unconsumed blobs, in name order.
  ASSERT_EQ(net->output_blobs().size(), 2u);
  EXPECT_EQ(net->blob_names()[net->output_blob_indices()[0]], "l");
  EXPECT_EQ(net->blob_names()[net->output_blob_indices()[1]], "s");
}

// Caffe's own example nets repeat layer names: mnist_autoencoder has two
// layers named "loss" in one net. Weights go by name to the first layer of
// the name, as in Caffe; a source that repeats the name too fills our k-th
// layer of that name from its k-th.
const char* kRepeatedNames = R"(
input: "x"
input_shape { dim: 2 dim: 3 }
layer { name: "fc" type: "TestLinear" bottom: "x" top: "a"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
layer { name: "fc" type: "TestLinear" bottom: "a" top: "b"
        inner_product_param { num_output: 2 weight_filler { type: "gaussian" } } }
layer { name: "loss" type: "TestSquareLoss" bottom: "b" top: "l1" }
layer { name: "loss" type: "TestSquareLoss" bottom: "a" top: "l2" loss_weight: 0 }
)";

TEST(NetTest, RepeatedLayerNamesAreAcceptedAsInCaffe) {
  auto net = Build(Parse(kRepeatedNames));
  ASSERT_NE(net, nullptr);
  // fc, the split of a, fc, loss, loss.
  EXPECT_EQ(net->layer_names(), (std::vector<std::string>{"fc", "a_fc_0_split", "fc", "loss", "loss"}));
  EXPECT_EQ(net->layer_index("fc"), 0);
  EXPECT_EQ(net->layer_by_name("loss"), net->layers()[3].get());
  EXPECT_EQ(net->UniqueLayerName(0), "fc#1");
  EXPECT_EQ(net->UniqueLayerName(1), "a_fc_0_split");
  EXPECT_EQ(net->UniqueLayerName(2), "fc#2");
  EXPECT_EQ(net->UniqueLayerName(4), "loss#2");
  EXPECT_EQ(net->learnable_params().size(), 4u);
  FillInput(net.get());
  auto loss = net->ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  // l2 has loss weight 0: the loss is l1 alone.
  EXPECT_EQ(*loss, net->blob_by_name("l1")->cpu_data()[0]);

  // Copy from a net like it: each "fc" from its namesake.
  auto other = Build(Parse(kRepeatedNames));
  ASSERT_NE(other, nullptr);
  for (size_t p = 0; p < other->learnable_params().size(); ++p) {
    Blob* b = other->learnable_params()[p];
    for (int i = 0; i < b->count(); ++i) b->mutable_cpu_data()[i] = static_cast<float>(10 * p + i);
  }
  caffe::NetParameter weights;
  other->ToProto(&weights);
  ASSERT_TRUE(net->CopyTrainedLayersFrom(weights).ok());
  for (size_t p = 0; p < net->learnable_params().size(); ++p) {
    EXPECT_EQ(net->learnable_params()[p]->cpu_data()[1], static_cast<float>(10 * p + 1)) << "param " << p;
  }
  // A source with one "fc" (2 x 3): into the first "fc" only, as Caffe.
  caffe::NetParameter one;
  *one.add_layer() = weights.layer(0);
  for (float& v : *one.mutable_layer(0)->mutable_blobs(0)->mutable_data()) v = -1.0f;
  const float second_before = net->learnable_params()[2]->cpu_data()[0];
  ASSERT_TRUE(net->CopyTrainedLayersFrom(one).ok());
  EXPECT_EQ(net->learnable_params()[0]->cpu_data()[0], -1.0f);
  EXPECT_EQ(net->learnable_params()[2]->cpu_data()[0], second_before);

  // The test net shares each "fc" with its namesake of the train net.
  auto test = Build(Parse(kRepeatedNames, caffe::TEST));
  ASSERT_NE(test, nullptr);
  ASSERT_TRUE(test->ShareTrainedLayersWith(*net).ok());
  EXPECT_EQ(test->layers()[0]->blobs()[0]->cpu_data(), net->layers()[0]->blobs()[0]->cpu_data());
  EXPECT_EQ(test->layers()[2]->blobs()[0]->cpu_data(), net->layers()[2]->blobs()[0]->cpu_data());
}

// loss_weight on a layer that is not a loss makes its top a loss, as in
// Caffe: the loss is loss_weight * sum(top) and the layer gets a gradient.
TEST(NetTest, LossWeightOnANonLossLayerMakesItsTopALoss) {
  auto net = Build(Parse(R"(
input: "x"
input_shape { dim: 1 dim: 3 }
layer { name: "fc" type: "TestLinear" bottom: "x" top: "y"
        inner_product_param { num_output: 2 weight_filler { type: "constant" value: 1 } } }
layer { name: "id" type: "TestIdentity" bottom: "y" top: "z" loss_weight: 0.5 }
)"));
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->layer_need_backward(), (std::vector<bool>{true, true}));
  FillInput(net.get());  // x = 0.1, 0.2, 0.3: y = 0.6, 0.6.
  auto loss = net->ForwardBackward();
  ASSERT_TRUE(loss.ok()) << loss.status();
  const float* z = net->blob_by_name("z")->cpu_data();
  EXPECT_EQ(*loss, 0.5f * z[0] + 0.5f * z[1]);
  // dloss/dW[0][0] = 0.5 * x[0].
  EXPECT_FLOAT_EQ(net->learnable_params()[0]->cpu_diff()[0], 0.05f);
}

// propagate_down: false stops the gradient at that bottom (Caffe's
// semantics); asking for a gradient a layer cannot give is an error at
// set-up naming the layer and the bottom, where Caffe dies in Backward.
TEST(NetTest, PropagateDownAsInCaffeAndRefusedWhereTheLayerHasNoGradient) {
  auto net = Build(Parse(R"(
input: "x"
input_shape { dim: 2 dim: 3 }
layer { name: "fc" type: "TestLinear" bottom: "x" top: "y" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "TestSquareLoss" bottom: "y" top: "l" propagate_down: false }
)"));
  ASSERT_NE(net, nullptr);
  EXPECT_EQ(net->layer_need_backward(), (std::vector<bool>{false, true}));
  EXPECT_EQ(net->bottom_need_backward()[1], (std::vector<bool>{false}));

  caffe::NetParameter p = Parse(R"(
input: "x"
input_shape { dim: 2 dim: 3 }
input: "label"
input_shape { dim: 2 }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
        propagate_down: true propagate_down: true }
)");
  auto refused = Net::Create(p, DefaultLayerRegistry());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "layer \"loss\": bottom 1 (\"label\") cannot get a gradient from a SoftmaxWithLoss layer, but "
            "propagate_down asks for one (set propagate_down: false for it)");

  // A Threshold between a learned layer and the loss: no gradient to give.
  auto threshold = Net::Create(Parse(R"(
input: "x"
input_shape { dim: 2 dim: 3 }
input: "target"
input_shape { dim: 2 dim: 4 }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "thr" type: "Threshold" bottom: "ip" top: "t" }
layer { name: "loss" type: "EuclideanLoss" bottom: "t" bottom: "target" top: "loss" }
)"),
                               DefaultLayerRegistry());
  ASSERT_FALSE(threshold.ok());
  EXPECT_EQ(threshold.status().message(),
            "layer \"thr\": bottom 0 (\"ip\") cannot get a gradient from a Threshold layer, but the layer that "
            "produces it needs one");
}

}  // namespace
}  // namespace nereus

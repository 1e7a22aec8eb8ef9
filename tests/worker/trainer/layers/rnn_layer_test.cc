// RNN: exact values of a two-step sequence worked in double from Caffe's
// unrolled net, the state carried from one forward to the next (and reset
// when the number of streams changes), expose_hidden's top and bottom,
// numeric gradients (with and without a static input and exposed state),
// cont's lack of a gradient, and bad parameters.
#include "worker/trainer/layers/rnn_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/recurrent_layer_test.h"

namespace nereus {
namespace test {
namespace {

constexpr char kRnnOneUnit[] = "name: 'r' type: 'RNN' recurrent_param { num_output: 1 }";

// One stream, one input, one unit, with the weights set by hand.
void SetWeights(RNNLayer* layer) {
  ASSERT_EQ(5u, layer->blobs().size());
  SetBlobData(layer->blobs()[0].get(), {0.8f});   // W_xh
  SetBlobData(layer->blobs()[1].get(), {0.1f});   // b_h
  SetBlobData(layer->blobs()[2].get(), {-0.5f});  // W_hh
  SetBlobData(layer->blobs()[3].get(), {1.5f});   // W_ho
  SetBlobData(layer->blobs()[4].get(), {-0.2f});  // b_o
}

TEST(RNNLayerTest, ForwardValuesAndTheCarriedState) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), o;
  SetBlobData(&x, {0.5f, -1.5f});
  SetBlobData(&cont, {0, 1});
  std::mt19937 rng(1);
  RNNLayer layer(ParseLayerParameter(kRnnOneUnit));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont}, {&o}).ok());
  const std::vector<std::vector<int>> shapes = {{1, 1}, {1}, {1, 1}, {1, 1}, {1}};
  for (size_t i = 0; i < shapes.size(); ++i) EXPECT_EQ(shapes[i], layer.blobs()[i]->shape()) << i;
  SetWeights(&layer);
  layer.Forward({&x, &cont}, {&o});
  EXPECT_EQ((std::vector<int>{2, 1, 1}), o.shape());
  // h_t = tanh(W_hh cont_t h_{t-1} + W_xh x_t + b_h), o_t = tanh(W_ho h_t + b_o).
  ExpectBlobNear({0.45673334f, -0.90591541f}, o, 1e-6f);
  // The next forward starts from the last h (cont 1 keeps it).
  SetBlobData(&cont, {1, 1});
  layer.Forward({&x, &cont}, {&o});
  ExpectBlobNear({0.71591004f, -0.91351004f}, o, 1e-6f);
  // Two streams now: the state starts again at 0 (the first values, twice).
  x.Reshape({2, 2, 1});
  SetBlobData(&x, {0.5f, 0.5f, -1.5f, -1.5f});
  cont.Reshape({2, 2});
  SetBlobData(&cont, {1, 1, 1, 1});
  layer.Forward({&x, &cont}, {&o});
  ExpectBlobNear({0.45673334f, 0.45673334f, -0.90591541f, -0.90591541f}, o, 1e-6f);
}

TEST(RNNLayerTest, ExposedHiddenStateIsTakenAndGiven) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), h0(std::vector<int>{1, 1, 1}), o, hT;
  SetBlobData(&x, {0.5f, -1.5f});
  SetBlobData(&cont, {1, 1});
  SetBlobData(&h0, {-0.86950781774f});  // where the carried-state test's first forward ended
  std::mt19937 rng(1);
  RNNLayer layer(ParseLayerParameter("name: 'r' type: 'RNN' recurrent_param { num_output: 1 expose_hidden: true }"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont, &h0}, {&o, &hT}).ok());
  SetWeights(&layer);
  layer.Forward({&x, &cont, &h0}, {&o, &hT});
  ExpectBlobNear({0.71591004f, -0.91351004f}, o, 1e-6f);
  ExpectBlobNear({-0.89888874f}, hT, 1e-6f);
  layer.Forward({&x, &cont, &h0}, {&o, &hT});  // nothing carried
  ExpectBlobNear({0.71591004f, -0.91351004f}, o, 1e-6f);
}

TEST(RNNLayerTest, Gradients) { CheckRecurrentGradients<RNNLayer>("name: 'r' type: 'RNN'", 1, 30); }

TEST(RNNLayerTest, ContHasNoGradient) {
  ExpectContHasNoGradient<RNNLayer>(kRnnOneUnit, "layer r \\(RNN\\): cont \\(bottom 1\\) has no gradient");
}

TEST(RNNLayerTest, BadParametersAndShapesAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<std::vector<int>>& shapes, int tops) {
    return SetUpRecurrent<RNNLayer>("name: 'r' type: 'RNN'", param, shapes, tops);
  };
  ExpectRecurrentSetUpChecks<RNNLayer>("name: 'r' type: 'RNN'", "layer r (RNN)", {5, 2});
  const std::string three = "recurrent_param { num_output: 3 }";
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 2}}, 2), {"layer r (RNN)", "h_T is a top with expose_hidden"});
  ExpectErrorContains(
      set_up("recurrent_param { num_output: 3 expose_hidden: true }", {{4, 2, 5}, {4, 2}, {1, 2, 4}}, 2),
      {"layer r (RNN)", "h_0 must be [1, N, num_output] = [1, 2, 3]"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

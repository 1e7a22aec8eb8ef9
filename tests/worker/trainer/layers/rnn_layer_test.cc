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

// h_t = tanh(W_hh cont_t h_{t-1} + W_xh x_t + b_h), o_t = tanh(W_ho h_t + b_o).
TEST(RNNLayerTest, ForwardValuesAndTheCarriedState) {
  ExpectCarriedState<RNNLayer>(kRnnOneUnit,
                               [](RNNLayer* layer) {
                                 const std::vector<std::vector<int>> shapes = {{1, 1}, {1}, {1, 1}, {1, 1}, {1}};
                                 for (size_t i = 0; i < shapes.size(); ++i)
                                   EXPECT_EQ(shapes[i], layer->blobs()[i]->shape()) << i;
                                 SetWeights(layer);
                               },
                               {0.45673334f, -0.90591541f}, {0.71591004f, -0.91351004f});
}

// h_0: where the carried-state test's first forward ended.
TEST(RNNLayerTest, ExposedHiddenStateIsTakenAndGiven) {
  ExpectExposedState<RNNLayer>("name: 'r' type: 'RNN' recurrent_param { num_output: 1 expose_hidden: true }",
                               [](RNNLayer* layer) { SetWeights(layer); }, {-0.86950781774f},
                               {0.71591004f, -0.91351004f}, {-0.89888874f});
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

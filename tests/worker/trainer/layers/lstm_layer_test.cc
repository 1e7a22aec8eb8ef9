// LSTM: exact values of a two-step sequence worked in double from Caffe's
// unrolled net, the state carried from one forward to the next (and reset
// when the number of streams changes), expose_hidden's tops and bottoms,
// numeric gradients (with and without a static input and exposed state),
// cont's lack of a gradient, and bad parameters.
#include "worker/trainer/layers/lstm_layer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/recurrent_layer_test.h"

namespace nereus {
namespace test {
namespace {

constexpr char kLstmOneUnit[] = "name: 'l' type: 'LSTM' recurrent_param { num_output: 1 }";

// One stream, one input, one unit, with the weights set by hand.
void SetWeights(LSTMLayer* layer) {
  ASSERT_EQ(3u, layer->blobs().size());
  SetBlobData(layer->blobs()[0].get(), {1, 0.5f, -1, 2});           // W_xc [4, 1]
  SetBlobData(layer->blobs()[1].get(), {0, 0.1f, 0.2f, -0.1f});     // b_c
  SetBlobData(layer->blobs()[2].get(), {0.3f, -0.2f, 0.5f, 0.4f});  // W_hc [4, 1]
}

// The values worked in double from Caffe's unrolled net.
TEST(LSTMLayerTest, ForwardValuesAndTheCarriedState) {
  ExpectCarriedState<LSTMLayer>(kLstmOneUnit,
                                [](LSTMLayer* layer) {
                                  EXPECT_EQ((std::vector<int>{4, 1}), layer->blobs()[0]->shape());
                                  EXPECT_EQ((std::vector<int>{4}), layer->blobs()[1]->shape());
                                  EXPECT_EQ((std::vector<int>{4, 1}), layer->blobs()[2]->shape());
                                  SetWeights(layer);
                                },
                                {0.17809375f, -0.03448605f}, {0.16590401f, -0.04227439f});
}

// h_0, c_0: the state the carried-state test reached after its first
// forward.
TEST(LSTMLayerTest, ExposedHiddenStateIsTakenAndGiven) {
  ExpectExposedState<LSTMLayer>("name: 'l' type: 'LSTM' recurrent_param { num_output: 1 expose_hidden: true }",
                                [](LSTMLayer* layer) { SetWeights(layer); }, {-0.03448604915f, -0.04027109219f},
                                {0.16590401f, -0.04227439f}, {-0.04227439f, -0.04942265f});
}

TEST(LSTMLayerTest, Gradients) { CheckRecurrentGradients<LSTMLayer>("name: 'l' type: 'LSTM'", 2, 20); }

TEST(LSTMLayerTest, ContHasNoGradient) {
  ExpectContHasNoGradient<LSTMLayer>(kLstmOneUnit, "layer l \\(LSTM\\): cont \\(bottom 1\\) has no gradient");
}

TEST(LSTMLayerTest, BadParametersAndShapesAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<std::vector<int>>& shapes, int tops) {
    return SetUpRecurrent<LSTMLayer>("name: 'l' type: 'LSTM'", param, shapes, tops);
  };
  ExpectRecurrentSetUpChecks<LSTMLayer>("name: 'l' type: 'LSTM'", "layer l (LSTM)", {4, 3});
  const std::string three = "recurrent_param { num_output: 3 }";
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 2}}, 3),
                      {"layer l (LSTM)", "h_T and c_T are tops with expose_hidden"});
  ExpectErrorContains(
      set_up("recurrent_param { num_output: 3 expose_hidden: true }", {{4, 2, 5}, {4, 2}, {1, 2, 3}, {1, 2, 4}}, 3),
      {"layer l (LSTM)", "c_0 must be [1, N, num_output] = [1, 2, 3]"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

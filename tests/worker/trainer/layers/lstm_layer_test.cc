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

TEST(LSTMLayerTest, ForwardValuesAndTheCarriedState) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), h;
  SetBlobData(&x, {0.5f, -1.5f});
  SetBlobData(&cont, {0, 1});
  std::mt19937 rng(1);
  LSTMLayer layer(ParseLayerParameter(kLstmOneUnit));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont}, {&h}).ok());
  EXPECT_EQ((std::vector<int>{4, 1}), layer.blobs()[0]->shape());
  EXPECT_EQ((std::vector<int>{4}), layer.blobs()[1]->shape());
  EXPECT_EQ((std::vector<int>{4, 1}), layer.blobs()[2]->shape());
  SetWeights(&layer);
  layer.Forward({&x, &cont}, {&h});
  EXPECT_EQ((std::vector<int>{2, 1, 1}), h.shape());
  ExpectBlobNear({0.17809375f, -0.03448605f}, h, 1e-6f);
  // The next forward starts from the last step's h and c (cont 1 keeps them).
  SetBlobData(&cont, {1, 1});
  layer.Forward({&x, &cont}, {&h});
  ExpectBlobNear({0.16590401f, -0.04227439f}, h, 1e-6f);
  // Two streams now: the state starts again at 0 (the first values, twice).
  x.Reshape({2, 2, 1});
  SetBlobData(&x, {0.5f, 0.5f, -1.5f, -1.5f});
  cont.Reshape({2, 2});
  SetBlobData(&cont, {1, 1, 1, 1});
  layer.Forward({&x, &cont}, {&h});
  ExpectBlobNear({0.17809375f, 0.17809375f, -0.03448605f, -0.03448605f}, h, 1e-6f);
}

TEST(LSTMLayerTest, ExposedHiddenStateIsTakenAndGiven) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), h0(std::vector<int>{1, 1, 1}),
      c0(std::vector<int>{1, 1, 1}), h, hT, cT;
  SetBlobData(&x, {0.5f, -1.5f});
  SetBlobData(&cont, {1, 1});
  // h_0, c_0: the state the carried-state test reached after its first forward.
  SetBlobData(&h0, {-0.03448604915f});
  SetBlobData(&c0, {-0.04027109219f});
  std::mt19937 rng(1);
  LSTMLayer layer(ParseLayerParameter("name: 'l' type: 'LSTM' recurrent_param { num_output: 1 expose_hidden: true }"));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont, &h0, &c0}, {&h, &hT, &cT}).ok());
  SetWeights(&layer);
  layer.Forward({&x, &cont, &h0, &c0}, {&h, &hT, &cT});
  ExpectBlobNear({0.16590401f, -0.04227439f}, h, 1e-6f);
  ExpectBlobNear({-0.04227439f}, hT, 1e-6f);
  ExpectBlobNear({-0.04942265f}, cT, 1e-6f);
  // Nothing is carried: the same inputs give the same outputs.
  layer.Forward({&x, &cont, &h0, &c0}, {&h, &hT, &cT});
  ExpectBlobNear({0.16590401f, -0.04227439f}, h, 1e-6f);
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

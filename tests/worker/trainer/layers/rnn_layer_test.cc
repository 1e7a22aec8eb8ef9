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

// Cont is 0 at every stream's first step without exposed state (the carried
// state then does not matter to the checker's repeated forwards).
void CheckGradient(bool with_static, bool exposed, uint32_t seed) {
  std::mt19937 rng(seed);
  const int T = 3, N = 2, H = 3;
  Blob x(std::vector<int>{T, N, 2, 2}), cont(std::vector<int>{T, N}), x_static(std::vector<int>{N, 3}),
      h0(std::vector<int>{1, N, H}), o, hT;
  FillGaussian(&x, &rng);
  FillGaussian(&x_static, &rng);
  FillGaussian(&h0, &rng);
  SetBlobData(&cont, exposed ? std::vector<float>{1, 0, 1, 1, 0, 1} : std::vector<float>{0, 0, 1, 1, 0, 1});
  std::vector<Blob*> bottom = {&x, &cont};
  if (with_static) bottom.push_back(&x_static);
  if (exposed) bottom.push_back(&h0);
  std::vector<Blob*> top = {&o};
  if (exposed) top.push_back(&hT);
  std::vector<int> checked = {0};
  if (with_static) checked.push_back(2);
  if (exposed) checked.push_back(static_cast<int>(bottom.size()) - 1);
  for (int b : checked) {
    SCOPED_TRACE(b);
    std::mt19937 weights(seed + 1);
    RNNLayer layer(ParseLayerParameter(
        std::string("name: 'r' type: 'RNN' recurrent_param { num_output: 3 ") +
        (exposed ? "expose_hidden: true " : "") +
        "weight_filler { type: 'uniform' min: -0.5 max: 0.5 } bias_filler { type: 'uniform' min: -0.5 max: 0.5 } }"));
    layer.set_rng(&weights);
    ExpectGradient(&layer, bottom, top, {GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, b});
  }
}

TEST(RNNLayerTest, Gradients) {
  CheckGradient(false, false, 30);
  CheckGradient(true, false, 31);
  CheckGradient(false, true, 32);
  CheckGradient(true, true, 33);
}

TEST(RNNLayerTest, ContHasNoGradient) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), o;
  std::mt19937 rng(1);
  RNNLayer layer(ParseLayerParameter(kRnnOneUnit));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont}, {&o}).ok());
  layer.Forward({&x, &cont}, {&o});
  EXPECT_FALSE(layer.AllowForceBackward(1));
  EXPECT_TRUE(layer.AllowForceBackward(0));
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";  // BLAS may have started threads
  EXPECT_DEATH(layer.Backward({&o}, {true, true}, {&x, &cont}),
               "layer r \\(RNN\\): cont \\(bottom 1\\) has no gradient");
}

TEST(RNNLayerTest, BadParametersAndShapesAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<std::vector<int>>& shapes, int tops) {
    std::mt19937 rng(1);
    RNNLayer layer(ParseLayerParameter("name: 'r' type: 'RNN' " + param));
    layer.set_rng(&rng);
    return SetUpOn(&layer, shapes, tops);
  };
  const std::string three = "recurrent_param { num_output: 3 }";
  EXPECT_TRUE(set_up(three, {{4, 2, 5}, {4, 2}}, 1).ok());
  EXPECT_TRUE(set_up(three, {{4, 2, 5}, {4, 2}, {2, 7}}, 1).ok());  // x_static
  ExpectErrorContains(set_up("", {{4, 2, 5}, {4, 2}}, 1), {"layer r (RNN)", "num_output must be given"});
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {5, 2}}, 1),
                      {"layer r (RNN)", "cont (bottom 1) must be [T, N] = [4, 2]"});
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 2}, {3, 7}}, 1), {"layer r (RNN)", "x_static (bottom 2)"});
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 2}}, 2), {"layer r (RNN)", "h_T is a top with expose_hidden"});
  ExpectErrorContains(
      set_up("recurrent_param { num_output: 3 expose_hidden: true }", {{4, 2, 5}, {4, 2}, {1, 2, 4}}, 2),
      {"layer r (RNN)", "h_0 must be [1, N, num_output] = [1, 2, 3]"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

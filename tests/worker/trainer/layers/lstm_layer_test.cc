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

// Cont is 0 at every stream's first step (the carried state then does not
// matter: the checker's repeated forwards see the same function), random
// after.
void CheckGradient(const std::string& extra_param, bool with_static, bool exposed, uint32_t seed) {
  std::mt19937 rng(seed);
  const int T = 3, N = 2, H = 3;
  Blob x(std::vector<int>{T, N, 2, 2}), cont(std::vector<int>{T, N}), x_static(std::vector<int>{N, 3}),
      h0(std::vector<int>{1, N, H}), c0(std::vector<int>{1, N, H}), h, hT, cT;
  FillGaussian(&x, &rng);
  FillGaussian(&x_static, &rng);
  FillGaussian(&h0, &rng);
  FillGaussian(&c0, &rng);
  SetBlobData(&cont, {0, 0, 1, 1, 0, 1});
  if (exposed) SetBlobData(&cont, {1, 0, 1, 1, 0, 1});  // h_0 and c_0 reach stream 0
  std::vector<Blob*> bottom = {&x, &cont};
  if (with_static) bottom.push_back(&x_static);
  if (exposed) {
    bottom.push_back(&h0);
    bottom.push_back(&c0);
  }
  std::vector<Blob*> top = {&h};
  if (exposed) {
    top.push_back(&hT);
    top.push_back(&cT);
  }
  std::vector<int> checked = {0};
  if (with_static) checked.push_back(2);
  if (exposed) {
    checked.push_back(static_cast<int>(bottom.size()) - 2);
    checked.push_back(static_cast<int>(bottom.size()) - 1);
  }
  for (int b : checked) {
    SCOPED_TRACE(b);
    std::mt19937 weights(seed + 1);
    LSTMLayer layer(ParseLayerParameter(
        "name: 'l' type: 'LSTM' recurrent_param { num_output: 3 weight_filler { type: 'uniform' min: -0.5 max: 0.5 } "
        "bias_filler { type: 'uniform' min: -0.5 max: 0.5 } " +
        extra_param + " }"));
    layer.set_rng(&weights);
    ExpectGradient(&layer, bottom, top, {GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, b});
  }
}

TEST(LSTMLayerTest, Gradients) {
  CheckGradient("", false, false, 20);
  CheckGradient("", true, false, 21);
  CheckGradient("expose_hidden: true", false, true, 22);
  CheckGradient("expose_hidden: true", true, true, 23);
}

TEST(LSTMLayerTest, ContHasNoGradient) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), h;
  std::mt19937 rng(1);
  LSTMLayer layer(ParseLayerParameter(kLstmOneUnit));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont}, {&h}).ok());
  layer.Forward({&x, &cont}, {&h});
  EXPECT_FALSE(layer.AllowForceBackward(1));
  EXPECT_TRUE(layer.AllowForceBackward(0));
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";  // BLAS may have started threads
  EXPECT_DEATH(layer.Backward({&h}, {true, true}, {&x, &cont}),
               "layer l \\(LSTM\\): cont \\(bottom 1\\) has no gradient");
}

TEST(LSTMLayerTest, BadParametersAndShapesAreErrors) {
  auto set_up = [](const std::string& param, const std::vector<std::vector<int>>& shapes, int tops) {
    std::mt19937 rng(1);
    LSTMLayer layer(ParseLayerParameter("name: 'l' type: 'LSTM' " + param));
    layer.set_rng(&rng);
    return SetUpOn(&layer, shapes, tops);
  };
  const std::string three = "recurrent_param { num_output: 3 }";
  EXPECT_TRUE(set_up(three, {{4, 2, 5}, {4, 2}}, 1).ok());
  EXPECT_TRUE(set_up(three, {{4, 2, 5}, {4, 2}, {2, 7}}, 1).ok());  // x_static
  ExpectErrorContains(set_up("", {{4, 2, 5}, {4, 2}}, 1), {"layer l (LSTM)", "num_output must be given"});
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 3}}, 1),
                      {"layer l (LSTM)", "cont (bottom 1) must be [T, N] = [4, 2]"});
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 2}, {3, 7}}, 1), {"layer l (LSTM)", "x_static (bottom 2)"});
  ExpectErrorContains(set_up(three, {{4, 2, 5}, {4, 2}}, 3),
                      {"layer l (LSTM)", "h_T and c_T are tops with expose_hidden"});
  ExpectErrorContains(
      set_up("recurrent_param { num_output: 3 expose_hidden: true }", {{4, 2, 5}, {4, 2}, {1, 2, 3}, {1, 2, 4}}, 3),
      {"layer l (LSTM)", "c_0 must be [1, N, num_output] = [1, 2, 3]"});
}

}  // namespace
}  // namespace test
}  // namespace nereus

// What the tests of the recurrent layers (LSTM, RNN: worker/trainer/layers/
// recurrent_layer.h) share: the carried state, the numeric gradient check
// over a short sequence, cont's lack of a gradient, and a set-up on given
// shapes.
#ifndef NEREUS_TESTS_SUPPORT_RECURRENT_LAYER_TEST_H_
#define NEREUS_TESTS_SUPPORT_RECURRENT_LAYER_TEST_H_

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/status_util.h"

namespace nereus {
namespace test {

// A recurrent layer of type L of one unit (`param_text`) on one stream,
// x = (0.5, -1.5) over two steps with cont (0, 1): set up, `prepare`
// checks its blobs and sets its weights; its outputs are `first`. The next
// forward (cont 1, 1) starts from the last step's state: `carried`. With two
// streams of the same sequence the state starts again at 0: `first`, each
// value twice.
template <typename L>
void ExpectCarriedState(const std::string& param_text, const std::function<void(L*)>& prepare,
                        const std::vector<float>& first, const std::vector<float>& carried) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), out;
  SetBlobData(&x, {0.5f, -1.5f});
  SetBlobData(&cont, {0, 1});
  std::mt19937 rng(1);
  L layer(ParseLayerParameter(param_text));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont}, {&out}).ok());
  ASSERT_NO_FATAL_FAILURE(prepare(&layer));
  layer.Forward({&x, &cont}, {&out});
  EXPECT_EQ((std::vector<int>{2, 1, 1}), out.shape());
  ExpectBlobNear(first, out, 1e-6f);
  SetBlobData(&cont, {1, 1});
  layer.Forward({&x, &cont}, {&out});
  ExpectBlobNear(carried, out, 1e-6f);
  x.Reshape({2, 2, 1});
  SetBlobData(&x, {0.5f, 0.5f, -1.5f, -1.5f});
  cont.Reshape({2, 2});
  SetBlobData(&cont, {1, 1, 1, 1});
  layer.Forward({&x, &cont}, {&out});
  ExpectBlobNear({first[0], first[0], first[1], first[1]}, out, 1e-6f);
}

// The same layer with expose_hidden (`param_text`, weights set by
// `set_weights`) on x = (0.5, -1.5) with cont (1, 1) from the initial
// states `initial` (one value each: h_0, then c_0): its outputs are
// `outputs`, its last states `last`. Nothing is carried: the same inputs
// give the same outputs again.
template <typename L>
void ExpectExposedState(const std::string& param_text, const std::function<void(L*)>& set_weights,
                        const std::vector<float>& initial, const std::vector<float>& outputs,
                        const std::vector<float>& last) {
  const size_t states = initial.size();
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), out;
  std::vector<Blob> first(states), final_states(states);
  SetBlobData(&x, {0.5f, -1.5f});
  SetBlobData(&cont, {1, 1});
  std::vector<Blob*> bottom = {&x, &cont}, top = {&out};
  for (size_t k = 0; k < states; ++k) {
    first[k].Reshape(std::vector<int>{1, 1, 1});
    SetBlobData(&first[k], {initial[k]});
    bottom.push_back(&first[k]);
    top.push_back(&final_states[k]);
  }
  std::mt19937 rng(1);
  L layer(ParseLayerParameter(param_text));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp(bottom, top).ok());
  ASSERT_NO_FATAL_FAILURE(set_weights(&layer));
  layer.Forward(bottom, top);
  ExpectBlobNear(outputs, out, 1e-6f);
  for (size_t k = 0; k < states; ++k) ExpectBlobNear({last[k]}, final_states[k], 1e-6f);
  layer.Forward(bottom, top);
  ExpectBlobNear(outputs, out, 1e-6f);
}

// The gradient of a recurrent layer of type L ("name: ... type: ..." in
// `name_and_type`; `states` states: LSTM's h and c, RNN's h) with 3 hidden
// units over T = 3 steps of N = 2 streams of 2 x 2 inputs. Cont is 0 at
// every stream's first step, so the carried state does not matter to the
// checker's repeated forwards (with `exposed`, stream 0 starts from the
// initial states, which are bottoms, and the last states are tops); with
// `with_static`, a static input [N, 3]. The inputs are drawn from an engine
// seeded `seed` (x, x_static, then each initial state), the weights from one
// seeded seed + 1; x, x_static and the initial states are checked one at a
// time.
template <typename L>
void CheckRecurrentGradient(const std::string& name_and_type, int states, bool with_static, bool exposed,
                            uint32_t seed) {
  std::mt19937 rng(seed);
  const int T = 3, N = 2, H = 3;
  Blob x(std::vector<int>{T, N, 2, 2}), cont(std::vector<int>{T, N}), x_static(std::vector<int>{N, 3}), out;
  std::vector<Blob> initial(states), last(states);
  FillGaussian(&x, &rng);
  FillGaussian(&x_static, &rng);
  for (Blob& s : initial) {
    s.Reshape(std::vector<int>{1, N, H});
    FillGaussian(&s, &rng);
  }
  SetBlobData(&cont, exposed ? std::vector<float>{1, 0, 1, 1, 0, 1} : std::vector<float>{0, 0, 1, 1, 0, 1});
  std::vector<Blob*> bottom = {&x, &cont};
  if (with_static) bottom.push_back(&x_static);
  std::vector<Blob*> top = {&out};
  std::vector<int> checked = {0};
  if (with_static) checked.push_back(2);
  if (exposed) {
    for (int k = 0; k < states; ++k) {
      bottom.push_back(&initial[k]);
      top.push_back(&last[k]);
      checked.push_back(static_cast<int>(bottom.size()) - 1);
    }
  }
  for (int b : checked) {
    SCOPED_TRACE(b);
    std::mt19937 weights(seed + 1);
    L layer(ParseLayerParameter(name_and_type + " recurrent_param { num_output: 3 " +
                                (exposed ? "expose_hidden: true " : "") +
                                "weight_filler { type: 'uniform' min: -0.5 max: 0.5 } bias_filler { type: 'uniform' "
                                "min: -0.5 max: 0.5 } }"));
    layer.set_rng(&weights);
    ExpectGradient(&layer, bottom, top, {GradientCheck::kExhaustive, 1e-2f, 1e-3f, 0.0f, -1.0f, b});
  }
}

// A recurrent layer of type L of one unit (`param_text`) set up on a
// sequence of 2 steps: cont (bottom 1) has no gradient, and asking for one
// dies with a message matching `death_regex`.
template <typename L>
void ExpectContHasNoGradient(const std::string& param_text, const std::string& death_regex) {
  Blob x(std::vector<int>{2, 1, 1}), cont(std::vector<int>{2, 1}), out;
  std::mt19937 rng(1);
  L layer(ParseLayerParameter(param_text));
  layer.set_rng(&rng);
  ASSERT_TRUE(layer.SetUp({&x, &cont}, {&out}).ok());
  layer.Forward({&x, &cont}, {&out});
  EXPECT_FALSE(layer.AllowForceBackward(1));
  EXPECT_TRUE(layer.AllowForceBackward(0));
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";  // BLAS may have started threads
  EXPECT_DEATH(layer.Backward({&out}, {true, true}, {&x, &cont}), death_regex);
}

// CheckRecurrentGradient without and with a static input, then the same
// with exposed states, the inputs drawn from `first_seed`, + 1, + 2, + 3.
template <typename L>
void CheckRecurrentGradients(const std::string& name_and_type, int states, uint32_t first_seed) {
  CheckRecurrentGradient<L>(name_and_type, states, false, false, first_seed);
  CheckRecurrentGradient<L>(name_and_type, states, true, false, first_seed + 1);
  CheckRecurrentGradient<L>(name_and_type, states, false, true, first_seed + 2);
  CheckRecurrentGradient<L>(name_and_type, states, true, true, first_seed + 3);
}

// The status of setting up a layer of type L (`name_and_type` + `param`) on
// bottoms of `shapes` with `tops` tops.
template <typename L>
Status SetUpRecurrent(const std::string& name_and_type, const std::string& param,
                      const std::vector<std::vector<int>>& shapes, int tops) {
  std::mt19937 rng(1);
  L layer(ParseLayerParameter(name_and_type + " " + param));
  layer.set_rng(&rng);
  return SetUpOn(&layer, shapes, tops);
}

// The set-up checks every recurrent layer of type L makes (`who` names it in
// errors: "layer l (LSTM)"): num_output given, cont [T, N] (`bad_cont` is
// not), x_static [N, ...]; without them it sets up, with or without
// x_static.
template <typename L>
void ExpectRecurrentSetUpChecks(const std::string& name_and_type, const std::string& who,
                                const std::vector<int>& bad_cont) {
  const std::string three = "recurrent_param { num_output: 3 }";
  EXPECT_TRUE(SetUpRecurrent<L>(name_and_type, three, {{4, 2, 5}, {4, 2}}, 1).ok());
  EXPECT_TRUE(SetUpRecurrent<L>(name_and_type, three, {{4, 2, 5}, {4, 2}, {2, 7}}, 1).ok());  // x_static
  ExpectErrorContains(SetUpRecurrent<L>(name_and_type, "", {{4, 2, 5}, {4, 2}}, 1), {who, "num_output must be given"});
  ExpectErrorContains(SetUpRecurrent<L>(name_and_type, three, {{4, 2, 5}, bad_cont}, 1),
                      {who, "cont (bottom 1) must be [T, N] = [4, 2]"});
  ExpectErrorContains(SetUpRecurrent<L>(name_and_type, three, {{4, 2, 5}, {4, 2}, {3, 7}}, 1),
                      {who, "x_static (bottom 2)"});
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_RECURRENT_LAYER_TEST_H_

// StagedFactors (worker/bridge/staged_factors.h) on a CPU net: the
// factors of an InnerProduct layer as the bridge registers them, every
// worker's factors stacked in rank order and the update rebuilt into the
// layer's weights with the client's own arithmetic (the same bits as
// common/update/sfb.h's ApplySufficientFactors), and the errors: a net reshaped
// after Init, factors missing or too many, a solver type SFB does not apply.
// The device half (cuBLAS, the compute stream) runs in cuda_staging_test.
#include "worker/bridge/staged_factors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "common/update/sfb.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/gradient_checker.h"
#include "worker/trainer/layers/inner_product_layer.h"

namespace nereus {
namespace {

using test::BytesEqual;

constexpr int kTensor = 7;  // The client's id of the weight, as Choose is told.

// An InnerProduct layer (3 outputs, 5 inputs, batch 4) after one backward.
struct IpLayer {
  IpLayer()
      : bottom({4, 5}),
        layer(test::ParseLayerParameter("name: 'ip' type: 'InnerProduct' "
                                        "inner_product_param { num_output: 3 }")) {
    layer.set_rng(&rng);
    EXPECT_TRUE(layer.SetUp({&bottom}, {&top}).ok());
    std::normal_distribution<float> normal;
    for (int i = 0; i < bottom.count(); ++i) bottom.mutable_cpu_data()[i] = normal(rng);
    layer.Forward({&bottom}, {&top});
    for (int i = 0; i < top.count(); ++i) top.mutable_cpu_diff()[i] = normal(rng);
    layer.Backward({&top}, {false}, {&bottom});
    EXPECT_TRUE(layer.WeightGradientFactors(0, {&bottom}, {&top}, &factors));
  }
  Blob* weights() { return layer.blobs()[0].get(); }

  std::mt19937 rng{5};
  Blob bottom, top;
  InnerProductLayer layer;
  Layer::GradientFactors factors;
};

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(StagedFactorsTest, RebuildsEveryWorkersFactorsIntoTheWeightsWithTheClientsBits) {
  IpLayer ip;
  const pb::SgdConfig sgd = test::FixedMomentumSgd();
  StagedFactors staged(nullptr, sgd, /*workers=*/2);
  staged.Add(0, "ip/0", ip.factors, ip.weights(), /*lr_mult=*/2.0f, /*decay_mult=*/0.0f);
  ASSERT_TRUE(staged.Has(0));
  EXPECT_EQ(staged.rebuild_on(), "the CPU, behind a host staging");
  EXPECT_EQ(staged.rebuild_gflops(), 0);  // The client times its CPU instead.
  ASSERT_TRUE(staged.MeasureRates().ok());
  ASSERT_TRUE(staged.Choose({kTensor}, {kTensor}).ok());
  EXPECT_TRUE(staged.chosen(0));
  EXPECT_FALSE(staged.chosen(1));

  // The staging's copies: the layer's top diff and bottom data into the mirrors.
  auto copies = staged.FactorCopies(0, ip.factors);
  ASSERT_TRUE(copies.ok()) << copies.status();
  ASSERT_EQ(copies->size(), 2u);
  EXPECT_EQ((*copies)[0].src, ip.top.cpu_diff());
  EXPECT_EQ((*copies)[0].dst, staged.left(0));
  EXPECT_EQ((*copies)[0].bytes, 4 * 3 * sizeof(float));
  EXPECT_EQ((*copies)[1].src, ip.bottom.cpu_data());
  EXPECT_EQ((*copies)[1].dst, staged.right(0));
  EXPECT_EQ((*copies)[1].bytes, 4 * 5 * sizeof(float));

  // Two clocks of two workers' factors, K = 4 each.
  std::vector<float> expected(ip.weights()->cpu_data(), ip.weights()->cpu_data() + 15), history(15, 0.0f);
  FactorScratch scratch;
  for (int64_t clock = 0; clock < 2; ++clock) {
    const std::vector<float> l0 = Random(12, 10 + clock), r0 = Random(20, 20 + clock);
    const std::vector<float> l1 = Random(12, 30 + clock), r1 = Random(20, 40 + clock);
    ASSERT_TRUE(staged.ApplyFactors(kTensor, clock, {{4, l0.data(), r0.data()}, {4, l1.data(), r1.data()}}).ok());
    ASSERT_TRUE(staged.Rebuild(0, clock + 1).ok());
    ASSERT_TRUE(staged.Rebuild(0, clock + 1).ok());  // Once per clock: the second call does nothing.
    EXPECT_EQ(staged.rebuilds(), clock + 1);
    // What the client's own SFB path computes from the same factors.
    auto own = [](const std::vector<float>& v) {
      auto copy = std::make_shared<std::vector<float>>(v);
      return Buffer::Of(copy);
    };
    Factors f0{4, own(l0), own(r0)}, f1{4, own(l1), own(r1)};
    ApplySufficientFactors(sgd, clock, 2.0f, 0.0f, {&f0, &f1}, {3, 5}, expected.data(), history.data(), &scratch);
    ASSERT_TRUE(BytesEqual(std::vector<float>(ip.weights()->cpu_data(), ip.weights()->cpu_data() + 15), expected,
                           "weights after clock " + std::to_string(clock)));
  }
}

TEST(StagedFactorsTest, ErrorsNameTheTensorAndWhatIsWrong) {
  IpLayer ip;
  StagedFactors staged(nullptr, test::FixedMomentumSgd(), /*workers=*/2);
  staged.Add(0, "ip/0", ip.factors, ip.weights(), 1.0f, 1.0f);
  EXPECT_EQ(staged.Choose({3}, {kTensor}).message(),
            "the client sends tensor 3 as sufficient factors, but it was registered without them here");
  ASSERT_TRUE(staged.Choose({kTensor}, {kTensor}).ok());

  // The weights of clock 1 before every worker's factors of clock 0.
  EXPECT_EQ(staged.Rebuild(0, 1).message(),
            "the weights of ip/0 for clock 1 need every worker's factors of clock 0, but the last received are of "
            "clock -1");
  // More rows than 2 workers of K = 4.
  const std::vector<float> l(5 * 3), r(5 * 5);
  EXPECT_EQ(staged.ApplyFactors(kTensor, 0, {{5, l.data(), r.data()}, {4, l.data(), r.data()}}).message(),
            "factors of ip/0 for clock 0 have K = 9 in all, more than 2 workers x this worker's K = 4");
  EXPECT_EQ(staged.ApplyFactors(2, 0, {{4, l.data(), r.data()}}).message(),
            "factors of tensor 2, which does not travel as factors here");

  // The net reshaped to a batch of 3 after Init: the factors are no longer
  // those registered.
  ip.bottom.Reshape({3, 5});
  ip.layer.Reshape({&ip.bottom}, {&ip.top});
  Layer::GradientFactors now;
  ASSERT_TRUE(ip.layer.WeightGradientFactors(0, {&ip.bottom}, {&ip.top}, &now));
  EXPECT_EQ(staged.FactorCopies(0, now).status().message(),
            "the sufficient factors of ip/0 moved or changed shape after Init (was the net reshaped?): K 3, "
            "registered with K 4");

  // SFB applies Caffe's SGD only (as the client's own path).
  pb::SgdConfig adam = test::FixedMomentumSgd();
  adam.set_type(pb::SOLVER_ADAM);
  StagedFactors with_adam(nullptr, adam, 1);
  with_adam.Add(0, "ip/0", ip.factors, ip.weights(), 1.0f, 1.0f);
  EXPECT_EQ(with_adam.Choose({kTensor}, {kTensor}).message(),
            "sufficient factors behind a device staging support solver type SGD only, got SOLVER_ADAM");
}

}  // namespace
}  // namespace nereus

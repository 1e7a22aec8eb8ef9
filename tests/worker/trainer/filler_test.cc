#include "worker/trainer/filler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace nereus {
namespace {

struct Moments {
  double mean = 0, var = 0, min = 1e30, max = -1e30;
};

Moments Measure(const Blob& b) {
  Moments m;
  const float* d = b.cpu_data();
  for (int i = 0; i < b.count(); ++i) {
    m.mean += d[i];
    m.min = std::min<double>(m.min, d[i]);
    m.max = std::max<double>(m.max, d[i]);
  }
  m.mean /= b.count();
  for (int i = 0; i < b.count(); ++i) m.var += (d[i] - m.mean) * (d[i] - m.mean);
  m.var /= b.count();
  return m;
}

TEST(FillerTest, ConstantIsExact) {
  caffe::FillerParameter p;
  p.set_type("constant");
  p.set_value(0.25f);
  Blob b({3, 4});
  ASSERT_TRUE(FillBlob(p, &b, nullptr).ok());
  for (int i = 0; i < b.count(); ++i) EXPECT_EQ(b.cpu_data()[i], 0.25f);
  // The default filler is constant 0.
  caffe::FillerParameter def;
  b.mutable_cpu_data()[0] = 5.0f;
  ASSERT_TRUE(FillBlob(def, &b, nullptr).ok());
  EXPECT_EQ(b.cpu_data()[0], 0.0f);
}

TEST(FillerTest, UniformWithinBounds) {
  caffe::FillerParameter p;
  p.set_type("uniform");
  p.set_min(-2.0f);
  p.set_max(3.0f);
  Blob b({100, 100});
  std::mt19937 rng(1);
  ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
  Moments m = Measure(b);
  EXPECT_GE(m.min, -2.0);
  EXPECT_LE(m.max, 3.0);
  EXPECT_NEAR(m.mean, 0.5, 0.05);
  EXPECT_NEAR(m.var, 25.0 / 12.0, 0.1);
}

TEST(FillerTest, GaussianMoments) {
  caffe::FillerParameter p;
  p.set_type("gaussian");
  p.set_mean(1.0f);
  p.set_std(0.5f);
  Blob b({200, 100});
  std::mt19937 rng(2);
  ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
  Moments m = Measure(b);
  EXPECT_NEAR(m.mean, 1.0, 0.01);
  EXPECT_NEAR(std::sqrt(m.var), 0.5, 0.01);
}

TEST(FillerTest, XavierBoundsAndVariance) {
  // Weight [num_output=50, channels=20, 5, 5]: fan_in = 500, fan_out = 1250.
  Blob b(std::vector<int>{50, 20, 5, 5});
  EXPECT_EQ(FillerFanIn(b), 500);
  EXPECT_EQ(FillerFanOut(b), 1250);
  std::mt19937 rng(3);
  const struct {
    caffe::FillerParameter::VarianceNorm norm;
    double n;
  } cases[] = {{caffe::FillerParameter::FAN_IN, 500},
               {caffe::FillerParameter::FAN_OUT, 1250},
               {caffe::FillerParameter::AVERAGE, 875}};
  for (const auto& c : cases) {
    caffe::FillerParameter p;
    p.set_type("xavier");
    p.set_variance_norm(c.norm);
    ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
    Moments m = Measure(b);
    const double bound = std::sqrt(3.0 / c.n);
    EXPECT_GE(m.min, -bound);
    EXPECT_LE(m.max, bound);
    EXPECT_GT(m.max, 0.95 * bound);  // Really uses the whole range.
    EXPECT_NEAR(m.var, 1.0 / c.n, 0.1 / c.n);
  }
}

TEST(FillerTest, MsraStd) {
  Blob b(std::vector<int>{64, 32, 3, 3});  // fan_in = 288
  caffe::FillerParameter p;
  p.set_type("msra");
  std::mt19937 rng(4);
  ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
  Moments m = Measure(b);
  EXPECT_NEAR(m.mean, 0.0, 0.005);
  EXPECT_NEAR(std::sqrt(m.var), std::sqrt(2.0 / 288), 0.02 * std::sqrt(2.0 / 288));
}

TEST(FillerTest, SameSeedSameValues) {
  caffe::FillerParameter p;
  p.set_type("gaussian");
  Blob a({10}), b({10});
  std::mt19937 r1(7), r2(7);
  ASSERT_TRUE(FillBlob(p, &a, &r1).ok());
  ASSERT_TRUE(FillBlob(p, &b, &r2).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.cpu_data()[i], b.cpu_data()[i]);
}

TEST(FillerTest, MsraVarianceNorms) {
  Blob b(std::vector<int>{64, 32, 3, 3});  // fan_in = 288, fan_out = 576.
  std::mt19937 rng(5);
  for (const auto& [norm, n] : std::vector<std::pair<caffe::FillerParameter::VarianceNorm, double>>{
           {caffe::FillerParameter::FAN_OUT, 576}, {caffe::FillerParameter::AVERAGE, 432}}) {
    caffe::FillerParameter p;
    p.set_type("msra");
    p.set_variance_norm(norm);
    ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
    EXPECT_NEAR(std::sqrt(Measure(b).var), std::sqrt(2.0 / n), 0.02 * std::sqrt(2.0 / n)) << n;
  }
}

// Caffe's sparse Gaussian (mnist_autoencoder's "gaussian std: 1 sparse: 15"
// on InnerProduct weights): every value drawn from N(mean, std), then every
// Bernoulli(sparse / shape(0)) draw, value times draw; bitwise those draws.
TEST(FillerTest, SparseGaussianKeepsEachValueWithProbabilitySparseOverOutputs) {
  caffe::FillerParameter p;
  p.set_type("gaussian");
  p.set_std(1.0f);
  p.set_sparse(15);
  Blob b({1000, 100});  // An InnerProduct weight, num_output 1000: p = 0.015.
  std::mt19937 rng(6);
  ASSERT_TRUE(FillBlob(p, &b, &rng).ok());

  std::mt19937 replay(6);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> values(100000);
  for (float& v : values) v = gauss(replay);
  std::bernoulli_distribution keep(15.0f / 1000.0f);
  int kept = 0;
  for (int i = 0; i < b.count(); ++i) {
    const bool k = keep(replay);
    kept += k;
    // value * mask, as Caffe: a dropped negative value is -0.0.
    const float want = values[i] * static_cast<float>(k);
    ASSERT_EQ(std::memcmp(&b.cpu_data()[i], &want, sizeof(float)), 0) << i;
  }
  // 1500 expected, standard deviation 38.
  EXPECT_GT(kept, 1300);
  EXPECT_LT(kept, 1700);

  // sparse 0 zeroes everything; sparse = shape(0) keeps everything.
  p.set_sparse(0);
  ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
  EXPECT_EQ(b.asum_data(), 0.0f);
  Blob small({4, 3});
  p.set_sparse(4);
  ASSERT_TRUE(FillBlob(p, &small, &rng).ok());
  for (int i = 0; i < small.count(); ++i) EXPECT_NE(small.cpu_data()[i], 0.0f) << i;
}

TEST(FillerTest, PositiveUnitballRowsSumToOne) {
  caffe::FillerParameter p;
  p.set_type("positive_unitball");
  Blob b({5, 2, 3});
  std::mt19937 rng(7);
  ASSERT_TRUE(FillBlob(p, &b, &rng).ok());
  std::mt19937 replay(7);
  std::uniform_real_distribution<float> uniform(0.0f, std::nextafter(1.0f, 2.0f));
  std::vector<float> u(30);
  for (float& v : u) v = uniform(replay);
  for (int row = 0; row < 5; ++row) {
    float sum = 0;
    for (int j = 0; j < 6; ++j) sum += u[row * 6 + j];
    double total = 0;
    for (int j = 0; j < 6; ++j) {
      const float want = u[row * 6 + j] / sum;
      EXPECT_EQ(b.cpu_data()[row * 6 + j], want) << row << " " << j;
      EXPECT_GE(want, 0.0f);
      total += want;
    }
    EXPECT_NEAR(total, 1.0, 1e-6) << row;
  }
}

// Caffe's bilinear kernels: K = 4 (f = 2, c = 0.75) and K = 3 (f = 2, c = 0.5),
// the same K x K kernel in every (output, input) slice.
TEST(FillerTest, BilinearKernelsAreCaffes) {
  caffe::FillerParameter p;
  p.set_type("bilinear");
  Blob four(std::vector<int>{2, 1, 4, 4});
  ASSERT_TRUE(FillBlob(p, &four, nullptr).ok());
  const float w4[4] = {0.25f, 0.75f, 0.75f, 0.25f};
  for (int i = 0; i < four.count(); ++i) EXPECT_EQ(four.cpu_data()[i], w4[(i / 4) % 4] * w4[i % 4]) << i;
  Blob three(std::vector<int>{1, 1, 3, 3});
  ASSERT_TRUE(FillBlob(p, &three, nullptr).ok());
  EXPECT_EQ(std::vector<float>(three.cpu_data(), three.cpu_data() + 9),
            (std::vector<float>{0.25f, 0.5f, 0.25f, 0.5f, 1.0f, 0.5f, 0.25f, 0.5f, 0.25f}));
}

// Where Caffe dies on a CHECK, Nereus returns the error, naming the filler.
TEST(FillerTest, WhatCaffeRefusesIsAnErrorNamingTheFiller) {
  auto error = [](const std::string& type, int sparse, std::vector<int> shape) {
    caffe::FillerParameter p;
    p.set_type(type);
    p.set_sparse(sparse);
    Blob b(shape);
    std::mt19937 rng(1);
    return FillBlob(p, &b, &rng).message();
  };
  EXPECT_EQ(error("foo", -1, {2}),
            "unknown filler type \"foo\" (Caffe's: constant, uniform, gaussian, positive_unitball, xavier, msra, "
            "bilinear)");
  EXPECT_EQ(error("uniform", 3, {2}),
            "filler \"uniform\": sparse = 3 is only for the gaussian filler (Caffe: sparsity not supported by this "
            "filler)");
  EXPECT_EQ(error("gaussian", -2, {2}), "gaussian filler: sparse must be -1 (dense) or >= 0, got -2");
  EXPECT_EQ(error("gaussian", 5, {4, 3}),
            "filler \"gaussian\" on a blob of shape 4 3 (12): sparse 5 exceeds the 4 outputs of the blob's first "
            "axis (sparse / outputs is a probability)");
  EXPECT_EQ(error("bilinear", -1, {1, 1, 3, 4}),
            "filler \"bilinear\" on a blob of shape 1 1 3 4 (12): the filter must be square");
  EXPECT_EQ(error("bilinear", -1, {3, 3}), "filler \"bilinear\" on a blob of shape 3 3 (9): the blob must have 4 axes");
  EXPECT_EQ(error("xavier", -1, {0, 3}), "filler \"xavier\" on a blob of shape 0 3 (0): the blob is empty");
}

}  // namespace
}  // namespace nereus

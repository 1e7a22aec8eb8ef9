#include "worker/trainer/filler.h"

#include <gtest/gtest.h>

#include <cmath>

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

TEST(FillerTest, UnknownTypeAndSparseAreErrors) {
  caffe::FillerParameter p;
  p.set_type("bilinear");
  auto f = CreateFiller(p);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("unknown filler type \"bilinear\""), std::string::npos);
  caffe::FillerParameter s;
  s.set_type("gaussian");
  s.set_sparse(3);
  EXPECT_FALSE(CreateFiller(s).ok());
}

}  // namespace
}  // namespace nereus

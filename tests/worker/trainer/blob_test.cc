#include "worker/trainer/blob.h"

#include <gtest/gtest.h>

namespace nereus {
namespace {

TEST(BlobTest, ReshapeCountAndAxes) {
  Blob b(std::vector<int>{2, 3, 4, 5});
  EXPECT_EQ(b.num_axes(), 4);
  EXPECT_EQ(b.count(), 120);
  EXPECT_EQ(b.count(1), 60);
  EXPECT_EQ(b.count(1, 3), 12);
  EXPECT_EQ(b.shape(-1), 5);
  EXPECT_EQ(b.CanonicalAxisIndex(-4), 0);
  EXPECT_EQ(b.num(), 2);
  EXPECT_EQ(b.channels(), 3);
  EXPECT_EQ(b.height(), 4);
  EXPECT_EQ(b.width(), 5);
  EXPECT_EQ(b.offset(1, 2, 3, 4), 119);
  EXPECT_EQ(b.offset(std::vector<int>{1, 0, 1}), 65);
  EXPECT_EQ(b.shape_string(), "2 3 4 5 (120)");

  b.Reshape({7});
  EXPECT_EQ(b.count(), 7);
  EXPECT_EQ(b.num(), 7);
  EXPECT_EQ(b.channels(), 1);  // Legacy accessors read missing axes as 1.

  Blob scalar(std::vector<int>{});
  EXPECT_EQ(scalar.count(), 1);
  EXPECT_EQ(scalar.num_axes(), 0);
}

TEST(BlobTest, ReshapeKeepsMemoryWhenShrinking) {
  Blob b({4, 4});
  float* p = b.mutable_cpu_data();
  p[0] = 3.0f;
  b.Reshape({2, 2});
  EXPECT_EQ(b.mutable_cpu_data(), p);
  EXPECT_EQ(b.cpu_data()[0], 3.0f);
  b.Reshape({10, 10});
  EXPECT_EQ(b.count(), 100);
}

TEST(BlobTest, NewMemoryIsZero) {
  Blob b({3, 5});
  for (int i = 0; i < b.count(); ++i) {
    EXPECT_EQ(b.cpu_data()[i], 0.0f);
    EXPECT_EQ(b.cpu_diff()[i], 0.0f);
  }
}

TEST(BlobTest, ProtoRoundTrip) {
  Blob a({2, 3});
  for (int i = 0; i < 6; ++i) {
    a.mutable_cpu_data()[i] = 0.5f * i - 1.0f;
    a.mutable_cpu_diff()[i] = -0.25f * i;
  }
  caffe::BlobProto proto;
  a.ToProto(&proto, /*write_diff=*/true);
  ASSERT_EQ(proto.shape().dim_size(), 2);
  EXPECT_EQ(proto.shape().dim(1), 3);
  EXPECT_EQ(proto.data_size(), 6);

  Blob b;
  ASSERT_TRUE(b.FromProto(proto).ok());
  EXPECT_EQ(b.shape(), a.shape());
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(b.cpu_data()[i], a.cpu_data()[i]);
    EXPECT_EQ(b.cpu_diff()[i], a.cpu_diff()[i]);
  }

  caffe::BlobProto no_diff;
  a.ToProto(&no_diff);
  EXPECT_EQ(no_diff.diff_size(), 0);
}

TEST(BlobTest, FromProtoLegacyShapeAndErrors) {
  caffe::BlobProto legacy;
  legacy.set_num(1);
  legacy.set_channels(2);
  legacy.set_height(1);
  legacy.set_width(2);
  for (int i = 0; i < 4; ++i) legacy.add_data(static_cast<float>(i));
  Blob b;
  ASSERT_TRUE(b.FromProto(legacy).ok());
  EXPECT_EQ(b.shape(), (std::vector<int>{1, 2, 1, 2}));
  EXPECT_EQ(b.cpu_data()[3], 3.0f);

  // Wrong number of values.
  legacy.add_data(9.0f);
  Status st = b.FromProto(legacy);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("holds 5 values"), std::string::npos) << st;

  // Shape mismatch without reshape.
  Blob c({3, 3});
  caffe::BlobProto other;
  other.mutable_shape()->add_dim(9);
  for (int i = 0; i < 9; ++i) other.add_data(1.0f);
  st = c.FromProto(other, /*reshape=*/false);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("shape mismatch"), std::string::npos) << st;
}

TEST(BlobTest, UpdateAndReductions) {
  Blob b({4});
  float* d = b.mutable_cpu_data();
  float* g = b.mutable_cpu_diff();
  for (int i = 0; i < 4; ++i) {
    d[i] = static_cast<float>(i + 1);  // 1 2 3 4
    g[i] = (i % 2 == 0) ? 0.5f : -1.0f;
  }
  EXPECT_FLOAT_EQ(b.asum_data(), 10.0f);
  EXPECT_FLOAT_EQ(b.sumsq_data(), 30.0f);
  EXPECT_FLOAT_EQ(b.asum_diff(), 3.0f);
  EXPECT_FLOAT_EQ(b.sumsq_diff(), 2.5f);
  b.Update();  // data -= diff
  EXPECT_EQ(b.cpu_data()[0], 0.5f);
  EXPECT_EQ(b.cpu_data()[1], 3.0f);
  b.scale_diff(2.0f);
  EXPECT_EQ(b.cpu_diff()[1], -2.0f);
  b.scale_data(0.5f);
  EXPECT_EQ(b.cpu_data()[1], 1.5f);
}

TEST(BlobTest, ShareDataAndDiff) {
  Blob a({3}), b({3});
  b.ShareData(a);
  a.mutable_cpu_data()[1] = 7.0f;
  EXPECT_EQ(b.cpu_data()[1], 7.0f);
  EXPECT_NE(b.cpu_diff(), a.cpu_diff());
  b.ShareDiff(a);
  EXPECT_EQ(b.cpu_diff(), a.cpu_diff());
}

TEST(BlobTest, CopyFrom) {
  Blob a({2, 2}), b;
  a.mutable_cpu_data()[3] = 4.0f;
  b.CopyFrom(a, false, /*reshape=*/true);
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(b.cpu_data()[3], 4.0f);
}

#ifndef NEREUS_HAVE_CUDA
TEST(BlobDeathTest, GpuAccessorsFailLoudlyWithoutCuda) {
  Blob b({2});
  EXPECT_DEATH(b.gpu_data(), "built without CUDA");
  EXPECT_DEATH(b.mutable_gpu_diff(), "built without CUDA");
}
#endif

}  // namespace
}  // namespace nereus

#include "worker/trainer/data/data_transformer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace nereus {
namespace data {
namespace {

// channels x 4 x 5 image; pixel (c, h, w) = 100*c + 10*h + w.
caffe::Datum MakePatternDatum(int channels) {
  caffe::Datum datum;
  datum.set_channels(channels);
  datum.set_height(4);
  datum.set_width(5);
  std::string bytes;
  for (int c = 0; c < channels; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 5; ++w) bytes.push_back(static_cast<char>(100 * c + 10 * h + w));
  datum.set_data(bytes);
  datum.set_label(3);
  return datum;
}

float Pixel(int c, int h, int w) { return static_cast<float>(100 * c + 10 * h + w); }

std::unique_ptr<DataTransformer> Make(const caffe::TransformationParameter& param, caffe::Phase phase) {
  auto t = DataTransformer::Create(param, phase);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

TEST(DataTransformerTest, ScaleIsExact) {
  caffe::TransformationParameter param;
  param.set_scale(0.00390625f);  // 1/256, LeNet's scale.
  auto t = Make(param, caffe::TRAIN);
  const caffe::Datum datum = MakePatternDatum(2);
  std::vector<float> out(2 * 4 * 5, -1.0f);
  ASSERT_TRUE(t->Transform(datum, out.data(), nullptr).ok());
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 4; ++h)
      for (int w = 0; w < 5; ++w) EXPECT_EQ(out[(c * 4 + h) * 5 + w], Pixel(c, h, w) * 0.00390625f);
  auto shape = t->InferShape(datum);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, (std::vector<int>{1, 2, 4, 5}));
}

TEST(DataTransformerTest, MeanValueOnePerChannelAndBroadcast) {
  const caffe::Datum datum = MakePatternDatum(2);
  caffe::TransformationParameter per_channel;
  per_channel.add_mean_value(7.0f);
  per_channel.add_mean_value(100.5f);
  per_channel.set_scale(2.0f);
  auto t = Make(per_channel, caffe::TEST);
  std::vector<float> out(40);
  ASSERT_TRUE(t->Transform(datum, out.data(), nullptr).ok());
  EXPECT_EQ(out[0], (0.0f - 7.0f) * 2.0f);
  EXPECT_EQ(out[(0 * 4 + 3) * 5 + 4], (34.0f - 7.0f) * 2.0f);
  EXPECT_EQ(out[(1 * 4 + 2) * 5 + 1], (121.0f - 100.5f) * 2.0f);

  caffe::TransformationParameter one;
  one.add_mean_value(10.0f);
  auto t1 = Make(one, caffe::TEST);
  ASSERT_TRUE(t1->Transform(datum, out.data(), nullptr).ok());
  EXPECT_EQ(out[(1 * 4 + 1) * 5 + 2], 112.0f - 10.0f);
  EXPECT_EQ(out[0], -10.0f);

  caffe::TransformationParameter three;
  for (int i = 0; i < 3; ++i) three.add_mean_value(1.0f);
  auto t3 = Make(three, caffe::TEST);
  Status s = t3->Transform(datum, out.data(), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("3 mean_value entries"), std::string::npos) << s;
}

TEST(DataTransformerTest, MeanFileIsSubtractedPerPosition) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "nereus_transformer_test_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  caffe::BlobProto mean;
  mean.set_num(1);
  mean.set_channels(1);
  mean.set_height(4);
  mean.set_width(5);
  for (int i = 0; i < 20; ++i) mean.add_data(0.5f * i);
  {
    std::ofstream out(dir + "/mean.binaryproto", std::ios::binary);
    mean.SerializeToOstream(&out);
  }
  caffe::TransformationParameter param;
  param.set_mean_file(dir + "/mean.binaryproto");
  param.set_scale(0.5f);
  param.set_crop_size(2);
  auto t = Make(param, caffe::TEST);
  ASSERT_NE(t, nullptr);
  std::vector<float> out(4);
  ASSERT_TRUE(t->Transform(MakePatternDatum(1), out.data(), nullptr).ok());
  // Centre crop of 4x5 at 2: rows 1..2, columns 1..2; the mean is taken at the
  // same (uncropped) positions.
  EXPECT_EQ(out[0], (Pixel(0, 1, 1) - 0.5f * 6) * 0.5f);
  EXPECT_EQ(out[1], (Pixel(0, 1, 2) - 0.5f * 7) * 0.5f);
  EXPECT_EQ(out[2], (Pixel(0, 2, 1) - 0.5f * 11) * 0.5f);
  EXPECT_EQ(out[3], (Pixel(0, 2, 2) - 0.5f * 12) * 0.5f);

  // Wrong size for a 2-channel datum.
  Status s = t->Transform(MakePatternDatum(2), out.data(), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mean.binaryproto"), std::string::npos) << s;

  // mean_file and mean_value together; a missing mean_file.
  param.add_mean_value(1.0f);
  EXPECT_FALSE(DataTransformer::Create(param, caffe::TEST).ok());
  caffe::TransformationParameter missing;
  missing.set_mean_file(dir + "/absent.binaryproto");
  auto m = DataTransformer::Create(missing, caffe::TEST);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("absent.binaryproto"), std::string::npos) << m.status();

  // A mean file whose legacy dimensions are negative (a corrupt file): an
  // error naming it, not a CHECK in Blob::Reshape.
  mean.set_num(-1);
  {
    std::ofstream out(dir + "/negative.binaryproto", std::ios::binary);
    mean.SerializeToOstream(&out);
  }
  caffe::TransformationParameter negative;
  negative.set_mean_file(dir + "/negative.binaryproto");
  auto n = DataTransformer::Create(negative, caffe::TEST);
  EXPECT_EQ(n.status().ToString(), "INVALID_ARGUMENT: transform_param: mean_file '" + dir +
                                       "/negative.binaryproto': blob dimension out of range: -1");
  std::filesystem::remove_all(dir);
}

TEST(DataTransformerTest, CenterCropInTestIsExact) {
  caffe::TransformationParameter param;
  param.set_crop_size(3);
  auto t = Make(param, caffe::TEST);
  std::vector<float> out(2 * 3 * 3);
  ASSERT_TRUE(t->Transform(MakePatternDatum(2), out.data(), nullptr).ok());
  // h_off = (4-3)/2 = 0, w_off = (5-3)/2 = 1.
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 3; ++w) EXPECT_EQ(out[(c * 3 + h) * 3 + w], Pixel(c, h, w + 1));
  param.set_crop_size(6);
  auto too_big = Make(param, caffe::TEST);
  EXPECT_FALSE(too_big->Transform(MakePatternDatum(1), out.data(), nullptr).ok());
}

TEST(DataTransformerTest, RandomCropInTrainCoversValidOffsets) {
  caffe::TransformationParameter param;
  param.set_crop_size(3);
  auto t = Make(param, caffe::TRAIN);
  std::mt19937 rng(5);
  std::set<std::pair<int, int>> offsets;
  std::vector<float> out(9);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(t->Transform(MakePatternDatum(1), out.data(), &rng).ok());
    // Pixel(0, h, w) = 10h + w identifies the offset of the top-left corner.
    const int h_off = static_cast<int>(out[0]) / 10;
    const int w_off = static_cast<int>(out[0]) % 10;
    ASSERT_LE(h_off, 1);
    ASSERT_LE(w_off, 2);
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 3; ++w) ASSERT_EQ(out[h * 3 + w], Pixel(0, h + h_off, w + w_off));
    offsets.insert({h_off, w_off});
  }
  EXPECT_EQ(offsets.size(), 6u);  // 2 row offsets x 3 column offsets.
}

TEST(DataTransformerTest, MirrorFlipsExactlyAndOnlyInTrain) {
  caffe::TransformationParameter param;
  param.set_mirror(true);
  auto t = Make(param, caffe::TRAIN);
  // With the same seed, reproduce the coin: Caffe's Rand(2) is rng() % 2.
  std::mt19937 rng(11);
  std::mt19937 coins(11);
  int mirrored = 0;
  std::vector<float> out(2 * 4 * 5);
  for (int i = 0; i < 20; ++i) {
    const bool flip = coins() % 2 != 0;
    ASSERT_TRUE(t->Transform(MakePatternDatum(2), out.data(), &rng).ok());
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 4; ++h)
        for (int w = 0; w < 5; ++w) ASSERT_EQ(out[(c * 4 + h) * 5 + w], Pixel(c, h, flip ? 4 - w : w)) << "draw " << i;
    mirrored += flip;
  }
  EXPECT_GT(mirrored, 0);
  EXPECT_LT(mirrored, 20);

  auto test_phase = Make(param, caffe::TEST);
  ASSERT_TRUE(test_phase->Transform(MakePatternDatum(1), out.data(), nullptr).ok());
  for (int w = 0; w < 5; ++w) EXPECT_EQ(out[w], Pixel(0, 0, w));
}

TEST(DataTransformerTest, FloatDataAndBadDatums) {
  caffe::Datum datum;
  datum.set_channels(1);
  datum.set_height(1);
  datum.set_width(3);
  datum.add_float_data(-1.5f);
  datum.add_float_data(0.25f);
  datum.add_float_data(3.0f);
  caffe::TransformationParameter param;
  param.set_scale(2.0f);
  auto t = Make(param, caffe::TEST);
  std::vector<float> out(3);
  ASSERT_TRUE(t->Transform(datum, out.data(), nullptr).ok());
  EXPECT_EQ(out, (std::vector<float>{-3.0f, 0.5f, 6.0f}));

  datum.add_float_data(4.0f);
  Status s = t->Transform(datum, out.data(), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds 4 float_data values, expected 3"), std::string::npos) << s;

  caffe::Datum encoded = MakePatternDatum(1);
  encoded.set_encoded(true);
  EXPECT_FALSE(t->Transform(encoded, out.data(), nullptr).ok());
}

}  // namespace
}  // namespace data
}  // namespace nereus

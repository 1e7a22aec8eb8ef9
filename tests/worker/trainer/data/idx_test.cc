#include "worker/trainer/data/idx.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/process_util.h"

namespace nereus {
namespace data {
namespace {

class IdxTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.File(name); }

  // Writes raw bytes, so the test controls every header byte.
  void WriteBytes(const std::string& path, const std::vector<unsigned char>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }

  test::TempDir dir_;
};

// 2 images of 2x3, written byte by byte in big-endian as LeCun describes.
std::vector<unsigned char> GoodImages() {
  return {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 250, 251, 252, 253, 254, 255};
}
std::vector<unsigned char> GoodLabels() { return {0, 0, 8, 1, 0, 0, 0, 2, 7, 3}; }

TEST_F(IdxTest, ReadsAGoodPair) {
  WriteBytes(Path("img"), GoodImages());
  WriteBytes(Path("lab"), GoodLabels());
  auto ds = ReadIdxDataset(Path("img"), Path("lab"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->images.count, 2u);
  EXPECT_EQ(ds->images.rows, 2u);
  EXPECT_EQ(ds->images.cols, 3u);
  EXPECT_EQ(ds->images.pixels, (std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 250, 251, 252, 253, 254, 255}));
  EXPECT_EQ(ds->images.image(1)[0], 250);
  EXPECT_EQ(ds->labels, (std::vector<std::uint8_t>{7, 3}));
}

TEST_F(IdxTest, WriteThenReadIsIdentityAndBigEndian) {
  IdxImages images;
  images.count = 3;
  images.rows = 1;
  images.cols = 2;
  images.pixels = {9, 8, 7, 6, 5, 4};
  ASSERT_TRUE(WriteIdxImages(Path("img"), images).ok());
  ASSERT_TRUE(WriteIdxLabels(Path("lab"), {1, 2, 3}).ok());
  std::ifstream in(Path("img"), std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, (std::vector<unsigned char>{0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 9, 8, 7, 6, 5, 4}));
  auto ds = ReadIdxDataset(Path("img"), Path("lab"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->images.pixels, images.pixels);
  EXPECT_EQ(ds->labels, (std::vector<std::uint8_t>{1, 2, 3}));
}

TEST_F(IdxTest, BadMagicNamesMagicAndFile) {
  auto bytes = GoodImages();
  bytes[3] = 1;  // 2049: a labels magic in an images file.
  WriteBytes(Path("img"), bytes);
  auto images = ReadIdxImages(Path("img"));
  ASSERT_FALSE(images.ok());
  EXPECT_EQ(images.status().code(), StatusCode::kDataLoss);
  const std::string& m = images.status().message();
  EXPECT_NE(m.find("bad magic 2049"), std::string::npos) << m;
  EXPECT_NE(m.find("expected 2051"), std::string::npos) << m;
  EXPECT_NE(m.find(Path("img")), std::string::npos) << m;

  WriteBytes(Path("lab"), {0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0});
  auto labels = ReadIdxLabels(Path("lab"));
  ASSERT_FALSE(labels.ok());
  EXPECT_NE(labels.status().message().find("bad magic 305419896"), std::string::npos) << labels.status();
  EXPECT_NE(labels.status().message().find(Path("lab")), std::string::npos) << labels.status();
}

TEST_F(IdxTest, TruncatedBodyAndHeaderAreErrors) {
  auto bytes = GoodImages();
  bytes.pop_back();
  WriteBytes(Path("img"), bytes);
  auto images = ReadIdxImages(Path("img"));
  ASSERT_FALSE(images.ok());
  EXPECT_NE(images.status().message().find("truncated"), std::string::npos) << images.status();
  EXPECT_NE(images.status().message().find("promises 12 data bytes, the file has 11"), std::string::npos)
      << images.status();
  EXPECT_NE(images.status().message().find(Path("img")), std::string::npos);

  WriteBytes(Path("short"), {0, 0, 8, 3, 0, 0});
  auto header = ReadIdxImages(Path("short"));
  ASSERT_FALSE(header.ok());
  EXPECT_NE(header.status().message().find("the header needs 16"), std::string::npos) << header.status();

  WriteBytes(Path("tiny"), {0, 0});
  EXPECT_FALSE(ReadIdxLabels(Path("tiny")).ok());
}

// Sizes whose product passes 2^64 could wrap around to the file's length.
TEST_F(IdxTest, HeaderSizesThatOverflowAreAnError) {
  WriteBytes(Path("huge"), {0, 0, 8, 3, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255});
  auto images = ReadIdxImages(Path("huge"));
  EXPECT_EQ(images.status().ToString(), "DATA_LOSS: IDX images file '" + Path("huge") +
                                            "' has a header whose sizes multiply past 2^64 bytes: the file is corrupt");
}

TEST_F(IdxTest, TrailingBytesAreAnError) {
  auto bytes = GoodLabels();
  bytes.push_back(4);
  WriteBytes(Path("lab"), bytes);
  auto labels = ReadIdxLabels(Path("lab"));
  ASSERT_FALSE(labels.ok());
  EXPECT_NE(labels.status().message().find("1 bytes after"), std::string::npos) << labels.status();
}

TEST_F(IdxTest, CountMismatchNamesBothFiles) {
  WriteBytes(Path("img"), GoodImages());
  WriteBytes(Path("lab"), {0, 0, 8, 1, 0, 0, 0, 3, 7, 3, 1});
  auto ds = ReadIdxDataset(Path("img"), Path("lab"));
  ASSERT_FALSE(ds.ok());
  const std::string& m = ds.status().message();
  EXPECT_NE(m.find("count mismatch"), std::string::npos) << m;
  EXPECT_NE(m.find("holds 2 images"), std::string::npos) << m;
  EXPECT_NE(m.find("holds 3 labels"), std::string::npos) << m;
  EXPECT_NE(m.find(Path("img")), std::string::npos) << m;
  EXPECT_NE(m.find(Path("lab")), std::string::npos) << m;
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  auto images = ReadIdxImages(Path("absent"));
  ASSERT_FALSE(images.ok());
  EXPECT_EQ(images.status().code(), StatusCode::kNotFound);
  EXPECT_NE(images.status().message().find(Path("absent")), std::string::npos);
}

}  // namespace
}  // namespace data
}  // namespace nereus

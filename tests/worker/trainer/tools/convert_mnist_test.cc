// Runs nereus_convert_mnist as a real process on IDX files made here and checks
// the LMDB it writes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/idx.h"

namespace nereus {
namespace data {
namespace {

class ConvertMnistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 12 images of 28x28; pixel p of image i is (i * 31 + p) mod 256, label (i * 3) mod 10.
    IdxImages images;
    images.count = kCount;
    images.rows = 28;
    images.cols = 28;
    for (int i = 0; i < kCount; ++i) {
      for (int p = 0; p < 28 * 28; ++p) images.pixels.push_back(static_cast<std::uint8_t>((i * 31 + p) % 256));
      labels_.push_back(static_cast<std::uint8_t>((i * 3) % 10));
    }
    ASSERT_TRUE(WriteIdxImages(Path("images"), images).ok());
    ASSERT_TRUE(WriteIdxLabels(Path("labels"), labels_).ok());
  }
  std::string Path(const std::string& name) const { return dir_.File(name); }

  static constexpr int kCount = 12;
  test::TempDir dir_;
  std::vector<std::uint8_t> labels_;
};

TEST_F(ConvertMnistTest, WritesOneDatumPerImageWithCaffeKeys) {
  test::ToolRun r = test::RunTool("nereus_convert_mnist", "--images=" + Path("images") + " --labels=" + Path("labels") +
                                                              " --output=" + Path("lmdb") + " --commit_every=5");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::unique_ptr<LmdbDatabase> db;
  std::unique_ptr<DbCursor> cursor = test::ReadLmdb(Path("lmdb"), kCount, &db);
  ASSERT_NE(cursor, nullptr);
  for (int i = 0; i < kCount; ++i, cursor->Next()) {
    ASSERT_TRUE(cursor->valid());
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", i);
    EXPECT_EQ(cursor->key(), key);
    caffe::Datum datum;
    ASSERT_TRUE(datum.ParseFromArray(cursor->value().data(), static_cast<int>(cursor->value().size())));
    EXPECT_EQ(datum.channels(), 1);
    EXPECT_EQ(datum.height(), 28);
    EXPECT_EQ(datum.width(), 28);
    EXPECT_FALSE(datum.encoded());
    EXPECT_EQ(datum.float_data_size(), 0);
    EXPECT_EQ(datum.label(), labels_[i]);
    ASSERT_EQ(datum.data().size(), 28u * 28u);
    for (int p : {0, 1, 255, 400, 783}) {
      EXPECT_EQ(static_cast<std::uint8_t>(datum.data()[p]), (i * 31 + p) % 256) << "image " << i << " pixel " << p;
    }
  }
  EXPECT_EQ(cursor->epoch(), 1u);  // Exactly kCount records: the loop wrapped once.
}

TEST_F(ConvertMnistTest, MissingFlagIsNamed) {
  test::ToolRun r = test::RunTool("nereus_convert_mnist", "--images=" + Path("images") + " --output=" + Path("lmdb"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--labels is required"), std::string::npos) << r.output;
}

TEST_F(ConvertMnistTest, CountMismatchFailsNamingFiles) {
  ASSERT_TRUE(WriteIdxLabels(Path("few_labels"), {1, 2, 3}).ok());
  test::ToolRun r =
      test::RunTool("nereus_convert_mnist",
                    "--images=" + Path("images") + " --labels=" + Path("few_labels") + " --output=" + Path("lmdb"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("holds 12 images"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(Path("few_labels")), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(Path("lmdb"))) << "no output on bad input";
}

TEST_F(ConvertMnistTest, RefusesToOverwriteAnExistingDatabase) {
  const std::string args = "--images=" + Path("images") + " --labels=" + Path("labels") + " --output=" + Path("lmdb");
  ASSERT_EQ(test::RunTool("nereus_convert_mnist", args).exit_code, 0);
  test::ToolRun again = test::RunTool("nereus_convert_mnist", args);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
}

TEST_F(ConvertMnistTest, HelpDescribesEveryFlag) {
  test::ToolRun r = test::RunTool("nereus_convert_mnist", "--helpmatch=convert_mnist");
  for (const char* flag : {"-images", "-labels", "-output", "-backend", "-commit_every"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " missing from:\n" << r.output;
  }
}

}  // namespace
}  // namespace data
}  // namespace nereus

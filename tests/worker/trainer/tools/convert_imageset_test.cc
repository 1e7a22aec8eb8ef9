// Runs nereus_convert_imageset as a real process on PNG images made here and
// reads the database it writes back, record by record and through the Data
// layer; bad input stops it with an error naming the list file and the line,
// and leaves nothing at the output.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "tests/support/image_test_util.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/data/data_layer.h"
#include "worker/trainer/data/db.h"
#include "worker/trainer/data/image_io.h"

namespace nereus {
namespace data {
namespace {

// Pixel (h, w, c) of image i: distinct per image, row, column and channel.
std::uint8_t Pixel(int i, int h, int w, int c) {
  return static_cast<std::uint8_t>((i * 40 + h * 10 + w * 3 + c) % 256);
}

class ConvertImagesetTest : public ::testing::Test {
 protected:
  static constexpr int kImages = 6;
  static constexpr int kHeight = 4;
  static constexpr int kWidth = 5;

  void SetUp() override {
    NEREUS_IMAGES_OR_SKIP();
    std::filesystem::create_directory(dir_.File("imgs"));
    std::string list;
    for (int i = 0; i < kImages; ++i) {
      test::WriteImage(dir_.File("imgs/img" + std::to_string(i) + ".png"),
                       test::MakeImage(kHeight, kWidth, 3, [i](int h, int w, int c) { return Pixel(i, h, w, c); }));
      list += "imgs/img" + std::to_string(i) + ".png " + std::to_string(10 + i) + "\n";
    }
    test::WriteText(dir_.File("list.txt"), list);
  }
  std::string Path(const std::string& name) const { return dir_.File(name); }
  // A Data layer "data" reading `source` in batches of `batch`.
  static caffe::LayerParameter DataParam(const std::string& source, int batch) {
    caffe::LayerParameter param;
    param.set_name("data");
    param.set_type("Data");
    param.mutable_data_param()->set_source(source);
    param.mutable_data_param()->set_batch_size(batch);
    return param;
  }
  // ROOTFOLDER/ LISTFILE DB_NAME after the flags.
  test::ToolRun Convert(const std::string& flags, const std::string& db, const std::string& list = "list.txt") {
    return test::RunTool("nereus_convert_imageset", flags + " " + dir_.path() + "/ " + Path(list) + " " + Path(db));
  }
  // Every file left in the test's folder whose name starts with `prefix`.
  std::vector<std::string> Leftovers(const std::string& prefix) const {
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0) found.push_back(name);
    }
    return found;
  }
  // The records of a database, in key order.
  std::vector<std::pair<std::string, caffe::Datum>> Records(const std::string& db_name) const {
    std::vector<std::pair<std::string, caffe::Datum>> records;
    auto backend = DetectDbBackend(Path(db_name));
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return records;
    auto db = Database::Open(*backend, Path(db_name), DbMode::kRead);
    EXPECT_TRUE(db.ok()) << db.status();
    if (!db.ok()) return records;
    auto cursor = (*db)->NewCursor();
    EXPECT_TRUE(cursor.ok());
    for (; (*cursor)->valid() && (*cursor)->epoch() == 0; (*cursor)->Next()) {
      caffe::Datum datum;
      EXPECT_TRUE(datum.ParseFromArray((*cursor)->value().data(), static_cast<int>((*cursor)->value().size())));
      records.emplace_back(std::string((*cursor)->key()), datum);
    }
    return records;
  }

  test::TempDir dir_;
};

TEST_F(ConvertImagesetTest, WritesOneDatumPerLineWithCaffeKeysOnBothBackends) {
  for (const std::string backend : {"lmdb", "leveldb"}) {
    SCOPED_TRACE(backend);
    test::ToolRun r = Convert("--backend=" + backend, backend);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(DetectDbBackend(Path(backend)).value(), backend == "lmdb" ? DbBackend::kLmdb : DbBackend::kLevelDb);
    const auto records = Records(backend);
    ASSERT_EQ(records.size(), static_cast<std::size_t>(kImages));
    for (int i = 0; i < kImages; ++i) {
      char key[64];
      std::snprintf(key, sizeof(key), "%08d_imgs/img%d.png", i, i);
      EXPECT_EQ(records[i].first, key);
      const caffe::Datum& d = records[i].second;
      EXPECT_FALSE(d.encoded());
      EXPECT_EQ(d.label(), 10 + i);
      ASSERT_EQ(d.channels(), 3);
      ASSERT_EQ(d.height(), kHeight);
      ASSERT_EQ(d.width(), kWidth);
      ASSERT_EQ(d.data().size(), 3u * kHeight * kWidth);
      // Planar, Caffe's CVMatToDatum order: data[(c * H + h) * W + w].
      for (int c = 0; c < 3; ++c)
        for (int h = 0; h < kHeight; ++h)
          for (int w = 0; w < kWidth; ++w)
            ASSERT_EQ(static_cast<std::uint8_t>(d.data()[(c * kHeight + h) * kWidth + w]), Pixel(i, h, w, c))
                << "image " << i << " c" << c << " h" << h << " w" << w;
    }
  }
  EXPECT_TRUE(Leftovers("lmdb.tmp").empty());
  EXPECT_TRUE(Leftovers("leveldb.tmp").empty());
}

// The Data layer reads what the tool wrote: the same batches from either
// backend (without data_param.backend: the layer sees which it is), with
// the images' values.
TEST_F(ConvertImagesetTest, LevelDbAndLmdbGiveTheDataLayerTheSameBatches) {
  ASSERT_EQ(Convert("--backend=lmdb", "lmdb").exit_code, 0);
  ASSERT_EQ(Convert("--backend=leveldb", "leveldb").exit_code, 0);
  std::vector<std::vector<float>> batches[2];
  for (int b = 0; b < 2; ++b) {
    caffe::LayerParameter param = DataParam(Path(b == 0 ? "lmdb" : "leveldb"), 4);
    param.set_phase(caffe::TRAIN);
    DataLayer layer(param);
    std::mt19937 rng(5);
    layer.set_rng(&rng);
    Blob data, label;
    ASSERT_TRUE(layer.SetUp({}, {&data, &label}).ok());
    for (int i = 0; i < 3; ++i) {
      layer.Forward({}, {&data, &label});
      ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
      batches[b].emplace_back(data.cpu_data(), data.cpu_data() + data.count());
      batches[b].emplace_back(label.cpu_data(), label.cpu_data() + label.count());
    }
  }
  EXPECT_EQ(batches[0], batches[1]);
  // Batch 2 holds records 2, 3, 4, 5 (the third batch wraps: 0..3, 4,5,0,1, 2..5).
  EXPECT_EQ(batches[0][5], (std::vector<float>{12, 13, 14, 15}));
  EXPECT_EQ(batches[0][4][(1 * 3 + 2) * kHeight * kWidth + 3 * kWidth + 4], Pixel(3, 3, 4, 2));
}

TEST_F(ConvertImagesetTest, GrayAndResizeAsOpenCvDoes) {
  test::ToolRun r = Convert("--gray --resize_height=8 --resize_width=10", "db");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto records = Records("db");
  ASSERT_EQ(records.size(), static_cast<std::size_t>(kImages));
  for (int i = 0; i < kImages; ++i) {
    const caffe::Datum& d = records[i].second;
    EXPECT_EQ(d.channels(), 1);
    EXPECT_EQ(d.height(), 8);
    EXPECT_EQ(d.width(), 10);
    // What Caffe's ReadImageToDatum gives: imread(GRAYSCALE), then
    // cv::resize (bilinear).
    auto want = ReadImageToDatum(Path("imgs/img" + std::to_string(i) + ".png"), 10 + i, 8, 10, false);
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ(d.data(), want->data()) << i;
  }
  // A uniform image stays uniform at any size.
  test::WriteImage(Path("flat.png"), test::MakeImage(3, 3, 3, [](int, int, int) { return 77; }));
  test::WriteText(Path("flat.txt"), "flat.png 1\n");
  ASSERT_EQ(Convert("--resize_height=7 --resize_width=5", "flat", "flat.txt").exit_code, 0);
  const auto flat = Records("flat");
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].second.data(), std::string(3 * 7 * 5, static_cast<char>(77)));
}

TEST_F(ConvertImagesetTest, ShuffleKeepsEachImageWithItsLabelAndIsReproducible) {
  ASSERT_EQ(Convert("--shuffle --shuffle_seed=3", "a").exit_code, 0);
  ASSERT_EQ(Convert("--shuffle --shuffle_seed=3", "b").exit_code, 0);
  const auto a = Records("a");
  const auto b = Records("b");
  ASSERT_EQ(a.size(), static_cast<std::size_t>(kImages));
  std::set<int> labels;
  bool moved = false;
  for (int k = 0; k < kImages; ++k) {
    EXPECT_EQ(a[k].first, b[k].first);
    // Key "%08d_imgs/img<i>.png": the record of image i holds its label and pixels.
    char index[16];
    std::snprintf(index, sizeof(index), "%08d_", k);
    EXPECT_EQ(a[k].first.substr(0, 9), index);
    const int i = a[k].first[17] - '0';
    moved |= i != k;
    EXPECT_EQ(a[k].second.label(), 10 + i);
    EXPECT_EQ(static_cast<std::uint8_t>(a[k].second.data()[0]), Pixel(i, 0, 0, 0));
    labels.insert(a[k].second.label());
  }
  EXPECT_EQ(labels.size(), static_cast<std::size_t>(kImages));
  EXPECT_TRUE(moved) << "the shuffle left every image in place";
}

// --encoded keeps each file's bytes (a PNG asked as png, no resize); the
// Data layer decodes them into the batches a raw conversion gives.
TEST_F(ConvertImagesetTest, EncodedRecordsDecodeInTheDataLayer) {
  ASSERT_EQ(Convert("--encoded", "encoded").exit_code, 0);
  ASSERT_EQ(Convert("", "raw").exit_code, 0);
  const auto encoded = Records("encoded");
  ASSERT_EQ(encoded.size(), static_cast<std::size_t>(kImages));
  for (int i = 0; i < kImages; ++i) {
    EXPECT_TRUE(encoded[i].second.encoded());
    EXPECT_EQ(encoded[i].second.data(), test::ReadFile(Path("imgs/img" + std::to_string(i) + ".png")));
  }
  // Resized and re-encoded as JPEG: encoded, and no longer the file.
  ASSERT_EQ(Convert("--encode_type=jpg --resize_height=6 --resize_width=6", "jpg").exit_code, 0);
  const auto jpg = Records("jpg");
  ASSERT_EQ(jpg.size(), static_cast<std::size_t>(kImages));
  EXPECT_TRUE(jpg[0].second.encoded());
  auto image = DecodeImage(jpg[0].second.data(), ImageColor::kNative);
  ASSERT_TRUE(image.ok()) << image.status();
  EXPECT_EQ(image->height, 6);
  EXPECT_EQ(image->channels, 3);

  std::vector<float> batches[2];
  for (int b = 0; b < 2; ++b) {
    caffe::LayerParameter param = DataParam(Path(b == 0 ? "encoded" : "raw"), kImages);
    param.set_phase(caffe::TEST);
    param.mutable_transform_param()->set_crop_size(3);
    DataLayer layer(param);
    std::mt19937 rng(5);
    layer.set_rng(&rng);
    Blob data, label;
    ASSERT_TRUE(layer.SetUp({}, {&data, &label}).ok());
    EXPECT_EQ(data.shape(), (std::vector<int>{kImages, 3, 3, 3}));
    layer.Forward({}, {&data, &label});
    ASSERT_TRUE(layer.forward_error().ok()) << layer.forward_error();
    batches[b].assign(data.cpu_data(), data.cpu_data() + data.count());
  }
  EXPECT_EQ(batches[0], batches[1]);
  // force_gray decodes the same records in gray.
  caffe::LayerParameter param = DataParam(Path("encoded"), 2);
  param.mutable_transform_param()->set_force_gray(true);
  DataLayer gray(param);
  std::mt19937 rng(5);
  gray.set_rng(&rng);
  Blob data, label;
  ASSERT_TRUE(gray.SetUp({}, {&data, &label}).ok());
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 1, kHeight, kWidth}));
}

TEST_F(ConvertImagesetTest, CheckSizeRefusesAnImageOfAnotherSizeNamingItsLine) {
  test::WriteImage(Path("imgs/big.png"), test::MakeImage(6, 6, 3, [](int, int, int) { return 1; }));
  test::WriteText(Path("mixed.txt"), "imgs/img0.png 0\nimgs/img1.png 1\nimgs/big.png 2\n");
  ASSERT_EQ(Convert("", "unchecked", "mixed.txt").exit_code, 0);  // Caffe's default: sizes may differ.
  test::ToolRun r = Convert("--check_size", "checked", "mixed.txt");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("image list '" + Path("mixed.txt") + "' line 3: image '" + dir_.path() +
                          "/imgs/big.png' is 3x6x6 but the first (image list '" + Path("mixed.txt") +
                          "' line 1) is 3x4x5 (--check_size)"),
            std::string::npos)
      << r.output;
  EXPECT_TRUE(Leftovers("checked").empty());
}

// Bad input: an error naming the list file and the line, exit 1, nothing
// (not even a temporary database) left behind.
TEST_F(ConvertImagesetTest, AnImageThatDoesNotDecodeStopsTheRunNamingTheLine) {
  test::WriteText(Path("imgs/broken.png"), "these bytes are not an image");
  test::WriteText(Path("bad.txt"), "imgs/img0.png 0\nimgs/img1.png 1\nimgs/broken.png 2\nimgs/img2.png 3\n");
  for (const std::string backend : {"lmdb", "leveldb"}) {
    test::ToolRun r = Convert("--backend=" + backend, "out", "bad.txt");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("image list '" + Path("bad.txt") + "' line 3: image file '" + dir_.path() +
                            "/imgs/broken.png' does not decode as an image"),
              std::string::npos)
        << r.output;
    EXPECT_TRUE(Leftovers("out").empty()) << backend << ": " << Leftovers("out")[0];
  }
  test::WriteText(Path("missing.txt"), "imgs/img0.png 0\nimgs/nowhere.png 1\n");
  test::ToolRun r = Convert("", "out", "missing.txt");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("line 2: cannot open image file '" + dir_.path() + "/imgs/nowhere.png'"), std::string::npos)
      << r.output;
  EXPECT_TRUE(Leftovers("out").empty());
}

TEST_F(ConvertImagesetTest, AListLineWithoutALabelStopsTheRunNamingTheLine) {
  test::WriteText(Path("nolabel.txt"), "imgs/img0.png 0\nimgs/img1.png\n");
  test::ToolRun r = Convert("", "out", "nolabel.txt");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("image list '" + Path("nolabel.txt") +
                          "' line 2: 'imgs/img1.png' has no label (each line is 'PATH LABEL')"),
            std::string::npos)
      << r.output;
  test::WriteText(Path("word.txt"), "imgs/img0.png zero\n");
  r = Convert("", "out", "word.txt");
  EXPECT_NE(r.output.find("line 1: the label 'zero' is not an integer"), std::string::npos) << r.output;
  EXPECT_TRUE(Leftovers("out").empty());
}

TEST_F(ConvertImagesetTest, RefusesAnExistingOutputAndBadFlags) {
  ASSERT_EQ(Convert("", "db").exit_code, 0);
  test::ToolRun again = Convert("", "db");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;
  test::ToolRun half = Convert("--resize_height=5", "half");
  EXPECT_EQ(half.exit_code, 1);
  EXPECT_NE(half.output.find("give both --resize_height and --resize_width"), std::string::npos) << half.output;
  test::ToolRun backend = Convert("--backend=rocksdb", "other");
  EXPECT_NE(backend.output.find("unknown database backend 'rocksdb'"), std::string::npos) << backend.output;
  test::ToolRun args = test::RunTool("nereus_convert_imageset", Path("list.txt"));
  EXPECT_EQ(args.exit_code, 2);
  EXPECT_NE(args.output.find("expected ROOTFOLDER/ LISTFILE DB_NAME"), std::string::npos) << args.output;
}

TEST_F(ConvertImagesetTest, HelpDescribesCaffesFlags) {
  test::ToolRun r = test::RunTool("nereus_convert_imageset", "--helpmatch=convert_imageset");
  for (const char* flag : {"-gray", "-shuffle", "-backend", "-resize_width", "-resize_height", "-check_size",
                           "-encoded", "-encode_type"}) {
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag << " missing from:\n" << r.output;
  }
}

// In a build without OpenCV the tool refuses to run, saying why.
TEST(ConvertImagesetWithoutOpenCvTest, RefusesToRunSayingWhy) {
  if (ImageCodecsBuilt()) GTEST_SKIP() << "built with OpenCV: this checks a build without it";
  test::TempDir dir;
  test::WriteText(dir.File("list.txt"), "a.png 0\n");
  test::ToolRun r =
      test::RunTool("nereus_convert_imageset", dir.path() + "/ " + dir.File("list.txt") + " " + dir.File("db"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("nereus_convert_imageset needs image decoding, and this Nereus was built without OpenCV"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.File("db")));
}

}  // namespace
}  // namespace data
}  // namespace nereus

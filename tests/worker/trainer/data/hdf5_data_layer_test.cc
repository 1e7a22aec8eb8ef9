// HDF5Data reads several files in order (and shuffled when asked), in
// shards; HDF5Output writes what it got, and HDF5Data reads that back.
#include "worker/trainer/data/hdf5_data_layer.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <hdf5_hl.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/support/data_layer_fixture.h"
#include "tests/support/gradient_checker.h"
#include "tests/support/net_test_util.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/data/hdf5_output_layer.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace data {
namespace {

// A dataset to write: its dimensions and values (floats, or ints when
// `integer`).
struct Dataset {
  std::vector<hsize_t> dims;
  std::vector<float> values;
  bool integer = false;
};

void WriteH5(const std::string& path, const std::map<std::string, Dataset>& datasets) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0) << path;
  for (const auto& [name, d] : datasets) {
    herr_t st;
    if (d.integer) {
      std::vector<int> ints(d.values.begin(), d.values.end());
      st = H5LTmake_dataset_int(file, name.c_str(), static_cast<int>(d.dims.size()), d.dims.data(), ints.data());
    } else {
      st = H5LTmake_dataset_float(file, name.c_str(), static_cast<int>(d.dims.size()), d.dims.data(), d.values.data());
    }
    ASSERT_GE(st, 0) << path << " " << name;
  }
  H5Fclose(file);
}

// Reads a float dataset: its dimensions into *dims.
std::vector<float> ReadH5(const std::string& path, const std::string& name, std::vector<hsize_t>* dims) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  EXPECT_GE(file, 0) << path;
  int rank = 0;
  H5LTget_dataset_ndims(file, name.c_str(), &rank);
  dims->assign(static_cast<std::size_t>(rank), 0);
  H5T_class_t cls;
  std::size_t size;
  H5LTget_dataset_info(file, name.c_str(), dims->data(), &cls, &size);
  std::size_t count = 1;
  for (hsize_t d : *dims) count *= d;
  std::vector<float> values(count);
  EXPECT_GE(H5LTread_dataset_float(file, name.c_str(), values.data()), 0);
  H5Fclose(file);
  return values;
}

// File f's row r: data 2x2 values 100 f + 10 r + {0, 1, 2, 3}, label 10 f + r.
float Value(int f, int r, int k) { return 100.0f * f + 10.0f * r + k; }

class Hdf5DataLayerTest : public test::DataLayerFixture {
 protected:
  Hdf5DataLayerTest() : DataLayerFixture(17) {}

  void SetUp() override {
    // a.h5: 3 rows, b.h5: 2 rows, c.h5: 4 rows.
    const int rows[3] = {3, 2, 4};
    std::string list;
    for (int f = 0; f < 3; ++f) {
      Dataset data{{static_cast<hsize_t>(rows[f]), 2, 2}, {}, false};
      Dataset label{{static_cast<hsize_t>(rows[f])}, {}, true};  // Integers, read as floats.
      for (int r = 0; r < rows[f]; ++r) {
        for (int k = 0; k < 4; ++k) data.values.push_back(Value(f, r, k));
        label.values.push_back(static_cast<float>(10 * f + r));
      }
      const std::string name = dir_.File(std::string(1, static_cast<char>('a' + f)) + ".h5");
      WriteH5(name, {{"data", data}, {"label", label}});
      list += name + (f == 1 ? "  \n\n" : "\n");  // Whitespace-separated, as Caffe reads it.
    }
    test::WriteText(dir_.File("list.txt"), list);
  }

  caffe::LayerParameter Param(int batch_size, bool shuffle = false) const {
    return test::ParseLayerParameter(
        "name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' phase: TRAIN "
        "hdf5_data_param { source: '" +
        dir_.File("list.txt") + "' batch_size: " + std::to_string(batch_size) + (shuffle ? " shuffle: true" : "") +
        " }");
  }
  // The labels of one batch, after checking that each row's data matches
  // its label.
  std::vector<int> Forward(Layer* layer) {
    const std::vector<int> labels = ForwardLabelsOk(layer);
    for (int i = 0; i < label_.count(); ++i) {
      const int label = labels[i];
      for (int k = 0; k < 4; ++k) EXPECT_EQ(data_.cpu_data()[i * 4 + k], Value(label / 10, label % 10, k)) << label;
    }
    return labels;
  }
};

TEST_F(Hdf5DataLayerTest, ReadsSeveralFilesInOrderAcrossBatches) {
  Hdf5DataLayer layer(Param(4));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  EXPECT_EQ(data_.shape(), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(label_.shape(), (std::vector<int>{4}));
  EXPECT_EQ(layer.shard_size(), 9u);
  EXPECT_EQ(Forward(&layer), (std::vector<int>{0, 1, 2, 10}));
  EXPECT_EQ(Forward(&layer), (std::vector<int>{11, 20, 21, 22}));
  EXPECT_EQ(Forward(&layer), (std::vector<int>{23, 0, 1, 2}));  // Wraps to the first file.
}

TEST_F(Hdf5DataLayerTest, ShuffleKeepsEachFilesRowsTogetherAndReshufflesEveryPass) {
  Hdf5DataLayer layer(Param(9, /*shuffle=*/true));
  ASSERT_TRUE(SetUpLayer(&layer).ok());
  std::vector<std::vector<int>> passes;
  for (int pass = 0; pass < 4; ++pass) {
    const std::vector<int> labels = Forward(&layer);
    // Files are not interleaved: the file (label / 10) changes twice.
    int changes = 0;
    for (int i = 1; i < 9; ++i) changes += labels[i] / 10 != labels[i - 1] / 10;
    EXPECT_EQ(changes, 2) << pass;
    std::vector<int> sorted = labels;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 10, 11, 20, 21, 22, 23}));
    passes.push_back(labels);
  }
  std::set<std::vector<int>> distinct(passes.begin(), passes.end());
  EXPECT_GT(distinct.size(), 1u) << "the same order every pass";
  EXPECT_NE(passes[0], (std::vector<int>{0, 1, 2, 10, 11, 20, 21, 22, 23})) << "not shuffled";
}

TEST_F(Hdf5DataLayerTest, ShardsTakeEveryPthRowOverAllFiles) {
  // Global rows: a 0-2, b 3-4, c 5-8; shard 1 of 2 reads 1, 3, 5, 7.
  Hdf5DataLayer one(Param(4), DataLayerOptions{1, 2});
  ASSERT_TRUE(SetUpLayer(&one).ok());
  EXPECT_EQ(one.shard_size(), 4u);
  EXPECT_EQ(Forward(&one), (std::vector<int>{1, 10, 20, 22}));
  Hdf5DataLayer zero(Param(5), DataLayerOptions{0, 2});
  ASSERT_TRUE(SetUpLayer(&zero).ok());
  EXPECT_EQ(Forward(&zero), (std::vector<int>{0, 2, 11, 21, 23}));
  // A resumed job skips the batches already read.
  Hdf5DataLayer resumed(Param(2), DataLayerOptions{1, 2, /*skip_batches=*/1});
  ASSERT_TRUE(SetUpLayer(&resumed).ok());
  EXPECT_EQ(Forward(&resumed), (std::vector<int>{20, 22}));
}

TEST_F(Hdf5DataLayerTest, ADatasetOfTheWrongRankIsASetUpErrorNamingFileAndDataset) {
  WriteH5(dir_.File("b.h5"), {{"data", {{2, 4}, std::vector<float>(8, 0.0f)}}, {"label", {{2}, {0, 1}}}});
  Hdf5DataLayer layer(Param(2));
  EXPECT_EQ(SetUpLayer(&layer).ToString(),
            "INVALID_ARGUMENT: layer h5 (HDF5Data): HDF5 file '" + dir_.File("b.h5") +
                "', dataset 'data' has rank 2 (2 x 4); the first file's has rank 3 (N x 2 x 2) (listed in '" +
                dir_.File("list.txt") + "')");
}

TEST_F(Hdf5DataLayerTest, BadFilesAreSetUpErrorsNamingThem) {
  {
    WriteH5(dir_.File("b.h5"), {{"data", {{2, 2, 2}, std::vector<float>(8, 0.0f)}}});
    Hdf5DataLayer layer(Param(2));
    EXPECT_EQ(SetUpLayer(&layer).message(), "layer h5 (HDF5Data): HDF5 file '" + dir_.File("b.h5") +
                                                "' has no dataset 'label' (each top of an HDF5Data layer reads the "
                                                "dataset of its name) (listed in '" +
                                                dir_.File("list.txt") + "')");
  }
  {
    WriteH5(dir_.File("b.h5"), {{"data", {{2, 2, 2}, std::vector<float>(8, 0.0f)}}, {"label", {{3}, {0, 1, 2}}}});
    Hdf5DataLayer layer(Param(2));
    EXPECT_NE(SetUpLayer(&layer).message().find("dataset 'label' has 3 rows but dataset 'data' has 2"),
              std::string::npos);
  }
  {
    WriteH5(dir_.File("b.h5"), {{"data", {{2, 2, 3}, std::vector<float>(12, 0.0f)}}, {"label", {{2}, {0, 1}}}});
    Hdf5DataLayer layer(Param(2));
    EXPECT_NE(SetUpLayer(&layer).message().find("dataset 'data' is 2 x 2 x 3; the first file's is N x 2 x 2"),
              std::string::npos);
  }
  {
    test::WriteText(dir_.File("b.h5"), "not hdf5");
    Hdf5DataLayer layer(Param(2));
    EXPECT_NE(SetUpLayer(&layer).message().find("HDF5 file '" + dir_.File("b.h5") + "' is not an HDF5 file"),
              std::string::npos);
  }
  {
    test::WriteText(dir_.File("list.txt"), dir_.File("nowhere.h5") + "\n");
    Hdf5DataLayer layer(Param(2));
    EXPECT_NE(SetUpLayer(&layer).message().find("cannot open HDF5 file '" + dir_.File("nowhere.h5") + "'"),
              std::string::npos);
  }
  {
    caffe::LayerParameter param = Param(2);
    param.mutable_transform_param()->set_scale(2);
    Hdf5DataLayer layer(param);
    EXPECT_NE(SetUpLayer(&layer).message().find("does not transform data"), std::string::npos);
  }
}

// A label a loss cannot take names the file and the row.
TEST_F(Hdf5DataLayerTest, ALabelOutOfRangeNamesTheFileAndTheRow) {
  auto net = test::TrainNetFromText(
      "layer { name: 'h5' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
          dir_.File("list.txt") +
          "' batch_size: 3 } }\n"
          "layer { name: 'flat' type: 'Flatten' bottom: 'data' top: 'flat' }\n"
          "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'flat' bottom: 'label' top: 'loss' }\n",
      "net.prototxt");
  ASSERT_TRUE(net.ok()) << net.status();
  ASSERT_TRUE((*net)->Forward().ok());  // Labels 0, 1, 2 of a.h5.
  EXPECT_EQ((*net)->Forward().status().ToString(),
            "DATA_LOSS: layer h5 (HDF5Data): HDF5 file '" + dir_.File("b.h5") +
                "', row 0: label 10 is out of range for layer loss (SoftmaxWithLoss), which takes labels 0 to 3");
}

// HDF5Output writes what it got, every Forward appended; HDF5Data reads the
// file back.
TEST_F(Hdf5DataLayerTest, Hdf5OutputWritesWhatItGotAndHdf5DataReadsItBack) {
  const std::string out = dir_.File("out.h5");
  std::vector<float> got_data, got_label;
  {
    Hdf5DataLayer source(Param(2));
    ASSERT_TRUE(SetUpLayer(&source).ok());
    Hdf5OutputLayer output(test::ParseLayerParameter(
        "name: 'out' type: 'HDF5Output' bottom: 'data' bottom: 'label' hdf5_output_param { file_name: '" + out +
        "' }"));
    ASSERT_TRUE(output.SetUp({&data_, &label_}, {}).ok());
    for (int i = 0; i < 3; ++i) {
      Forward(&source);
      got_data.insert(got_data.end(), data_.cpu_data(), data_.cpu_data() + data_.count());
      got_label.insert(got_label.end(), label_.cpu_data(), label_.cpu_data() + label_.count());
      output.Forward({&data_, &label_}, {});
      ASSERT_TRUE(output.forward_error().ok()) << output.forward_error();
      // Flushed at each Forward: the rows so far are in the file now.
      std::vector<hsize_t> dims;
      EXPECT_EQ(ReadH5(out, "label", &dims).size(), static_cast<std::size_t>(2 * (i + 1)));
    }
    EXPECT_EQ(output.rows(), 6);
  }
  std::vector<hsize_t> dims;
  EXPECT_EQ(ReadH5(out, "data", &dims), got_data);
  EXPECT_EQ(dims, (std::vector<hsize_t>{6, 2, 2, 1}));  // Caffe's 4-D layout.
  EXPECT_EQ(ReadH5(out, "label", &dims), got_label);
  EXPECT_EQ(dims, (std::vector<hsize_t>{6, 1, 1, 1}));

  test::WriteText(dir_.File("out.txt"), out + "\n");
  Hdf5DataLayer back(
      test::ParseLayerParameter("name: 'back' type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
                                dir_.File("out.txt") + "' batch_size: 6 }"));
  ASSERT_TRUE(SetUpLayer(&back).ok());
  back.Forward({}, {&data_, &label_});
  EXPECT_EQ(std::vector<float>(data_.cpu_data(), data_.cpu_data() + data_.count()), got_data);
  EXPECT_EQ(std::vector<float>(label_.cpu_data(), label_.cpu_data() + label_.count()), got_label);
}

TEST_F(Hdf5DataLayerTest, Hdf5OutputNamesAFilePerWorkerAndRefusesMismatchedBottoms) {
  const caffe::LayerParameter param = test::ParseLayerParameter(
      "name: 'out' type: 'HDF5Output' bottom: 'data' bottom: 'label' hdf5_output_param { file_name: '" +
      dir_.File("out.h5") + "' }");
  Hdf5OutputLayer worker1(param, DataLayerOptions{1, 2});
  Blob data({3, 2}), label({2});
  ASSERT_TRUE(worker1.SetUp({&data, &label}, {}).ok());
  EXPECT_EQ(worker1.file_name(), dir_.File("out.rank1.h5"));
  EXPECT_TRUE(std::filesystem::exists(dir_.File("out.rank1.h5")));
  worker1.Forward({&data, &label}, {});
  EXPECT_EQ(worker1.forward_error().message(), "layer out (HDF5Output): HDF5 file '" + dir_.File("out.rank1.h5") +
                                                   "': the data bottom has 3 rows and the label bottom 2; they "
                                                   "must be the same");
  caffe::LayerParameter nowhere = param;
  nowhere.mutable_hdf5_output_param()->set_file_name(dir_.File("no/such/dir/out.h5"));
  Hdf5OutputLayer bad(nowhere);
  EXPECT_EQ(bad.SetUp({&data, &label}, {}).message(),
            "layer out (HDF5Output): cannot create HDF5 file '" + dir_.File("no/such/dir/out.h5") + "'");
}

}  // namespace
}  // namespace data
}  // namespace nereus

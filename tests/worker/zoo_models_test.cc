// The model zoo (worker/trainer/models/, written by scripts/zoo_models.py):
// ResNet-50 (BatchNorm + Scale) and BVLC GoogLeNet (with its two weighted
// auxiliary classifiers) have the published parameter counts and train for 2
// iterations on small random-image LMDBs, standalone and as 2 workers x 2
// servers. To stay fast the training runs use a small crop, a batch of 2 and
// global average pooling at the end (the published nets' 7x7 pool assumes
// crop 224); the parameter counts are checked at crop 224.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/process_util.h"
#include "tests/support/train_test_util.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"

namespace nereus {
namespace test {
namespace {

std::string Model(const std::string& name) {
  const char* dir = std::getenv("NEREUS_SOURCE_DIR");
  return std::string(dir != nullptr ? dir : ".") + "/worker/trainer/models/" + name;
}

// A Data layer stand-in with fixed top shapes: [1, 3, S, S] and [1], S the
// crop (224 for ResNet-50, GoogLeNet and VGG-19, 227 for CaffeNet) or 32
// without one (CIFAR-10).
class ShapeOnlyDataLayer : public Layer {
 public:
  using Layer::Layer;
  int ExactNumBottomBlobs() const override { return 0; }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& t = layer_param_.transform_param();
    const int side = t.has_crop_size() ? static_cast<int>(t.crop_size()) : 32;
    top[0]->Reshape(std::vector<int>{1, 3, side, side});
    top[1]->Reshape(std::vector<int>{1});
  }

 protected:
  void Forward_cpu(const std::vector<Blob*>&, const std::vector<Blob*>&) override {}
  void Backward_cpu(const std::vector<Blob*>&, const std::vector<bool>&, const std::vector<Blob*>&) override {}
};

struct Counts {
  int64_t learned = 0;      // blobs the solver learns
  int64_t local_state = 0;  // BatchNorm statistics
  std::map<std::string, int> layers_of_type;
  std::vector<float> loss_weights;  // of the loss layers, in net order
};

Counts CountModel(const std::string& file) {
  Counts counts;
  caffe::NetParameter param;
  Status st = ReadNetParameterFromTextFile(Model(file), &param);
  EXPECT_TRUE(st.ok()) << st.message();
  param.mutable_state()->set_phase(caffe::TRAIN);
  LayerRegistry registry;
  RegisterComputeLayers(&registry);
  registry.Register<ShapeOnlyDataLayer>("Data");
  auto net = Net::Create(param, registry);
  EXPECT_TRUE(net.ok()) << net.status().message();
  if (!net.ok()) return counts;
  for (const auto& layer : (*net)->layers()) {
    ++counts.layers_of_type[layer->type()];
    for (size_t b = 0; b < layer->blobs().size(); ++b) {
      (layer->IsLocalState(static_cast<int>(b)) ? counts.local_state : counts.learned) += layer->blobs()[b]->count();
    }
    if (std::string(layer->type()) == "SoftmaxWithLoss") counts.loss_weights.push_back(layer->loss(0));
  }
  EXPECT_EQ(counts.learned + counts.local_state, (*net)->num_learnable_scalars());
  return counts;
}

// Fails unless the model has `expected` layers of each type named there.
void ExpectLayersOfType(const Counts& c, const std::map<std::string, int>& expected) {
  for (const auto& [type, n] : expected) EXPECT_EQ(n, c.layers_of_type.at(type)) << type;
}

TEST(ZooModelsTest, ResNet50HasThePublishedParameterCount) {
  const Counts c = CountModel("resnet50_train_val.prototxt");
  // 25,557,032 with each BatchNorm's scale and shift as its Scale layer's blobs.
  EXPECT_EQ(25557032, c.learned);
  ExpectLayersOfType(c, {{"Convolution", 53}, {"BatchNorm", 53}, {"Scale", 53}, {"Eltwise", 16}});
  // Mean and variance per channel (26,560 channels) plus one count per
  // BatchNorm layer.
  EXPECT_EQ(2 * 26560 + 53, c.local_state);
  EXPECT_EQ(std::vector<float>{1.0f}, c.loss_weights);
}

TEST(ZooModelsTest, GoogLeNetHasCaffesParameterCountAndWeightedAuxiliaryLosses) {
  const Counts c = CountModel("googlenet_train_val.prototxt");
  // BVLC GoogLeNet with its two auxiliary classifiers, as Caffe counts the
  // blobs of bvlc_googlenet.caffemodel.
  EXPECT_EQ(13378280, c.learned);
  EXPECT_EQ(0, c.local_state);
  ExpectLayersOfType(c, {{"Concat", 9}, {"LRN", 2}});
  EXPECT_EQ((std::vector<float>{0.3f, 0.3f, 1.0f}), c.loss_weights);
}

// The benchmark's nets (bench: nereus_bench train) as published: VGG-19
// (the paper's 143,667,240), CaffeNet (bvlc_reference_caffenet's
// 60,965,224) and Caffe's CIFAR-10 full (89,578).
TEST(ZooModelsTest, Vgg19CaffeNetAndCifar10FullHaveThePublishedParameterCounts) {
  const Counts vgg = CountModel("vgg19_train_val.prototxt");
  EXPECT_EQ(143667240, vgg.learned);
  ExpectLayersOfType(vgg, {{"Convolution", 16}, {"Pooling", 5}, {"InnerProduct", 3}});
  const Counts caffenet = CountModel("caffenet_train_val.prototxt");
  EXPECT_EQ(60965224, caffenet.learned);
  EXPECT_EQ(2, caffenet.layers_of_type.at("LRN"));
  const Counts cifar = CountModel("cifar10_full_train_test.prototxt");
  EXPECT_EQ(89578, cifar.learned);
  EXPECT_EQ(2, cifar.layers_of_type.at("LRN"));
  for (const Counts* c : {&vgg, &caffenet, &cifar}) EXPECT_EQ(std::vector<float>{1.0f}, c->loss_weights);
}

// The model with a small crop, a batch of 2, the final 7x7 average pooling
// made global, reading `lmdb`; written as prototxt to `path`.
void WriteSmallVariant(const std::string& file, const std::string& final_pool, int crop, const std::string& lmdb,
                       const std::string& path) {
  caffe::NetParameter param;
  Status st = ReadNetParameterFromTextFile(Model(file), &param);
  ASSERT_TRUE(st.ok()) << st.message();
  bool found_pool = false;
  for (auto& layer : *param.mutable_layer()) {
    if (layer.type() == "Data") {
      layer.mutable_transform_param()->set_crop_size(crop);
      layer.mutable_data_param()->set_source(lmdb);
      layer.mutable_data_param()->set_batch_size(2);
    }
    if (layer.name() == final_pool) {
      layer.mutable_pooling_param()->clear_kernel_size();
      layer.mutable_pooling_param()->clear_stride();
      layer.mutable_pooling_param()->set_global_pooling(true);
      found_pool = true;
    }
  }
  ASSERT_TRUE(found_pool) << final_pool;
  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(param, &text));
  test::WriteText(path, text);
}

// Trains the small variant 2 iterations standalone, then as 2 workers x 2
// servers. Both must finish with a finite positive loss; in the job both
// workers must hold the servers' learned weights, bit for bit, and (with
// BatchNorm) each its own statistics. Returns how many BatchNorm blobs
// differ between the two workers.
int TrainTwoIterations(const std::string& file, const std::string& final_pool, int crop) {
  TempDir dir;
  const std::string lmdb = dir.File("images_lmdb");
  test::WriteRandomImageLmdb(lmdb, 8, 3, crop + 8, 1000, 5);
  const std::string net = dir.File("net.prototxt");
  WriteSmallVariant(file, final_pool, crop, lmdb, net);
  test::WriteText(dir.File("solver.prototxt"), "net: \"" + net +
                                                   "\"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0001\n"
                                                   "lr_policy: \"fixed\"\ndisplay: 1\nmax_iter: 2\nrandom_seed: 1\n"
                                                   "snapshot_after_train: false\n");
  const int code =
      test::RunToExit({BinaryPath("nereus_worker"), "--standalone", "--solver=" + dir.File("solver.prototxt"),
                       "--summary_json=" + dir.File("standalone.json")},
                      dir.File("standalone.log"), std::chrono::seconds(240));
  EXPECT_EQ(0, code) << ReadFile(dir.File("standalone.log"));
  if (code != 0) return -1;
  // The losses Caffe would print, for the record.
  const std::string log = ReadFile(dir.File("standalone.log"));
  for (size_t at = log.find("Iteration "); at != std::string::npos; at = log.find("Iteration ", at + 1)) {
    const size_t end = std::min(log.find(", lr", at), log.find('\n', at));
    std::printf("%s standalone: %s\n", file.c_str(), log.substr(at, end - at).c_str());
  }
  const std::string standalone = ReadFile(dir.File("standalone.json"));
  EXPECT_EQ(2, test::JsonNumber(standalone, "iterations")) << standalone;
  const double standalone_loss = test::JsonNumber(standalone, "train_loss");
  EXPECT_TRUE(std::isfinite(standalone_loss) && standalone_loss > 0) << standalone;

  LocalCluster cluster(TwoWorkerTrainJob(dir, dir.File("solver.prototxt")), dir);
  std::string report;
  const bool exited = cluster.WaitAll(std::chrono::seconds(300), &report);
  EXPECT_TRUE(exited) << report;
  if (!exited) return -1;
  for (auto c : cluster.codes()) EXPECT_EQ(c, 0) << report;
  const std::string w0_json = ReadFile(dir.File("w0.json"));
  EXPECT_EQ(2, test::JsonNumber(w0_json, "iterations")) << w0_json;
  EXPECT_EQ(2, test::JsonNumber(w0_json, "workers")) << w0_json;
  const double job_loss = test::JsonNumber(w0_json, "train_loss");
  EXPECT_TRUE(std::isfinite(job_loss) && job_loss > 0) << w0_json;
  // Both workers hold the servers' learned weights; only BatchNorm
  // statistics (local to each worker) may differ.
  const auto w0 = ReadWeights(dir.File("w0.caffemodel"));
  const auto w1 = ReadWeights(dir.File("w1.caffemodel"));
  EXPECT_EQ(w0.size(), w1.size());
  int compared = 0, bn_differing = 0;
  for (const auto& [name, values] : w0) {
    if (w1.count(name) == 0) continue;
    for (float v : values) EXPECT_TRUE(std::isfinite(v)) << name;
    if (name.rfind("bn", 0) == 0) {
      bn_differing += values != w1.at(name) ? 1 : 0;
      continue;
    }
    EXPECT_TRUE(test::BytesEqual(values, w1.at(name), name));
    ++compared;
  }
  EXPECT_GT(compared, 100);
  return bn_differing;
}

TEST(ZooModelsTest, ResNet50TrainsStandaloneAndAsTwoWorkersTwoServers) {
  // Each worker's means and variances are of its own shard: all 2 x 53
  // differ between the workers (a copy shared through the servers would not);
  // the 53 counts agree (both workers ran 2 forwards).
  EXPECT_EQ(2 * 53, TrainTwoIterations("resnet50_train_val.prototxt", "pool5", 64));
}

TEST(ZooModelsTest, GoogLeNetTrainsStandaloneAndAsTwoWorkersTwoServers) {
  EXPECT_EQ(0, TrainTwoIterations("googlenet_train_val.prototxt", "pool5/7x7_s1", 112));
}

}  // namespace
}  // namespace test
}  // namespace nereus

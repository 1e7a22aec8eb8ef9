// The base of the data layers' test fixtures (Data, ImageData, WindowData,
// HDF5Data): a temporary folder for the sources, a random engine seeded as
// the fixture says, the two tops data_ and label_, and a layer set up and
// run on them.
#ifndef NEREUS_TESTS_SUPPORT_DATA_LAYER_FIXTURE_H_
#define NEREUS_TESTS_SUPPORT_DATA_LAYER_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "tests/support/process_util.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/layer.h"

namespace nereus {
namespace test {

class DataLayerFixture : public ::testing::Test {
 protected:
  explicit DataLayerFixture(uint32_t seed) : rng_(seed) {}

  // Sets `layer` up (no bottoms) with the tops data_ and label_, drawing
  // from rng_.
  Status SetUpLayer(Layer* layer) {
    layer->set_rng(&rng_);
    return layer->SetUp({}, {&data_, &label_});
  }
  // One forward pass: its labels (whatever the pass's error).
  std::vector<int> ForwardLabels(Layer* layer) {
    layer->Forward({}, {&data_, &label_});
    std::vector<int> labels;
    for (int i = 0; i < label_.count(); ++i) labels.push_back(static_cast<int>(label_.cpu_data()[i]));
    return labels;
  }
  // The same for a pass that must succeed.
  std::vector<int> ForwardLabelsOk(Layer* layer) {
    std::vector<int> labels = ForwardLabels(layer);
    EXPECT_TRUE(layer->forward_error().ok()) << layer->forward_error();
    return labels;
  }

  TempDir dir_;
  std::mt19937 rng_;
  Blob data_;
  Blob label_;
};

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_DATA_LAYER_FIXTURE_H_

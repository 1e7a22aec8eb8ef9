// TimeNet (Caffe's `caffe time`): which layers are timed in which order with
// the clock interface a GPU's event clock implements (checked here with a
// clock that records its calls), averages and totals exactly as defined,
// and the report and JSON naming every layer.
#include "worker/trainer/net_timer.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/support/net_test_util.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {
namespace {

// x -> ip1 -> relu1 -> ip2 -> loss, with labels.
const char* kNet = R"(
name: "tiny"
layer { name: "data" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 4 dim: 6 } shape { dim: 4 } } }
layer { name: "ip1" type: "InnerProduct" bottom: "x" top: "h"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "relu1" type: "ReLU" bottom: "h" top: "h" }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "y" bottom: "label" top: "loss" }
)";

std::unique_ptr<Net> TinyNet() {
  auto net = test::TrainNetFromText(kNet, "tiny.prototxt");
  EXPECT_TRUE(net.ok()) << net.status();
  return std::move(net).value();
}

// Records every call; slot s's time of pass k is (k + 1) * (s + 1) ms.
class RecordingClock : public LayerClock {
 public:
  explicit RecordingClock(std::vector<std::string>* calls) : calls_(calls) {}
  void Start(int slot) override { calls_->push_back("start " + std::to_string(slot)); }
  void Stop(int slot) override { calls_->push_back("stop " + std::to_string(slot)); }
  StatusOr<std::vector<double>> Read() override {
    calls_->push_back("read");
    ++reads_;
    std::vector<double> ms(10);
    for (int s = 0; s < 10; ++s) ms[s] = reads_ * (s + 1.0);
    return ms;
  }

 private:
  std::vector<std::string>* calls_;
  int reads_ = 0;
};

TEST(NetTimerTest, EveryLayerIsTimedInPassOrderAndTheTotalsAreTheLayersSums) {
  auto net = TinyNet();
  ASSERT_EQ(net->num_layers(), 5);
  std::vector<std::string> calls;
  auto timing = TimeNet(net.get(), 2, std::make_unique<RecordingClock>(&calls));
  ASSERT_TRUE(timing.ok()) << timing.status();
  // Slots: forward l = l, backward l = 5 + l. The first pass is not timed;
  // each timed pass runs forward 0..4, then backward 4..0 (every layer, the
  // Input layer's a no-op, as Caffe's time does), then one Read.
  std::vector<std::string> pass;
  for (int l = 0; l < 5; ++l) pass.insert(pass.end(), {"start " + std::to_string(l), "stop " + std::to_string(l)});
  for (int l = 4; l >= 0; --l)
    pass.insert(pass.end(), {"start " + std::to_string(5 + l), "stop " + std::to_string(5 + l)});
  pass.push_back("read");
  std::vector<std::string> expected = pass;
  expected.insert(expected.end(), pass.begin(), pass.end());
  EXPECT_EQ(calls, expected);

  const NetTiming& t = *timing;
  EXPECT_EQ(t.net, "tiny");
  EXPECT_EQ(t.device, "CPU");
  EXPECT_EQ(t.iterations, 2);
  ASSERT_EQ(t.layers.size(), 5u);
  const char* names[] = {"data", "ip1", "relu1", "ip2", "loss"};
  const char* types[] = {"Input", "InnerProduct", "ReLU", "InnerProduct", "SoftmaxWithLoss"};
  double forward = 0, backward = 0;
  for (int l = 0; l < 5; ++l) {
    EXPECT_EQ(t.layers[l].name, names[l]);
    EXPECT_EQ(t.layers[l].type, types[l]);
    // Passes 1 and 2 read (1 and 2) x (slot + 1): the average is 1.5 x.
    EXPECT_EQ(t.layers[l].forward_ms, 1.5 * (l + 1));
    EXPECT_EQ(t.layers[l].backward_ms, 1.5 * (5 + l + 1));
    forward += t.layers[l].forward_ms;
    backward += t.layers[l].backward_ms;
  }
  EXPECT_EQ(t.forward_ms, forward);
  EXPECT_EQ(t.backward_ms, backward);
  EXPECT_EQ(t.peak_device_bytes, 0u);

  const std::string report = FormatNetTiming(t);
  EXPECT_NE(report.find("Timing net tiny on CPU: average over 2 pass(es)\n"), std::string::npos) << report;
  EXPECT_NE(report.find("relu1  forward: 4.5000 ms.\nrelu1  backward: 12.0000 ms.\n"), std::string::npos) << report;
  EXPECT_NE(report.find("Average Forward pass: 22.5000 ms.\nAverage Backward pass: 60.0000 ms.\n"), std::string::npos)
      << report;
  const std::string json = NetTimingJson(t);
  EXPECT_EQ(json.rfind("{\"net\": \"tiny\", \"device\": \"CPU\", \"iterations\": 2, \"forward_ms\": 22.5000, "
                       "\"backward_ms\": 60.0000, ",
                       0),
            0u)
      << json;
  EXPECT_NE(json.find("{\"name\": \"ip2\", \"type\": \"InnerProduct\", \"forward_ms\": 6.0000, \"backward_ms\": "
                      "13.5000}"),
            std::string::npos)
      << json;
}

TEST(NetTimerTest, TheHostClockTimesARealNetAndChangesNoWeight) {
  auto net = TinyNet();
  std::vector<std::vector<float>> before;
  for (Blob* b : net->learnable_params()) before.emplace_back(b->cpu_data(), b->cpu_data() + b->count());
  auto timing = TimeNet(net.get(), 3);
  ASSERT_TRUE(timing.ok()) << timing.status();
  double forward = 0;
  for (const LayerTiming& l : timing->layers) {
    EXPECT_GE(l.forward_ms, 0.0) << l.name;
    EXPECT_GE(l.backward_ms, 0.0) << l.name;
    forward += l.forward_ms;
  }
  EXPECT_EQ(timing->forward_ms, forward);
  EXPECT_GT(timing->wall_ms, 0.0);
  size_t i = 0;
  for (Blob* b : net->learnable_params()) {
    EXPECT_EQ(std::vector<float>(b->cpu_data(), b->cpu_data() + b->count()), before[i++]);
  }
}

TEST(NetTimerTest, NoIterationsIsAnError) {
  auto net = TinyNet();
  auto timing = TimeNet(net.get(), 0);
  ASSERT_FALSE(timing.ok());
  EXPECT_EQ(timing.status().message(), "--iterations must be > 0 to time a net, got 0");
}

}  // namespace
}  // namespace nereus

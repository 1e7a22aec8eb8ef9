// The simulator's event logic on a 3-layer job worked out by hand.
//
// Layers 0, 1, 2: forward 1 s each, backward 2 s each; one tensor each of
// 1000, 1000 and 2000 bytes (one partition each). Two hosts: the ShardMap
// puts layer 2 (largest first) on server 0 and layers 0 and 1 on server 1.
// Links carry 1000 bytes/s each way, no latency, no per-message cost, no
// apply cost. Worker h and server h share host h.
#include "bench/sim/simulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

#include "bench/harness/emulated_worker.h"
#include "common/net/shard_map.h"

namespace nereus {
namespace bench {
namespace {

std::vector<SimLayer> ThreeLayers() {
  std::vector<SimLayer> layers(3);
  const uint64_t elements[3] = {250, 250, 500};
  for (int l = 0; l < 3; ++l) {
    layers[l].forward_s = 1;
    layers[l].backward_s = 2;
    layers[l].tensor_elements = {elements[l]};
  }
  return layers;
}

SimOptions TwoHosts(Schedule s) {
  SimOptions o;
  o.hosts = 2;
  o.schedule = s;
  o.link_bytes_per_s = 1000;
  o.partition_bytes = 1 << 20;
  o.iterations = 2;
  return o;
}

TEST(SimulatorTest, PlacementAssumedByTheHandWorkedExamples) {
  auto map = ShardMap::Build({250, 250, 500}, 1 << 20, 2).value();
  EXPECT_EQ(map.partitions(2)[0].server, 0);
  EXPECT_EQ(map.partitions(0)[0].server, 1);
  EXPECT_EQ(map.partitions(1)[0].server, 1);
}

// wfbp: each layer's push leaves when its backward ends.
//  t=0..3 forward, backward of layer 2 ends at 5: both push layer 2 to
//   server 0; worker 0's is local (there at 5), worker 1's holds uplink 1
//   and downlink 0 for 2 s (there at 7).
//  t=7 backward of layer 1 ends: worker 0 pushes it to server 1 (uplink 0
//   7..8, there at 8); worker 1's is local. Server 0 has both layer-2
//   gradients at 7: worker 0 gets them at once, worker 1's copy queues on
//   uplink 0 behind worker 0's push: 8..10.
//  t=8 server 1 has both layer-1 gradients: worker 1 at once, worker 0 over
//   uplink 1 (free since 7): 8..9.
//  t=9 backward of layer 0 ends; worker 0's push waits for uplink 0 (busy
//   until 10): 10..11; worker 1's is local. Both wait for layer 0.
//  t=11 server 1 applies layer 0: worker 1 starts iteration 1 at 11,
//   worker 0 gets it over uplink 1, 11..12, and starts at 12.
TEST(SimulatorTest, WfbpThreeLayersByHand) {
  auto r = Simulate(ThreeLayers(), TwoHosts(Schedule::kWfbp)).value();
  ASSERT_EQ(r.starts.size(), 2u);
  ASSERT_EQ(r.starts[0].size(), 3u);
  EXPECT_DOUBLE_EQ(r.starts[0][0], 0);
  EXPECT_DOUBLE_EQ(r.starts[0][1], 12);
  EXPECT_DOUBLE_EQ(r.starts[1][0], 0);
  EXPECT_DOUBLE_EQ(r.starts[1][1], 11);
  EXPECT_DOUBLE_EQ(r.compute_s, 9);
}

// sequential: all pushes leave at 9, when the whole backward ends, in layer
// order, and the next forward waits for every layer.
//  Worker 0: layer 0 to server 1 on uplink 0 9..10, layer 1 10..11, layer 2
//   local. Worker 1: layers 0 and 1 local, layer 2 to server 0 on uplink 1
//   9..11.
//  t=10 server 1 has layer 0 from both: worker 1 at once; worker 0's copy
//   waits for uplink 1 (busy until 11): 11..12.
//  t=11 server 0 has layer 2 from both: worker 0 at once, worker 1's copy on
//   uplink 0 11..13; server 1 has layer 1: worker 1 at once, worker 0's copy
//   on uplink 1 behind layer 0's: 12..13.
//  Both have every layer at 13.
TEST(SimulatorTest, SequentialThreeLayersByHand) {
  auto r = Simulate(ThreeLayers(), TwoHosts(Schedule::kSequential)).value();
  EXPECT_DOUBLE_EQ(r.starts[0][1], 13);
  EXPECT_DOUBLE_EQ(r.starts[1][1], 13);
}

// One host: no link. Server applies cost 1 ms a byte a worker: layer 2
// applies 5..7, layer 1 7..8, layer 0 9..10; the next iteration starts at 10,
// and so does every later one, 10 s apart.
TEST(SimulatorTest, OneHostWaitsOnlyForTheApply) {
  SimOptions o = TwoHosts(Schedule::kFull);
  o.hosts = 1;
  o.apply_s_per_byte = 1e-3;
  o.iterations = 4;
  auto r = Simulate(ThreeLayers(), o).value();
  EXPECT_EQ(r.starts[0], (std::vector<double>{0, 10, 20, 30, 40}));
  EXPECT_DOUBLE_EQ(r.iteration_s, 10);
  EXPECT_DOUBLE_EQ(r.wait_s, 1);
}

// A server applies on apply_threads, as its --apply_threads: one host, no
// backward (every push at 3, when the forward ends), 1 ms a byte a worker.
// One thread: layer 2 (2000 bytes) applies 3..5, layer 1 5..6, layer 0 6..7:
// iterations 7 s apart. Two: layer 2 on thread 0, 3..5; layer 1 on thread 1,
// 3..4; layer 0 on thread 1 (free first), 4..5: 5 s apart. Efficiency is the
// compute (3 s) over the iteration.
TEST(SimulatorTest, ServerAppliesOnItsApplyThreads) {
  std::vector<SimLayer> layers = ThreeLayers();
  for (SimLayer& l : layers) l.backward_s = 0;
  SimOptions o = TwoHosts(Schedule::kFull);
  o.hosts = 1;
  o.apply_s_per_byte = 1e-3;
  o.iterations = 3;
  auto one = Simulate(layers, o).value();
  EXPECT_EQ(one.starts[0], (std::vector<double>{0, 7, 14, 21}));
  EXPECT_DOUBLE_EQ(ScalingEfficiency(one), 3.0 / 7);
  o.apply_threads = 2;
  auto two = Simulate(layers, o).value();
  EXPECT_EQ(two.starts[0], (std::vector<double>{0, 5, 10, 15}));
  EXPECT_DOUBLE_EQ(two.iteration_s, 5);
  EXPECT_DOUBLE_EQ(ScalingEfficiency(two), 3.0 / 5);
  // HybComm is told all of a server's threads: 1 / (1 ms x 1 worker) x 2.
  EXPECT_DOUBLE_EQ(HybCommRatesOf(o).apply_bytes_per_s, 2000);
  o.apply_threads = 0;
  EXPECT_NE(Simulate(layers, o).status().message().find("apply_threads must be >= 1"), std::string::npos);
}

// Scaling efficiency is against compute alone, whatever the host count: a
// job that never waits is at 100%, one waiting as long as it computes at 50%.
TEST(SimulatorTest, ScalingEfficiencyIsAgainstComputeAlone) {
  SimResult r;
  r.compute_s = 2;
  r.iteration_s = 2;
  EXPECT_DOUBLE_EQ(ScalingEfficiency(r), 1);
  r.iteration_s = 4;
  EXPECT_DOUBLE_EQ(ScalingEfficiency(r), 0.5);
  r.iteration_s = 0;
  EXPECT_DOUBLE_EQ(ScalingEfficiency(r), 0);
  // One host with its own server and no costs: nothing to wait for.
  SimOptions o = TwoHosts(Schedule::kFull);
  o.hosts = 1;
  EXPECT_DOUBLE_EQ(ScalingEfficiency(Simulate(ThreeLayers(), o).value()), 1);
}

// Priority and credit, on one host (no link) where every message costs
// alpha = 1 s and backward takes 0.5 s a layer, credit 1000 bytes:
//  t=3.5 layer 2 (2000 bytes, more than the credit: it goes alone) is sent,
//   there at 4.5, applied, its weights and its ack back at 5.5.
//  t=4 layer 1 and t=4.5 layer 0 queue behind the credit. At 5.5 the credit
//   comes back and layer 0 overtakes layer 1: sent 5.5, weights at 7.5, when
//   iteration 1 starts; layer 1 is sent at 7.5, its weights are back at 9.5
//   (forward then waits a second for them).
//  Iteration 1: forward 7.5..11.5 (with that wait), layer 2 sent at 12 (ack
//   at 14), layers 1 and 0 queue; layer 0 sent at 14, back at 16.
// wfbp sends each at once: layer 0 at 4.5, back at 6.5; then 6.5 + 3 + 1.5
// = 11 for its next push, back at 13.
TEST(SimulatorTest, PriorityOvertakesUnderCreditByHand) {
  std::vector<SimLayer> layers = ThreeLayers();
  for (SimLayer& l : layers) l.backward_s = 0.5;
  SimOptions o = TwoHosts(Schedule::kPriority);
  o.hosts = 1;
  o.alpha_s = 1;
  o.credit_bytes = 1000;
  auto priority = Simulate(layers, o).value();
  EXPECT_EQ(priority.starts[0], (std::vector<double>{0, 7.5, 16}));
  o.schedule = Schedule::kWfbp;
  auto fifo = Simulate(layers, o).value();
  EXPECT_EQ(fifo.starts[0], (std::vector<double>{0, 6.5, 13}));
}

// Two layers of 1 s forward and 2 s backward: layer 0 a 250-float tensor
// through the servers, layer 1 an SFB weight of 10 x 20 with 5 factor rows.
std::vector<SimLayer> TwoLayersOneSfb() {
  std::vector<SimLayer> layers(2);
  for (SimLayer& l : layers) {
    l.forward_s = 1;
    l.backward_s = 2;
  }
  layers[0].tensor_elements = {250};
  layers[1].tensor_elements = {200};
  layers[1].sfb = true;
  layers[1].sfb_rows = 10;
  layers[1].sfb_cols = 20;
  layers[1].sfb_factor_rows = 5;
  return layers;
}

// Sufficient factors, by hand. Two hosts, wfbp, links 1000 bytes/s, layer 0
// a tensor of 250 floats (1000 bytes; placed on server 0), layer 1 a 10 x 20
// weight sent as factors of K = 5 rows: 4 x 5 x (10 + 20) = 600 bytes to
// the other worker; its rebuild is 2 K P M N = 2 x 5 x 2 x 10 x 20 = 4000
// FLOPs at 1000 FLOP/s, 4 s (the SGD step free).
//  t=4 backward of layer 1 ends: each worker counts its own factors and
//   sends them to the other, 4..4.6; at 4.6 each has both and rebuilds,
//   4.6..8.6.
//  t=6 backward of layer 0 ends: worker 0's push is local, worker 1's holds
//   uplink 1 6..7; server 0 applies at 7, worker 0 has layer 0 at 7, worker 1
//   over uplink 0 at 8.
//  Iteration 1: worker 0 starts at 7 and waits for layer 1 until 8.6;
//   worker 1 starts at 8 and does not wait (forward of layer 1 at 9).
//  Its factors: worker 0's leave at 11.6 (backward ends), there at 12.2;
//   worker 1's at 12, there at 12.6. Rebuilds 12.2..16.2 (worker 1) and
//   12.6..16.6 (worker 0). Layer 0: worker 0 pushes at 13.6 (local),
//   worker 1 at 14 (uplink 14..15); applied at 15: worker 0 starts
//   iteration 2 at 15, worker 1 at 16.
TEST(SimulatorTest, SufficientFactorsByHand) {
  std::vector<SimLayer> layers = TwoLayersOneSfb();
  EXPECT_EQ(ShardMap::Build({250, 200}, 1 << 20, 2).value().partitions(0)[0].server, 0);
  SimOptions o = TwoHosts(Schedule::kWfbp);
  o.sfb_flops_per_s = 1000;
  auto r = Simulate(layers, o).value();
  EXPECT_EQ(r.starts[0], (std::vector<double>{0, 7, 15}));
  EXPECT_EQ(r.starts[1], (std::vector<double>{0, 8, 16}));
  EXPECT_DOUBLE_EQ(r.iteration_s, 8);
  EXPECT_DOUBLE_EQ(r.factor_bytes_sent, 600);  // Per worker per iteration.
  EXPECT_DOUBLE_EQ(r.rebuild_s, 4);
  // Host 0 sends its factors and worker 1's weights, host 1 its factors and
  // its push: 1600 bytes each an iteration.
  EXPECT_DOUBLE_EQ(r.sent_bytes, 1600);
  // The rebuild charged at 10 rows a worker (the compute's batch) where the
  // factors sent have 5: 2 * 10 * 2 * 200 = 8000 FLOPs, 8 s; the factors'
  // bytes are the same.
  layers[1].sfb_rebuild_rows = 10;
  auto charged = Simulate(layers, o).value();
  EXPECT_DOUBLE_EQ(charged.rebuild_s, 8);
  EXPECT_DOUBLE_EQ(charged.factor_bytes_sent, 600);
  layers[1].sfb_rebuild_rows = 0;
  // An SFB layer whose first tensor is not its weight is refused.
  layers[1].sfb_cols = 21;
  EXPECT_NE(Simulate(layers, o).status().message().find("layer 1 is SFB"), std::string::npos);
}

// The rebuild on the device (the emulated cluster's --sfb_rebuild=device):
// one host, layer 1 an SFB layer of 10 x 20 with 5 factor rows, its rebuild
// 2 * 5 * 200 FLOPs at 1000 FLOP/s = 2 s, no step, no other costs. On the
// applier: its factors are in at 4 (its backward ends), rebuilt 4..6; layer
// 0's weights at 6; iterations start at 0, 6, 12, never waiting. On the
// device: the weights count as arrived at 4, and the device rebuilds before
// layer 1's forward of the next clock: iteration 1 runs layer 0 6..7, the
// rebuild and layer 1 7..10, the backward 10..14: 8 s, of which 6 compute.
TEST(SimulatorTest, RebuildOnTheDeviceHoldsItBeforeTheNextForward) {
  std::vector<SimLayer> layers = TwoLayersOneSfb();
  SimOptions o = TwoHosts(Schedule::kFull);
  o.hosts = 1;
  o.sfb_flops_per_s = 1000;
  o.sfb_apply_s_per_byte = 0;
  auto applier = Simulate(layers, o).value();
  EXPECT_EQ(applier.starts[0], (std::vector<double>{0, 6, 12}));
  EXPECT_DOUBLE_EQ(ScalingEfficiency(applier), 1);
  o.rebuild_on_device = true;
  auto device = Simulate(layers, o).value();
  EXPECT_EQ(device.starts[0], (std::vector<double>{0, 6, 14}));
  EXPECT_DOUBLE_EQ(device.iteration_s, 8);
  EXPECT_DOUBLE_EQ(device.compute_s, 6);
  EXPECT_DOUBLE_EQ(device.rebuild_s, 2);
  EXPECT_DOUBLE_EQ(ScalingEfficiency(device), 0.75);
}

// SimLayersOf makes HybComm's choice as a job's client does: LeNet on 3
// hosts (3 workers, 3 servers, batch 32), a 1 Gbit/s link (1.25e8 B/s), the
// rebuild at 20 GFLOP/s, apply and step 0.25 ns a byte a gradient. ip1 (500 x
// 800): PS 8*400000*4/3 B, 17.07 ms on the link + 533333 B / (1 / 0.75 ns)
// = 0.4 ms; SFB 665600 B, 2.66 ms + 2*96*400000 / 20e9 = 3.84 ms of GEMM +
// 1.6 MB / 4 GB/s = 0.4 ms: as factors. ip2 (10 x 500): its factors alone,
// 261120 B, take 1.04 ms, PS 53333 B 0.21 ms: through the servers. The
// backward of the two layers below ip1 (1 ms each) hides 2 ms of its 4.24
// ms rebuild. --sfb=off keeps both there; at 1 GFLOP/s ip1's GEMM takes
// 76.8 ms, of which 2 are hidden: the servers.
TEST(SimulatorTest, SimLayersOfMakesHybCommsChoice) {
  const ModelSpec lenet = ModelByName("lenet").value();
  const std::vector<double> t(lenet.layers.size(), 0.001);
  SimOptions o;
  o.hosts = 3;
  o.link_bytes_per_s = 1.25e8;
  o.sfb_flops_per_s = 20e9;
  o.apply_s_per_byte = 0.25e-9;
  const HybCommRates rates = HybCommRatesOf(o);
  EXPECT_DOUBLE_EQ(rates.link_bytes_per_s, 1.25e8);
  EXPECT_DOUBLE_EQ(rates.rebuild_flops_per_s, 20e9);
  EXPECT_DOUBLE_EQ(rates.update_bytes_per_s, 4e9);
  EXPECT_DOUBLE_EQ(rates.apply_bytes_per_s, 1 / 0.75e-9);
  std::vector<HybCommChoice> choices;
  auto layers = SimLayersOf(lenet, t, t, 3, SfbMode::kAuto, 32, rates, &choices).value();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_FALSE(layers[1].sfb);
  EXPECT_TRUE(layers[2].sfb);
  EXPECT_EQ(layers[2].sfb_rows, 500);
  EXPECT_EQ(layers[2].sfb_cols, 800);
  EXPECT_EQ(layers[2].sfb_factor_rows, 32);
  EXPECT_EQ(layers[2].tensor_elements, (std::vector<uint64_t>{400000, 500}));
  EXPECT_FALSE(layers[3].sfb);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0].layer.name, "ip1");
  EXPECT_NEAR(choices[0].sfb_hidden_s, 0.002, 1e-12);
  EXPECT_NEAR(choices[0].sfb_s, 0.0026624 + 0.00384 + 0.0004 - 0.002, 1e-12);
  EXPECT_FALSE(SimLayersOf(lenet, t, t, 3, SfbMode::kOff, 32, rates).value()[2].sfb);
  EXPECT_FALSE(SimLayersOf(lenet, t, {0.1}, 3, SfbMode::kAuto, 32, rates).ok());
  o.sfb_flops_per_s = 1e9;
  EXPECT_FALSE(SimLayersOf(lenet, t, t, 3, SfbMode::kAuto, 32, HybCommRatesOf(o)).value()[2].sfb);
  // What the options leave free costs nothing.
  const SimOptions free;
  EXPECT_EQ(HybCommRatesOf(free).rebuild_flops_per_s, std::numeric_limits<double>::infinity());
  EXPECT_EQ(HybCommRatesOf(free).apply_bytes_per_s, std::numeric_limits<double>::infinity());
}

// In a model shrunk by F the rebuild is charged at the compute's batch K,
// not the K / sqrt(F) factor rows sent: VGG19-22K at F = 256 (factors of 2
// rows), 8 hosts, every fully connected layer as factors, 3000 / 512 GFLOP/s
// (Poseidon's regime as emulated, docs/SCALING.md), the step free. fc6 is
// 256 x 1568, fc7 256 x 256, fc8 1365 x 256 (21841 / 16 rounded): 2 * 32 * 8 *
// 816384 FLOPs an iteration at 5.859375e9 FLOP/s = 71.337 ms, 16 times
// what the factors sent (2 rows) would make and, slowed 2x as the emulation's
// device, within 0.1% of the full-size rebuild on a Titan X-class GPU (2 * 32
// * 8 * 4096 * 51025 / 3e12 = 35.67 ms, x 2).
TEST(SimulatorTest, ShrunkRebuildIsChargedAtTheFullSizeCostOverF) {
  const ModelSpec model = Shrink(ModelByName("vgg19_22k").value(), 256);
  const std::vector<double> t(model.layers.size(), 0.001);
  SimOptions o;
  o.hosts = 8;
  o.link_bytes_per_s = 1e9;
  o.partition_bytes = (1 << 20) / 256;
  o.credit_bytes = (2 << 20) / 256;
  o.iterations = 2;
  o.sfb_flops_per_s = 3000e9 / 512;
  o.sfb_apply_s_per_byte = 0;
  auto full = SimLayersOf(model, t, t, 8, SfbMode::kOn, 32, HybCommRatesOf(o)).value();
  auto sent =
      SimLayersOf(model, t, t, 8, SfbMode::kOn, 32, HybCommRatesOf(o), nullptr, RebuildCharge::kFactorsSent).value();
  const size_t fc6 = model.layers.size() - 3;
  EXPECT_EQ(full[fc6].sfb_factor_rows, 2);
  EXPECT_EQ(full[fc6].sfb_rebuild_rows, 32);
  EXPECT_EQ(sent[fc6].sfb_rebuild_rows, 2);
  const double mn = 256.0 * 1568 + 256.0 * 256 + 1365.0 * 256;
  const double charged = Simulate(full, o).value().rebuild_s;
  EXPECT_NEAR(charged, 2 * 32 * 8 * mn / o.sfb_flops_per_s, 1e-12);
  EXPECT_NEAR(Simulate(sent, o).value().rebuild_s * 16, charged, 1e-12);
  const double full_size_s = 2.0 * 32 * 8 * 4096 * (25088 + 4096 + 21841) / 3000e9;
  EXPECT_NEAR(full_size_s, 107007180800 / 3e12, 1e-15);
  EXPECT_NEAR(charged / (2 * full_size_s), 1, 1e-3);
  // HybComm prices the rebuild as charged (what auto decides on): the
  // choice's rebuild seconds are the charged GEMM's.
  std::vector<HybCommChoice> choices;
  ASSERT_TRUE(SimLayersOf(model, t, t, 8, SfbMode::kOn, 32, HybCommRatesOf(o), &choices).ok());
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_NEAR(choices[0].sfb_rebuild_s, 2 * 32 * 8 * 256.0 * 1568 / o.sfb_flops_per_s, 1e-12);
}

TEST(SimulatorTest, RejectsBadInput) {
  SimOptions o = TwoHosts(Schedule::kFull);
  o.hosts = 0;
  EXPECT_NE(Simulate(ThreeLayers(), o).status().message().find("hosts must be >= 1"), std::string::npos);
  o = TwoHosts(Schedule::kFull);
  o.link_bytes_per_s = 0;
  EXPECT_NE(Simulate(ThreeLayers(), o).status().message().find("link rate"), std::string::npos);
  EXPECT_FALSE(Simulate({}, TwoHosts(Schedule::kFull)).ok());
}

TEST(SimulatorTest, PayloadRateCountsHeaders) {
  // 1448 payload bytes in every 1514 on the wire.
  EXPECT_DOUBLE_EQ(PayloadBytesPerSecond(8), 1e6 * 1448 / 1514);
}

// The emulated device that the cluster's workers run on: what it reports as
// compute is the time the layers held it, which the simulator is then given.
// Sleeps overshoot; a deadline that runs on absorbs an overshoot, and the
// next layer must not count it again (it did: on ResNet-50's 322 layer
// calls the workers reported 3% more compute than their iterations took).
TEST(EmulatedDeviceTest, CountsEachOvershootOnceAndRestartsAfterABlockedWait) {
  using C = EmulatedDevice::Clock;
  using std::chrono::microseconds;
  const C::time_point t0{};
  auto at = [&](int us) { return t0 + microseconds(us); };
  EmulatedDevice d;
  // Layer A, 1000 us from 0; its sleep returns 300 us late.
  EXPECT_EQ(d.Begin(1e-3, at(0), false), at(1000));
  EXPECT_DOUBLE_EQ(d.End(at(1300)), 1300e-6);
  // Layer B, ready at 1350 (not blocked): its deadline runs on from A's
  // (2000), and it is counted from where A really ended.
  EXPECT_EQ(d.Begin(1e-3, at(1350), false), at(2000));
  EXPECT_DOUBLE_EQ(d.End(at(2050)), 750e-6);
  // Layer C's sleep returns on time; it is counted from where B ended (2050).
  EXPECT_EQ(d.Begin(1e-3, at(2060), false), at(3000));
  EXPECT_DOUBLE_EQ(d.End(at(3000)), 950e-6);
  // Together exactly the elapsed 3000 us (the old count: 3350).
  // After a blocked wait the device idled: the deadline restarts at `ready`.
  EXPECT_EQ(d.Begin(2e-3, at(10000), true), at(12000));
  EXPECT_DOUBLE_EQ(d.End(at(12100)), 2100e-6);
  // Far behind its deadline (over 50 ms) without a block: restarts too.
  EXPECT_EQ(d.Begin(1e-3, at(80000), false), at(81000));
  EXPECT_DOUBLE_EQ(d.End(at(81000)), 1000e-6);
}

// --sfb_rebuild=device: the emulated device's rebuild of one SFB weight, and
// what the client is told.
TEST(EmulatedDeviceTest, RebuildOnTheDeviceTakesItsFlopsAndStepAtTheDeviceRates) {
  EmulatedRun run;
  run.batch = 32;
  run.device_gflops = 57000;
  run.device_update_gbytes = 800;
  // VGG19 fc6 (4096 x 25088), 4 workers: 2 * 128 * 102760448 = 26306674688 FLOPs / 57e12
  // = 0.000461520608 s; 411041792 bytes / 800e9 = 0.00051380224 s.
  EXPECT_NEAR(RebuildSeconds(run, 4, 4096, 25088), 0.000461520608 + 0.00051380224, 1e-11);
  // Shrunk by 16 (fc6 1024 x 6272; its factors have 8 rows): charged at the
  // batch, 32 rows, as the compute: 2 * 128 * 6422528 / 57e12, exactly the
  // full size's GEMM / 16 (a GEMM over the 8 rows sent: / 64), + 25690112 / 800e9.
  EXPECT_NEAR(RebuildSeconds(run, 4, 1024, 6272), 2.88450380351e-5 + 3.211264e-5, 1e-15);
  EXPECT_NEAR(RebuildSeconds(run, 4, 1024, 6272) - 25690112 / 800e9,
              (RebuildSeconds(run, 4, 4096, 25088) - 411041792 / 800e9) / 16, 1e-15);
  const ModelSpec vgg19 = ModelByName("vgg19").value();
  ClientOptions o;
  ClientInternals internals;
  SetRebuildOptions(run, vgg19, &o, &internals);  // Not on the device: the client is left to time this CPU.
  EXPECT_EQ(o.sfb_rebuild_gflops, 0);
  EXPECT_FALSE(internals.sfb_emulated_rebuild);
  run.rebuild_on_device = true;
  SetRebuildOptions(run, vgg19, &o, &internals);
  EXPECT_EQ(o.sfb_rebuild_gflops, 57000);
  EXPECT_EQ(o.sfb_update_gbytes, 800);
  EXPECT_TRUE(internals.sfb_emulated_rebuild);
  EXPECT_EQ(o.sfb_rebuild_on, "the emulated device");
  // Shrunk by 256 the factors have 2 rows of the batch's 32: HybComm, which
  // counts 2 (4 x 2) M N FLOPs, is told 57000 / 16 GFLOP/s, and so prices
  // fc6 (256 x 1568) at what RebuildSeconds charges for it.
  const ModelSpec shrunk = Shrink(vgg19, 256);
  EXPECT_DOUBLE_EQ(FactorRowsPerBatch(shrunk, 32), 1.0 / 16);
  EXPECT_DOUBLE_EQ(FactorRowsPerBatch(vgg19, 32), 1);
  ClientOptions os;
  SetRebuildOptions(run, shrunk, &os, &internals);
  EXPECT_DOUBLE_EQ(os.sfb_rebuild_gflops, 57000.0 / 16);
  EXPECT_NE(os.sfb_rebuild_on.find("the emulated device"), std::string::npos);
  EXPECT_NEAR(2.0 * 4 * 2 * 256 * 1568 / (os.sfb_rebuild_gflops * 1e9) + 4.0 * 256 * 1568 / 800e9,
              RebuildSeconds(run, 4, 256, 1568), 1e-15);
}

}  // namespace
}  // namespace bench
}  // namespace nereus

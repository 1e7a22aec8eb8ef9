// ClientParameterSync through a device staging (HostStaging: the CPU
// implementation of the interface the CUDA staging implements) in a real job:
// 1 server (a process) and the test as its one worker. The client then reads
// and writes the host mirrors and the staging moves every layer's gradients
// and weights between them and the net, so the final weights equal the plain
// path's bit for bit only if every copy happened, in time, in order. A copy
// that fails stops the training with an error naming the layer. And the
// runner's choice of staging (StagingForDevice), with a stand-in device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nereus/client.h"
#include "tests/support/bytes_equal.h"
#include "tests/support/fixtures.h"
#include "tests/support/net_test_util.h"
#include "tests/support/process_util.h"
#include "tests/support/status_util.h"
#include "tests/support/tiny_train_job.h"
#include "tests/support/train_test_util.h"
#include "worker/bridge/client_parameter_sync.h"
#include "worker/bridge/host_staging.h"
#include "worker/bridge/trainer_runner.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace {

using test::BytesEqual;
using test::TempDir;

struct JobRun {
  Status status;                            // Of the training (Step, then Drain).
  Status drain;                             // Of the Drain after Step.
  std::vector<std::vector<float>> initial;  // The learnable parameters before training.
  std::vector<std::vector<float>> final;    // And after.
  std::vector<int> sfb_tensors;             // The client's choice (Client::sfb_tensors()).
  int64_t sfb_rebuilds = 0;                 // Updates the bridge rebuilt from factors.
  std::vector<bool> gradient_unused;        // Per learnable parameter (Net::param_gradient_unused).
  std::vector<double> diff_abs_sum;         // Per learnable parameter, after training.
};

std::vector<std::vector<float>> Weights(const Solver& solver) {
  std::vector<std::vector<float>> out;
  for (Blob* b : solver.net()->learnable_params()) out.emplace_back(b->cpu_data(), b->cpu_data() + b->count());
  return out;
}

// `iterations` of the tiny solver as the one worker of a 1-server job, through
// `staging` (null: the plain path). `layer_of` (may be null) receives the
// train net's index of `layer_name` before training starts. Every tensor goes
// through the server unless `sfb` says otherwise (auto times the link, so the
// two runs a test compares could choose apart).
void RunJob(const std::string& solver_file, HostStaging* staging, int iterations, JobRun* run,
            const std::string& layer_name = "", std::atomic<int>* layer_of = nullptr, const std::string& timeline = "",
            SfbMode sfb = SfbMode::kOff, const std::string& sfb_schedule = "") {
  TempDir dir;
  test::LocalCluster cluster(test::OneServerAndTheTestAsWorker(), dir);
  std::unique_ptr<Solver> solver;  // Outlives the client, whose pulls write into its blobs.
  ClientOptions options = test::TestWorkerOptions(cluster.coordinator_address(), 0);
  options.timeline = timeline;
  options.sfb = sfb;
  options.sfb_schedule = sfb_schedule;
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  {
    ClientParameterSync sync(client->get());  // Destroyed before the client (it drains the staging).
    sync.set_staging(staging);
    caffe::SolverParameter param;
    ASSERT_TRUE(ReadSolverParameterFromTextFile(solver_file, &param).ok());
    param.set_display(0);
    auto created = Solver::Create(param, DefaultLayerRegistry(), &sync);
    ASSERT_TRUE(created.ok()) << created.status();
    solver = std::move(created).value();
    sync.set_net(solver->net());
    if (layer_of != nullptr) *layer_of = solver->net()->layer_index(layer_name);
    run->initial = Weights(*solver);
    run->status = solver->Step(iterations);
    run->drain = sync.Drain();  // Returns, also after a failure.
    if (run->status.ok()) run->status = run->drain;
    if (run->status.ok()) run->final = Weights(*solver);
    run->sfb_tensors = (*client)->sfb_tensors();
    run->sfb_rebuilds = sync.sfb_rebuilds();
    for (size_t p = 0; p < solver->net()->learnable_params().size(); ++p) {
      const Blob* b = solver->net()->learnable_params()[p];
      double sum = 0;
      for (int i = 0; i < b->count(); ++i) sum += std::abs(b->cpu_diff()[i]);
      run->gradient_unused.push_back(solver->net()->param_gradient_unused(static_cast<int>(p)));
      run->diff_abs_sum.push_back(sum);
    }
  }
  if (run->status.ok()) {
    Status st = (*client)->Finish();
    ASSERT_TRUE(st.ok()) << st;
    std::string report;
    ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
  }
  client->reset();  // Leaves the job (a failed run: as a dead worker).
}

TEST(StagingJobTest, WeightsEqualThePlainPathBitForBit) {
  TempDir dir;
  const std::string solver = test::WriteTinyJob(dir, 32, 6);
  JobRun plain, staged;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, nullptr, 6, &plain));
  ASSERT_TRUE(plain.status.ok()) << plain.status;

  std::atomic<int> copies_to_host{0}, copies_to_device{0};
  HostStagingOptions options;  // host_computes: a CPU net.
  options.before_copy = [&](int, bool to_host) {
    ++(to_host ? copies_to_host : copies_to_device);
    return Status::OK();
  };
  HostStaging staging(options);
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, &staging, 6, &staged, "", nullptr, dir.File("timeline.json")));
  ASSERT_TRUE(staged.status.ok()) << staged.status;

  ASSERT_EQ(plain.final.size(), 6u);  // conv1, ip1, ip2: weights and biases.
  for (size_t p = 0; p < plain.final.size(); ++p) {
    EXPECT_TRUE(BytesEqual(staged.initial[p], plain.initial[p], "initial param " + std::to_string(p)));
    EXPECT_TRUE(BytesEqual(staged.final[p], plain.final[p], "param " + std::to_string(p)));
    EXPECT_FALSE(BytesEqual(plain.final[p], plain.initial[p])) << "param " << p << " did not train";
  }
  // Every layer's gradients of every iteration went through the staging (7
  // layers x 6), and the weights of the 3 layers with parameters for clocks
  // 0..6 (the last by Drain).
  EXPECT_EQ(copies_to_host.load(), 7 * 6);
  EXPECT_EQ(copies_to_device.load(), 3 * 7);

  // The timeline has each copy on its lane (6: device to host, 7: host to
  // device), per layer with parameters and clock; none for the others.
  const std::string json = test::ReadFile(dir.File("timeline.json"));
  std::map<std::string, std::set<int64_t>> clocks;  // "<name> <tid>" -> clocks
  const std::regex span(
      R"re(\{"name": "([^"]+)", "ph": "X", "pid": \d+, "tid": (\d+), "ts": \d+, "dur": \d+, "args": \{"clock": (\d+)\}\})re");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), span); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    if (name.rfind("d2h ", 0) == 0 || name.rfind("h2d ", 0) == 0) {
      clocks[name + " " + (*it)[2].str()].insert(std::stoll((*it)[3]));
    }
  }
  const std::set<int64_t> pushed = {0, 1, 2, 3, 4, 5}, pulled = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(clocks, (std::map<std::string, std::set<int64_t>>{{"d2h conv1 6", pushed},
                                                              {"d2h ip1 6", pushed},
                                                              {"d2h ip2 6", pushed},
                                                              {"h2d conv1 7", pulled},
                                                              {"h2d ip1 7", pulled},
                                                              {"h2d ip2 7", pulled}}))
      << json.substr(0, 2000);
  EXPECT_NE(json.find("\"device-to-host copy\""), std::string::npos);
  EXPECT_NE(json.find("\"host-to-device copy\""), std::string::npos);
}

// Sufficient factors through the staging (StagedFactors): ip1's and ip2's
// weights leave as their factors (copied off the net into mirrors) and every
// clock's update is rebuilt into the net's weights by the bridge, on the
// thread that drives the net, before the layer's next forward; the client's
// own SFB path rebuilds the same stacked factors with the same GEMM and step
// into its buffers. The weights end equal bit for bit only if every factor
// copy, every stacking and every rebuild happened, in order.
TEST(StagingJobTest, SufficientFactorsThroughTheStagingEqualThePlainSfbPath) {
  TempDir dir;
  const std::string solver = test::WriteTinyJob(dir, 32, 6);
  JobRun plain, staged;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, nullptr, 6, &plain, "", nullptr, "", SfbMode::kOn));
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  std::atomic<int> copies_to_host{0}, copies_to_device{0};
  HostStagingOptions options;
  options.before_copy = [&](int, bool to_host) {
    ++(to_host ? copies_to_host : copies_to_device);
    return Status::OK();
  };
  HostStaging staging(options);
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, &staging, 6, &staged, "", nullptr, "", SfbMode::kOn));
  ASSERT_TRUE(staged.status.ok()) << staged.status;

  // ip1/0 and ip2/0 (tensors 2 and 4: conv1's two, then ip1's two) go as factors.
  EXPECT_EQ(plain.sfb_tensors, (std::vector<int>{2, 4}));
  EXPECT_EQ(staged.sfb_tensors, (std::vector<int>{2, 4}));
  // Their updates are rebuilt from factors: the net never computes their
  // gradients (on the plain path the diffs stay all zero), while every other
  // parameter's it does; behind the staging the bridge rebuilds into those
  // diff buffers instead of buffers of its own (so they hold the last update).
  for (const JobRun* run : {&plain, &staged}) {
    EXPECT_EQ(run->gradient_unused, (std::vector<bool>{false, false, true, false, true, false}));
    for (size_t p = 0; p < run->diff_abs_sum.size(); ++p) {
      if ((p == 2 || p == 4) && run == &plain) {
        EXPECT_EQ(run->diff_abs_sum[p], 0.0) << "param " << p;
      } else {
        EXPECT_GT(run->diff_abs_sum[p], 0.0) << "param " << p;
      }
    }
  }
  ASSERT_EQ(plain.final.size(), 6u);
  for (size_t p = 0; p < plain.final.size(); ++p) {
    EXPECT_TRUE(BytesEqual(staged.initial[p], plain.initial[p], "initial param " + std::to_string(p)));
    EXPECT_TRUE(BytesEqual(staged.final[p], plain.final[p], "param " + std::to_string(p)));
    EXPECT_FALSE(BytesEqual(plain.final[p], plain.initial[p])) << "param " << p << " did not train";
  }
  // The bridge rebuilt both weights for clocks 0..5 (the last in Drain); the
  // plain path rebuilds in the client.
  EXPECT_EQ(staged.sfb_rebuilds, 2 * 6);
  EXPECT_EQ(plain.sfb_rebuilds, 0);
  // Every layer's hand-over went through the staging (7 layers x 6); the
  // weights of the 3 layers with parameters came up for clock 0 and, for
  // conv1 alone and the biases of ip1 and ip2, for clocks 1..6: 3 + 3 x 6.
  EXPECT_EQ(copies_to_host.load(), 7 * 6);
  EXPECT_EQ(copies_to_device.load(), 3 + 3 * 6);
}

// HybComm switching paths at clock boundaries (here forced: ip1 and ip2 as
// factors from clock 2, ip1 back through the server from clock 5): behind
// the staging the bridge follows each clock's path (stages factors or the
// gradient, rebuilds or uploads, computes a weight's gradient or not) and
// StagedFactors takes the server's history at a switch to factors and hands
// its own back at a switch to the server; the weights equal the plain
// path's, where the client switches alone, bit for bit.
TEST(StagingJobTest, SwitchedPathsThroughTheStagingEqualThePlainPath) {
  TempDir dir;
  const std::string solver = test::WriteTinyJob(dir, 32, 8);
  const std::string schedule = "ip1:2:sfb,ip2:2:sfb,ip1:5:ps";
  JobRun plain, staged, off;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, nullptr, 8, &plain, "", nullptr, "", SfbMode::kOff, schedule));
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  HostStaging staging{HostStagingOptions()};
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, &staging, 8, &staged, "", nullptr, "", SfbMode::kOff, schedule));
  ASSERT_TRUE(staged.status.ok()) << staged.status;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, nullptr, 8, &off));
  ASSERT_TRUE(off.status.ok()) << off.status;
  ASSERT_EQ(plain.final.size(), 6u);
  for (size_t p = 0; p < plain.final.size(); ++p)
    EXPECT_TRUE(BytesEqual(staged.final[p], plain.final[p], "param " + std::to_string(p)));
  // With one worker the factors' product is the net's own weight-gradient
  // GEMM and the server's average of one gradient is that gradient: a job
  // that switches then equals the servers' path bit for bit, so the
  // hand-overs (the server's history to the factors, the replica's weights
  // and history back) lose nothing.
  for (size_t p = 0; p < plain.final.size(); ++p)
    EXPECT_TRUE(BytesEqual(plain.final[p], off.final[p], "against the servers' path, param " + std::to_string(p)));
  // At the end (clock 8): ip2 as factors, ip1 through the server.
  for (const JobRun* run : {&plain, &staged}) {
    EXPECT_EQ(run->sfb_tensors, (std::vector<int>{4}));
    EXPECT_EQ(run->gradient_unused, (std::vector<bool>{false, false, false, false, true, false}));
  }
  // The bridge rebuilt ip1's updates of clocks 2-4 and ip2's of 2-7.
  EXPECT_EQ(staged.sfb_rebuilds, 3 + 6);
}

// Two workers that would rebuild the sufficient factors by different code (the
// client's CPU rebuild and the bridge's, behind a staging; on GPUs, cuBLAS of
// another model or version) would let their replicas drift apart by
// rounding: the job refuses to start, naming both workers and both engines.
TEST(StagingJobTest, WorkersThatRebuildFactorsByDifferentEnginesAreRefusedNamingBoth) {
  TempDir dir;
  const std::string solver_file = test::WriteTinyJob(dir, 32, 6);
  test::ClusterSpec spec = test::JobOf(1, 2);
  spec.external_workers = {0, 1};
  test::LocalCluster cluster(spec, dir);
  HostStaging staging{HostStagingOptions()};
  Status result[2];
  std::vector<std::thread> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.emplace_back([&, rank] {
      ClientOptions options = test::TestWorkerOptions(cluster.coordinator_address(), rank);
      options.sfb = SfbMode::kOn;
      auto client = Client::Connect(options);
      if (!client.ok()) {
        result[rank] = client.status();
        return;
      }
      std::unique_ptr<Solver> solver;  // Outlives the sync, whose client's pulls write into its blobs.
      {
        ClientParameterSync sync(client->get());
        if (rank == 1) sync.set_staging(&staging);
        caffe::SolverParameter param;
        result[rank] = ReadSolverParameterFromTextFile(solver_file, &param);
        if (!result[rank].ok()) return;
        param.set_display(0);
        auto created = Solver::Create(param, DefaultLayerRegistry(), &sync);
        if (!created.ok()) {
          result[rank] = created.status();
          return;
        }
        solver = std::move(created).value();
        sync.set_net(solver->net());
        result[rank] = solver->Step(1);
      }
      client->reset();
    });
  }
  for (auto& w : workers) w.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_FALSE(result[rank].ok()) << "worker " << rank;
    test::ExpectContains(result[rank].message(),
                         {"nodes registered different models at barrier \"nereus.sfb\"", "{worker 0} have digest ",
                          "(sufficient factors rebuilt by the client on the CPU (common/update/sfb, OpenBLAS))",
                          "{worker 1} have digest ",
                          "(sufficient factors rebuilt by the bridge on the CPU (the trainer's OpenBLAS math, behind a "
                          "host staging))"});
  }
  std::string report;
  cluster.WaitAll(std::chrono::seconds(30), &report);  // The coordinator and server end with the job's error.
}

// With iter_size 2 and gradient clipping the Solver hands every layer over
// after the whole backward (clipped and normalized first, on the device for
// a GPU net): through the staging the weights still end as the plain path's.
TEST(StagingJobTest, WithIterSizeAndClippingTheWeightsStillEqualThePlainPath) {
  TempDir dir;
  const std::string solver =
      test::WriteTinyJob(dir, 16, 4, std::string(test::kTinySgd) + "iter_size: 2\nclip_gradients: 0.1\n");
  JobRun plain, staged;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, nullptr, 4, &plain));
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  std::atomic<int> copies_to_host{0};
  HostStagingOptions options;
  options.before_copy = [&](int, bool to_host) {
    if (to_host) ++copies_to_host;
    return Status::OK();
  };
  HostStaging staging(options);
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, &staging, 4, &staged));
  ASSERT_TRUE(staged.status.ok()) << staged.status;
  ASSERT_EQ(plain.final.size(), 6u);
  for (size_t p = 0; p < plain.final.size(); ++p) {
    EXPECT_TRUE(BytesEqual(staged.final[p], plain.final[p], "param " + std::to_string(p)));
    EXPECT_FALSE(BytesEqual(plain.final[p], plain.initial[p])) << "param " << p << " did not train";
  }
  EXPECT_EQ(copies_to_host.load(), 7 * 4);  // Once per layer and iteration, not per sub-iteration.
}

TEST(StagingJobTest, AFailedCopyStopsTheTrainingNamingTheLayer) {
  TempDir dir;
  const std::string solver = test::WriteTinyJob(dir, 32, 100);
  std::atomic<int> ip1{-1}, ip1_copies{0};
  HostStagingOptions options;
  options.before_copy = [&](int layer, bool to_host) {
    // The third copy of ip1's gradients (iteration 2) fails.
    if (to_host && layer == ip1.load() && ++ip1_copies == 3) {
      return InternalError("cudaMemcpyAsync: cudaErrorIllegalAddress: an illegal memory access was encountered");
    }
    return Status::OK();
  };
  HostStaging staging(options);
  JobRun run;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, &staging, 100, &run, "ip1", &ip1));
  ASSERT_GE(ip1.load(), 0);
  EXPECT_EQ(run.status.code(), StatusCode::kInternal) << run.status;
  EXPECT_NE(run.status.message().find("copying the gradients of layer \"ip1\" to the host: cudaMemcpyAsync: "
                                      "cudaErrorIllegalAddress: an illegal memory access was encountered"),
            std::string::npos)
      << run.status;
  EXPECT_EQ(ip1_copies.load(), 3);  // Nothing was copied after the failure.
  EXPECT_EQ(run.drain.message(), run.status.message().substr(run.status.message().find("copying")));
}

// A staging whose StageGradients cannot enqueue ip1's copies at iteration 1
// (as when cudaMemcpyAsync refuses them): the next forward must not wait for
// a hand-over that will never come.
class EnqueueFails : public HostStaging {
 public:
  std::atomic<int> ip1{-1};
  Status StageGradients(int layer, const std::string& layer_name, const std::vector<StagingCopy>& copies,
                        Done done) override {
    if (layer == ip1.load() && ++calls_ == 2) {
      return InternalError("copying the gradients of layer \"" + layer_name +
                           "\" to the host: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument");
    }
    return HostStaging::StageGradients(layer, layer_name, copies, std::move(done));
  }

 private:
  int calls_ = 0;
};

TEST(StagingJobTest, ACopyThatCannotBeEnqueuedStopsTheTrainingWithoutAHang) {
  TempDir dir;
  const std::string solver = test::WriteTinyJob(dir, 32, 100);
  EnqueueFails staging;
  JobRun run;
  ASSERT_NO_FATAL_FAILURE(RunJob(solver, &staging, 100, &run, "ip1", &staging.ip1));
  const std::string expected =
      "copying the gradients of layer \"ip1\" to the host: cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument";
  EXPECT_EQ(run.status.message(), "iteration 1: " + expected);
  EXPECT_EQ(run.drain.message(), expected);
}

// A staging of device memory that moves nothing (only its kind matters).
class DeviceMemoryStaging : public DeviceStaging {
 public:
  Status StageGradients(int, const std::string&, const std::vector<StagingCopy>&, Done done) override {
    done(Status::OK());
    return Status::OK();
  }
  Status StageWeights(int, const std::string&, const std::vector<StagingCopy>&) override { return Status::OK(); }
  Status Drain() override { return Status::OK(); }
  Status Shutdown() override { return Status::OK(); }
  bool device_memory() const override { return true; }
};

StatusOr<std::unique_ptr<Net>> TinyIpNet(gpu::Device* device) {
  NetOptions options;
  options.device = device;
  return test::TrainNetFromText(R"(name: "tiny_ip"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 2 } })",
                                "tiny_ip.prototxt", DefaultLayerRegistry(), options);
}

// Init refuses a staging that does not fit the net before it registers
// anything (so no client is needed here).
Status InitWith(Net& net, DeviceStaging* staging) {
  ClientParameterSync sync(nullptr);
  sync.set_net(&net);
  sync.set_staging(staging);
  return sync.Init(net.learnable_params(), net.params_lr(), net.params_weight_decay(), pb::SgdConfig());
}

TEST(StagingBridgeTest, ANetOnADeviceNeedsADeviceStaging) {
  auto device = gpu::Device::CreateStandIn();
  gpu::ScopedDevice scope(device.get());
  auto net = TinyIpNet(device.get());
  ASSERT_TRUE(net.ok()) << net.status();
  const std::string expected =
      "net \"tiny_ip\" computes on host stand-in for device 0: its parameters need a device staging (set_staging) to "
      "reach the client";
  Status st = InitWith(**net, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), expected);
  HostStaging host;  // Copies host memory only.
  EXPECT_EQ(InitWith(**net, &host).message(), expected);
}

// The runner's choice (StagingForDevice, what RunTraining hands the bridge):
// no staging for a CPU net; for a net on a device the factory's staging,
// NewCudaStaging by default, which refuses a stand-in (so this is the
// default); a staging of host memory for a device is an error.
TEST(StagingBridgeTest, TheRunnerStagesANetOnADeviceAndNotOneOnTheCpu) {
  int calls = 0;
  gpu::Device* asked = nullptr;
  DeviceMemoryStaging* made = nullptr;
  StagingFactory factory = [&](gpu::Device* device) -> StatusOr<std::unique_ptr<DeviceStaging>> {
    ++calls;
    asked = device;
    auto staging = std::make_unique<DeviceMemoryStaging>();
    made = staging.get();
    return std::unique_ptr<DeviceStaging>(std::move(staging));
  };
  auto cpu = StagingForDevice(nullptr, factory);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(nullptr, *cpu);
  EXPECT_EQ(0, calls);

  auto device = gpu::Device::CreateStandIn();
  auto staged = StagingForDevice(device.get(), factory);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(1, calls);
  EXPECT_EQ(device.get(), asked);
  EXPECT_EQ(made, staged->get());
  EXPECT_TRUE((*staged)->device_memory());

  auto by_default = StagingForDevice(device.get());
  ASSERT_FALSE(by_default.ok());
  EXPECT_EQ(by_default.status().message(),
            "staging the parameters of host stand-in for device 0: " +
                std::string(gpu::BuiltWithCuda() ? "a device staging needs a CUDA device, not a host stand-in"
                                                 : "a device staging needs CUDA: Nereus was built without it"));

  auto host = StagingForDevice(device.get(), [](gpu::Device*) -> StatusOr<std::unique_ptr<DeviceStaging>> {
    return std::unique_ptr<DeviceStaging>(std::make_unique<HostStaging>());
  });
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), StatusCode::kInternal);
  EXPECT_EQ(host.status().message(), "the staging made for host stand-in for device 0 does not copy device memory");
}

TEST(StagingBridgeTest, ACpuNetRefusesAStagingOfDeviceMemory) {
  auto net = TinyIpNet(nullptr);
  ASSERT_TRUE(net.ok()) << net.status();
  DeviceMemoryStaging staging;
  const Status st = InitWith(**net, &staging);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "net \"tiny_ip\" computes on the CPU, but its staging copies device memory");
}

}  // namespace
}  // namespace nereus

// The GPU support that runs without a GPU: device bookkeeping on a host
// stand-in (SyncedMemory's heads and copies, page-locked host memory, running
// out of device memory while a net is built), the errors a missing GPU
// gives (an explicit GPU is an error naming it; a solver file's solver_mode
// GPU is a warning and the CPU), and the list of layers without GPU code.
// tests/worker/trainer/gpu/gpu_test.cc checks the same on a real GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "tests/support/net_test_util.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/gpu/host_buffer.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/net.h"
#include "worker/trainer/parameter_sync.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"
#include "worker/trainer/syncedmem.h"

namespace nereus {
namespace {

using Head = SyncedMemory::Head;

TEST(GpuAvailabilityTest, ErrorsSayWhyThereIsNoDevice) {
  const int count = gpu::DeviceCount();
  if (count == 0) {
    const Status s = gpu::CheckDeviceId(0);
    ASSERT_FALSE(s.ok());
    if (gpu::BuiltWithCuda()) {
      EXPECT_EQ(0u, s.message().find("no CUDA device (")) << s;
    } else {
      EXPECT_EQ(0u, s.message().find("Nereus was built without CUDA")) << s;
    }
    auto device = gpu::Device::Create(gpu::DeviceOptions());
    ASSERT_FALSE(device.ok());
    EXPECT_EQ(s.message(), device.status().message());
  } else {
    const Status s = gpu::CheckDeviceId(count);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ("CUDA device " + std::to_string(count) + " does not exist: this machine has " + std::to_string(count) +
                  " (0.." + std::to_string(count - 1) + ")",
              s.message());
    EXPECT_TRUE(gpu::CheckDeviceId(0).ok());
  }
  EXPECT_FALSE(gpu::CheckDeviceId(-1).ok());
}

TEST(StandInTest, SyncedMemoryCopiesOnlyWhenTheOtherSideIsNewer) {
  auto device = gpu::Device::CreateStandIn();
  gpu::ScopedDevice scope(device.get());
  const gpu::DeviceMemory& memory = *device->memory();
  SyncedMemory m(4 * sizeof(float));
  EXPECT_EQ(Head::kUninitialized, m.head());
  // First device use: zero-filled, nothing copied.
  const float* d = static_cast<const float*>(m.gpu_data());
  ASSERT_NE(nullptr, d);
  EXPECT_EQ(Head::kAtGpu, m.head());
  EXPECT_EQ(0.0f, d[3]);
  EXPECT_EQ(0, memory.copies_to_device());
  // The device writes; the host reads: one copy, then both are valid.
  static_cast<float*>(m.mutable_gpu_data())[2] = 2.5f;
  EXPECT_EQ(2.5f, static_cast<const float*>(m.cpu_data())[2]);
  EXPECT_EQ(Head::kSynced, m.head());
  EXPECT_EQ(1, memory.copies_to_host());
  EXPECT_TRUE(m.cpu_pinned());  // Host memory of device-resident data is page-locked.
  m.cpu_data();
  m.gpu_data();
  EXPECT_EQ(1, memory.copies_to_host());
  EXPECT_EQ(0, memory.copies_to_device());
  // The host writes; the device reads: one copy.
  static_cast<float*>(m.mutable_cpu_data())[1] = -1.0f;
  EXPECT_EQ(Head::kAtCpu, m.head());
  EXPECT_EQ(-1.0f, static_cast<const float*>(m.gpu_data())[1]);
  EXPECT_EQ(Head::kSynced, m.head());
  EXPECT_EQ(1, memory.copies_to_device());
  EXPECT_EQ(4 * sizeof(float), memory.bytes_in_use());
}

// The bridge's staging writes a parameter's device copy with an asynchronous
// copy and then says so: the host copy is stale from then on.
TEST(StandInTest, MarkGpuWrittenMakesTheDeviceCopyTheFreshOne) {
  auto device = gpu::Device::CreateStandIn();
  gpu::ScopedDevice scope(device.get());
  const gpu::DeviceMemory& memory = *device->memory();
  SyncedMemory m(2 * sizeof(float));
  static_cast<float*>(m.mutable_cpu_data())[0] = 1.0f;
  float* d = const_cast<float*>(static_cast<const float*>(m.gpu_data()));  // Host and device agree.
  EXPECT_EQ(Head::kSynced, m.head());
  EXPECT_EQ(1, memory.copies_to_device());
  d[0] = 7.0f;  // What the staging's copy does, behind the buffer's back.
  m.MarkGpuWritten();
  EXPECT_EQ(Head::kAtGpu, m.head());
  EXPECT_EQ(7.0f, static_cast<const float*>(m.cpu_data())[0]);  // Copied back, not the stale 1.
  EXPECT_EQ(1, memory.copies_to_host());
  EXPECT_EQ(1, memory.copies_to_device());
}

TEST(StandInTest, HostMemoryIsPlainWithoutADevice) {
  SyncedMemory m(8);
  EXPECT_EQ(0, static_cast<const char*>(m.cpu_data())[7]);
  EXPECT_FALSE(m.cpu_pinned());
  EXPECT_EQ(nullptr, m.device_memory());
}

TEST(StandInTest, BytesAreGivenBackWithTheMemory) {
  auto device = gpu::Device::CreateStandIn();
  gpu::ScopedDevice scope(device.get());
  {
    SyncedMemory a(100), b(28);
    a.gpu_data();
    b.gpu_data();
    EXPECT_EQ(128u, device->memory()->bytes_in_use());
  }
  EXPECT_EQ(0u, device->memory()->bytes_in_use());
  EXPECT_EQ(128u, device->memory()->peak_bytes());
}

TEST(StandInTest, OutOfDeviceMemoryIsRecordedWithTheBytes) {
  gpu::DeviceOptions options;
  options.memory_limit_bytes = 64;
  auto device = gpu::Device::CreateStandIn(options);
  gpu::ScopedDevice scope(device.get());
  SyncedMemory fits(48), too_big(100);
  EXPECT_NE(nullptr, fits.gpu_data());
  EXPECT_TRUE(device->ok());
  EXPECT_EQ(nullptr, too_big.gpu_data());
  EXPECT_EQ(Head::kUninitialized, too_big.head());
  EXPECT_FALSE(device->ok());
  const Status s = device->TakeError();
  EXPECT_EQ(StatusCode::kResourceExhausted, s.code());
  EXPECT_EQ("out of device memory on host stand-in: asked for 100 bytes with 48 bytes in use and a limit of 64 bytes",
            s.message());
  EXPECT_TRUE(device->ok());  // Taken.
  EXPECT_EQ(48u, device->memory()->bytes_in_use());
}

TEST(StandInTest, FirstErrorWins) {
  auto device = gpu::Device::CreateStandIn();
  device->RecordError(InternalError("first"));
  device->RecordError(InternalError("second"));
  EXPECT_EQ("first", device->TakeError().message());
  EXPECT_TRUE(device->TakeError().ok());
}

TEST(StandInTest, ScopedDevicesNest) {
  auto a = gpu::Device::CreateStandIn();
  auto b = gpu::Device::CreateStandIn();
  EXPECT_EQ(nullptr, gpu::CurrentDevice());
  {
    gpu::ScopedDevice sa(a.get());
    EXPECT_EQ(a.get(), gpu::CurrentDevice());
    {
      gpu::ScopedDevice sb(b.get());
      EXPECT_EQ(b.get(), gpu::CurrentDevice());
      gpu::ScopedDevice none(nullptr);  // Changes nothing.
      EXPECT_EQ(b.get(), gpu::CurrentDevice());
    }
    EXPECT_EQ(a.get(), gpu::CurrentDevice());
  }
  EXPECT_EQ(nullptr, gpu::CurrentDevice());
}

TEST(StandInTest, BlobArithmeticOnAStandInRunsOnTheHost) {
  auto device = gpu::Device::CreateStandIn();
  gpu::ScopedDevice scope(device.get());
  Blob b(std::vector<int>{3});
  float* d = b.mutable_gpu_data();  // Host memory standing in for the device's.
  d[0] = 1.0f;
  d[1] = -2.0f;
  d[2] = 2.0f;
  EXPECT_EQ(5.0f, b.asum_data());
  EXPECT_EQ(9.0f, b.sumsq_data());
  b.scale_data(2.0f);
  EXPECT_EQ(-4.0f, b.cpu_data()[1]);
}

TEST(StandInTest, HostBuffersArePageLockedThroughTheirMemory) {
  auto memory = gpu::NewHostStandInMemory();
  gpu::HostBuffer pinned(5, memory);
  EXPECT_TRUE(pinned.pinned());
  EXPECT_EQ(5u, pinned.size());
  EXPECT_EQ(0.0f, pinned.data()[4]);
  gpu::HostBuffer moved = std::move(pinned);
  EXPECT_TRUE(moved.pinned());
  EXPECT_EQ(nullptr, pinned.data());
  gpu::HostBuffer plain(3, nullptr);
  EXPECT_FALSE(plain.pinned());
  EXPECT_EQ(0.0f, plain.data()[2]);
}

TEST(StandInTest, RunningOutWhileBuildingANetNamesTheNetTheLayerAndTheBytes) {
  gpu::DeviceOptions options;
  options.memory_limit_bytes = 100;
  auto device = gpu::Device::CreateStandIn(options);
  test::ExpectTinyIpNetRunsOutOfMemory(device.get(), "host stand-in");
  // With room for all of it the same net builds, every blob on the device.
  options.memory_limit_bytes = 0;
  auto roomy = gpu::Device::CreateStandIn(options);
  NetOptions net_options;
  net_options.device = roomy.get();
  auto built = test::TrainNetFromText(test::kTinyIpNet, "tiny_ip.prototxt", DefaultLayerRegistry(), net_options);
  ASSERT_TRUE(built.ok()) << built.status();
  // x (64), y and its diff (32 + 32), weights and their diff (128 + 128),
  // bias and its diff (16 + 16).
  EXPECT_EQ(416u, roomy->memory()->bytes_in_use());
  EXPECT_EQ(roomy.get(), (*built)->layers()[1]->device());
}

// A linear model with a solver file that says GPU, as Caffe's published ones do.
std::string SolverText(const std::string& mode) {
  return std::string(R"(net_param { name: "lin"
  layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
    inner_product_param { num_output: 2 weight_filler { type: "gaussian" std: 0.5 } } }
  layer { name: "in2" type: "Input" top: "x2" input_param { shape { dim: 2 dim: 2 } } }
  layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "x2" top: "loss" }
}
base_lr: 0.1 momentum: 0.9 lr_policy: "fixed" max_iter: 3 random_seed: 3 display: 0
solver_mode: )") +
         mode + "\n";
}

std::unique_ptr<Solver> MakeSolver(const std::string& text, SolverOptions options, Status* status = nullptr) {
  caffe::SolverParameter param;
  EXPECT_TRUE(ParseSolverParameter(text, "solver.prototxt", &param).ok());
  const LayerRegistry registry = DefaultLayerRegistry();
  auto solver = Solver::Create(param, registry, nullptr, std::move(options));
  if (status != nullptr) *status = solver.status();
  return solver.ok() ? std::move(solver).value() : nullptr;
}

TEST(SolverDeviceTest, AnExplicitGpuThatCannotBeMetIsAnErrorNamingIt) {
  SolverOptions options;
  options.gpu = gpu::DeviceCount();  // One past the last device: none here.
  Status s;
  EXPECT_EQ(nullptr, MakeSolver(SolverText("CPU"), options, &s));
  const std::string expected = "GPU " + std::to_string(options.gpu) + ": " + gpu::CheckDeviceId(options.gpu).message();
  EXPECT_EQ(expected, s.message());
}

TEST(SolverDeviceTest, SolverModeGpuWithoutAGpuTrainsOnTheCpuAsTheCpuDoes) {
  if (gpu::DeviceCount() > 0) {
    // Where there is a GPU, solver_mode GPU takes it.
    auto solver = MakeSolver(SolverText("GPU"), SolverOptions());
    ASSERT_NE(nullptr, solver);
    EXPECT_NE(nullptr, solver->device());
    return;
  }
  auto gpu_file = MakeSolver(SolverText("GPU"), SolverOptions());
  auto cpu_file = MakeSolver(SolverText("CPU"), SolverOptions());
  ASSERT_NE(nullptr, gpu_file);
  ASSERT_NE(nullptr, cpu_file);
  EXPECT_EQ(nullptr, gpu_file->device());
  std::mt19937 rng(9);
  for (Solver* s : {gpu_file.get(), cpu_file.get()}) {
    std::mt19937 local = rng;
    test::FillGaussian(s->net()->blob_by_name("x"), &local);
    test::FillGaussian(s->net()->blob_by_name("x2"), &local);
    ASSERT_TRUE(s->Step(3).ok());
  }
  const Blob* a = gpu_file->net()->learnable_params()[0];
  const Blob* b = cpu_file->net()->learnable_params()[0];
  ASSERT_EQ(a->count(), b->count());
  EXPECT_EQ(0, std::memcmp(a->cpu_data(), b->cpu_data(), sizeof(float) * a->count()));
}

TEST(SolverDeviceTest, ForcedCpuIgnoresSolverModeGpu) {
  SolverOptions options;
  options.gpu = SolverOptions::kCpu;
  auto solver = MakeSolver(SolverText("GPU"), options);
  ASSERT_NE(nullptr, solver);
  EXPECT_EQ(nullptr, solver->device());
}

class NoSync : public ParameterSync {
 public:
  Status Init(const std::vector<Blob*>&, const std::vector<float>&, const std::vector<float>&,
              const pb::SgdConfig&) override {
    return Status::OK();
  }
  Status WaitWeights(int, int64_t) override { return Status::OK(); }
  Status GradientsReady(int, int64_t) override { return Status::OK(); }
  Status FinishIteration(int64_t) override { return Status::OK(); }
};

// A job's worker chooses its device as a standalone run does (its bridge
// stages the gradients: worker/bridge): an explicit GPU that cannot be
// had is the same error naming it, not a refusal of GPUs in jobs; solver_mode
// GPU takes the GPU where there is one, and without one computes on the CPU
// the gradients solver_mode CPU computes, bit for bit.
TEST(SolverDeviceTest, AJobsWorkerChoosesItsDeviceAsStandalone) {
  NoSync sync;
  SolverOptions options;
  options.gpu = gpu::DeviceCount();  // One past the last device: none here.
  caffe::SolverParameter param;
  ASSERT_TRUE(ParseSolverParameter(SolverText("CPU"), "solver.prototxt", &param).ok());
  auto missing = Solver::Create(param, DefaultLayerRegistry(), &sync, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ("GPU " + std::to_string(options.gpu) + ": " + gpu::CheckDeviceId(options.gpu).message(),
            missing.status().message());

  ASSERT_TRUE(ParseSolverParameter(SolverText("GPU"), "solver.prototxt", &param).ok());
  auto gpu_file = Solver::Create(param, DefaultLayerRegistry(), &sync);
  ASSERT_TRUE(gpu_file.ok()) << gpu_file.status();
  if (gpu::DeviceCount() > 0) {
    EXPECT_NE(nullptr, (*gpu_file)->device());
    return;
  }
  EXPECT_EQ(nullptr, (*gpu_file)->device());
  ASSERT_TRUE(ParseSolverParameter(SolverText("CPU"), "solver.prototxt", &param).ok());
  auto cpu_file = Solver::Create(param, DefaultLayerRegistry(), &sync);
  ASSERT_TRUE(cpu_file.ok()) << cpu_file.status();
  // With a ParameterSync the Solver computes the gradients and leaves the
  // update to it (NoSync applies none): the diffs of 2 iterations.
  std::mt19937 rng(9);
  std::vector<std::vector<float>> diffs[2];
  int k = 0;
  for (Solver* s : {gpu_file->get(), cpu_file->get()}) {
    std::mt19937 local = rng;
    test::FillGaussian(s->net()->blob_by_name("x"), &local);
    test::FillGaussian(s->net()->blob_by_name("x2"), &local);
    ASSERT_TRUE(s->Step(2).ok());
    for (const Blob* b : s->net()->learnable_params()) diffs[k].emplace_back(b->cpu_diff(), b->cpu_diff() + b->count());
    ++k;
  }
  ASSERT_EQ(2u, diffs[0].size());  // ip's weights and bias.
  for (size_t p = 0; p < diffs[0].size(); ++p) {
    ASSERT_EQ(diffs[0][p].size(), diffs[1][p].size());
    EXPECT_EQ(0, std::memcmp(diffs[0][p].data(), diffs[1][p].data(), sizeof(float) * diffs[0][p].size()))
        << "param " << p;
    EXPECT_NE(0.0f, diffs[0][p][0]) << "param " << p << ": no gradient";
  }
}

// The layers that run their CPU code on a GPU net, so a new layer without
// GPU code has to be listed here. Giving a layer GPU code means taking it
// off this list. These work on the host by nature: DummyData's fillers and
// MemoryData's arrays are host code and host memory (their tops go to the
// device when the next layer reads them), and HDF5Output writes a file from
// host memory. Python is registered only to be refused at set-up (no Python
// is embedded): it runs nowhere.
TEST(LayerGpuCoverageTest, LayersWithoutGpuCodeAreExactlyThese) {
  const std::vector<std::string> expected = {"DummyData", "HDF5Output", "MemoryData", "Python"};
  const LayerRegistry registry = DefaultLayerRegistry();
  std::vector<std::string> without, with;
  for (const std::string& type : registry.Types()) {
    caffe::LayerParameter param;
    param.set_name("probe");
    param.set_type(type);
    auto layer = registry.Create(param);
    ASSERT_TRUE(layer.ok()) << type << ": " << layer.status();
    ((*layer)->HasGpuCode() ? with : without).push_back(type);
  }
  std::string listed;
  for (const std::string& t : without) listed += " " + t;
  std::printf("layers without GPU code (%zu of %zu):%s\n", without.size(), without.size() + with.size(),
              listed.c_str());
  EXPECT_EQ(expected, without);
  EXPECT_NE(with.end(), std::find(with.begin(), with.end(), "Split"));  // The Net's own, too.
}

}  // namespace
}  // namespace nereus

// The GPU support on a real GPU (label gpu; skipped with "no CUDA device"
// elsewhere, a failure under NEREUS_REQUIRE_GPU=1): the device and its
// memory, the GPU math against the CPU's, every solver's GPU step against
// the CPU's, and nets and solvers on the GPU: a small conv net trained on
// the GPU and on the CPU from the same weights, snapshots and restores of
// device-resident weights and histories, out of device memory and failed
// library calls reported as a Status naming the net, the layer and the call.
//
// Tolerances: element-wise kernels run the CPU's element functions, built
// with --fmad=false, so + - * / and sqrt give the CPU's bits (asserted
// exactly); CUDA's expf/logf/powf are within 2 ulp of glibc's (CUDA's
// programming guide, "Mathematical Functions"), hence 4 ulp relative
// (4.8e-7); cuBLAS sums GEMMs and dots in another order (and with fused
// multiply-adds) than OpenBLAS: each result within K * 2^-24 * sum |a_k b_k|,
// about 1e-5 relative for the sizes here (K <= 500, terms of one sign
// mostly), so 1e-4 relative and a small absolute floor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/update/sgd.h"
#include "tests/support/layer_test.h"
#include "tests/support/net_test_util.h"
#include "tests/support/solver_reference.h"
#include "tests/support/tiny_train_job.h"
#include "tests/support/trainer_test_layers.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/gpu/solver_step.h"
#include "worker/trainer/hdf5_snapshot.h"
#include "worker/trainer/layer_registry.h"
#include "worker/trainer/math/gpu_math_functions.h"
#include "worker/trainer/math/math_functions.h"
#include "worker/trainer/net.h"
#include "worker/trainer/prototxt.h"
#include "worker/trainer/solver.h"

namespace nereus {
namespace {

std::vector<float> Random(int n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A device buffer holding `v`, and its values back.
struct DeviceArray {
  explicit DeviceArray(const std::vector<float>& v) : blob(std::vector<int>{static_cast<int>(v.size())}) {
    std::copy(v.begin(), v.end(), blob.mutable_cpu_data());
  }
  const float* in() { return blob.gpu_data(); }
  float* out() { return blob.mutable_gpu_data(); }
  std::vector<float> Values() { return std::vector<float>(blob.cpu_data(), blob.cpu_data() + blob.count()); }
  Blob blob;
};

void ExpectBitwise(const std::vector<float>& expected, const std::vector<float>& actual, const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&expected[i], &actual[i], sizeof(float)))
        << what << " [" << i << "]: CPU " << expected[i] << ", GPU " << actual[i];
  }
}

void ExpectNear(const std::vector<float>& expected, const std::vector<float>& actual, float rtol, float atol,
                const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_LE(std::fabs(expected[i] - actual[i]), atol + rtol * std::fabs(expected[i]))
        << what << " [" << i << "]: CPU " << expected[i] << ", GPU " << actual[i];
  }
}

constexpr float kUlp4 = 4.8e-7f;  // 4 * 2^-23.

TEST(GpuDeviceTest, HasStreamsHandlesAndMemory) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_NE(nullptr, device->compute_stream());
  EXPECT_NE(nullptr, device->copy_stream());
  EXPECT_NE(device->compute_stream(), device->copy_stream());
  EXPECT_NE(nullptr, device->cublas());
  EXPECT_NE(nullptr, device->curand());
  EXPECT_NE(std::string::npos, device->description().find("(device 0, compute capability "));
  EXPECT_EQ("CUDA device 0", device->memory()->name());
}

// The check run once by hand when this issue was filed: 3,876 floats host ->
// device -> host, now through the device's memory and compute stream.
TEST(GpuDeviceTest, SyncedMemoryRoundTripsThroughTheDevice) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  const int64_t to_device = device->memory()->copies_to_device();
  const int64_t to_host = device->memory()->copies_to_host();
  const std::vector<float> values = Random(3876, 1);
  Blob b(std::vector<int>{3876});
  std::copy(values.begin(), values.end(), b.mutable_cpu_data());
  caffe_gpu_scal(device, b.count(), 2.0f, b.mutable_gpu_data());
  std::vector<float> twice(values);
  for (float& v : twice) v *= 2.0f;
  ExpectBitwise(twice, std::vector<float>(b.cpu_data(), b.cpu_data() + 3876), "round trip");
  EXPECT_EQ(to_device + 1, device->memory()->copies_to_device());
  EXPECT_EQ(to_host + 1, device->memory()->copies_to_host());
  EXPECT_TRUE(b.data()->cpu_pinned());
  EXPECT_TRUE(device->TakeError().ok());
}

TEST(GpuMathTest, ElementWiseFunctionsGiveTheCpuBits) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  const int n = 1000;
  const std::vector<float> a = Random(n, 2), b = Random(n, 3, 0.5f, 2.0f);
  auto check = [&](const char* name, auto cpu, auto gpu_fn) {
    std::vector<float> expected(n);
    cpu(expected.data());
    DeviceArray y(std::vector<float>(n, 0.0f)), da(a), db(b);
    gpu_fn(da.in(), db.in(), y.out());
    ExpectBitwise(expected, y.Values(), name);
  };
  check(
      "add", [&](float* y) { caffe_add(n, a.data(), b.data(), y); },
      [&](const float* x, const float* z, float* y) { caffe_gpu_add(device, n, x, z, y); });
  check(
      "sub", [&](float* y) { caffe_sub(n, a.data(), b.data(), y); },
      [&](const float* x, const float* z, float* y) { caffe_gpu_sub(device, n, x, z, y); });
  check(
      "mul", [&](float* y) { caffe_mul(n, a.data(), b.data(), y); },
      [&](const float* x, const float* z, float* y) { caffe_gpu_mul(device, n, x, z, y); });
  check(
      "div", [&](float* y) { caffe_div(n, a.data(), b.data(), y); },
      [&](const float* x, const float* z, float* y) { caffe_gpu_div(device, n, x, z, y); });
  check(
      "abs", [&](float* y) { caffe_abs(n, a.data(), y); },
      [&](const float* x, const float*, float* y) { caffe_gpu_abs(device, n, x, y); });
  check(
      "sqr", [&](float* y) { caffe_sqr(n, a.data(), y); },
      [&](const float* x, const float*, float* y) { caffe_gpu_sqr(device, n, x, y); });
  check(
      "sign", [&](float* y) { caffe_cpu_sign(n, a.data(), y); },
      [&](const float* x, const float*, float* y) { caffe_gpu_sign(device, n, x, y); });
  check(
      "set", [&](float* y) { caffe_set(n, 0.25f, y); },
      [&](const float*, const float*, float* y) { caffe_gpu_set(device, n, 0.25f, y); });
  check(
      "copy", [&](float* y) { caffe_copy(n, a.data(), y); },
      [&](const float* x, const float*, float* y) { caffe_gpu_copy(device, n, x, y); });
  EXPECT_TRUE(device->TakeError().ok());
}

TEST(GpuMathTest, TranscendentalFunctionsWithinFourUlp) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  const int n = 1000;
  const std::vector<float> a = Random(n, 4, 0.1f, 4.0f);
  std::vector<float> expected(n);
  DeviceArray da(a), y{std::vector<float>(n)};
  caffe_exp(n, a.data(), expected.data());
  caffe_gpu_exp(device, n, da.in(), y.out());
  ExpectNear(expected, y.Values(), kUlp4, 0.0f, "exp");
  caffe_log(n, a.data(), expected.data());
  caffe_gpu_log(device, n, da.in(), y.out());
  ExpectNear(expected, y.Values(), kUlp4, 1e-7f, "log");
  caffe_powx(n, a.data(), -0.75f, expected.data());
  caffe_gpu_powx(device, n, da.in(), -0.75f, y.out());
  ExpectNear(expected, y.Values(), kUlp4, 0.0f, "powx");
}

TEST(GpuMathTest, BlasFunctionsMatchOpenBlas) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  const int M = 37, N = 29, K = 53;
  for (CBLAS_TRANSPOSE ta : {CblasNoTrans, CblasTrans}) {
    for (CBLAS_TRANSPOSE tb : {CblasNoTrans, CblasTrans}) {
      const std::vector<float> A = Random(M * K, 5), B = Random(K * N, 6), C0 = Random(M * N, 7);
      std::vector<float> C = C0;
      caffe_cpu_gemm(ta, tb, M, N, K, 0.5f, A.data(), B.data(), 0.25f, C.data());
      DeviceArray dA(A), dB(B), dC(C0);
      caffe_gpu_gemm(device, ta, tb, M, N, K, 0.5f, dA.in(), dB.in(), 0.25f, dC.out());
      ExpectNear(C, dC.Values(), 1e-4f, 1e-5f, "gemm");
    }
  }
  // A strided batch of 3 with a shared A (stride 0), as the convolutions use it.
  const std::vector<float> A = Random(M * K, 8), B = Random(3 * K * N, 9);
  std::vector<float> C(3 * M * N, 0.0f);
  for (int i = 0; i < 3; ++i) {
    caffe_cpu_gemm(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A.data(), B.data() + i * K * N, 0.0f,
                   C.data() + i * M * N);
  }
  DeviceArray dA(A), dB(B), dC(std::vector<float>(3 * M * N, 7.0f));
  caffe_gpu_gemm_strided_batched(device, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, dA.in(), 0, dB.in(), K * N, 0.0f,
                                 dC.out(), M * N, 3);
  ExpectNear(C, dC.Values(), 1e-4f, 1e-5f, "gemm_strided_batched");
  for (CBLAS_TRANSPOSE t : {CblasNoTrans, CblasTrans}) {
    const std::vector<float> x = Random(t == CblasNoTrans ? N : M, 10), y0 = Random(t == CblasNoTrans ? M : N, 11);
    const std::vector<float> Am = Random(M * N, 12);
    std::vector<float> y = y0;
    caffe_cpu_gemv(t, M, N, 1.5f, Am.data(), x.data(), 0.5f, y.data());
    DeviceArray dAm(Am), dx(x), dy(y0);
    caffe_gpu_gemv(device, t, M, N, 1.5f, dAm.in(), dx.in(), 0.5f, dy.out());
    ExpectNear(y, dy.Values(), 1e-4f, 1e-5f, "gemv");
  }
  const std::vector<float> x = Random(500, 13), y0 = Random(500, 14);
  DeviceArray dx(x), dy(y0);
  EXPECT_NEAR(caffe_cpu_dot(500, x.data(), y0.data()), caffe_gpu_dot(device, 500, dx.in(), dy.in()), 1e-4);
  EXPECT_NEAR(caffe_cpu_asum(500, x.data()), caffe_gpu_asum(device, 500, dx.in()), 1e-3);
  std::vector<float> y = y0;
  caffe_cpu_axpby(500, 0.5f, x.data(), 0.25f, y.data());
  caffe_gpu_axpby(device, 500, 0.5f, dx.in(), 0.25f, dy.out());
  ExpectNear(y, dy.Values(), kUlp4, 1e-7f, "axpby");  // One rounding apart at most (FMA or not).
  EXPECT_TRUE(device->TakeError().ok());
}

TEST(GpuMathTest, RandomNumbersAreInRange) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  const int n = 10001;  // Odd: the Gaussian's last element comes from a second draw.
  DeviceArray u{std::vector<float>(n)}, g{std::vector<float>(n, -100.0f)};
  caffe_gpu_rng_uniform(device, n, -2.0f, 3.0f, u.out());
  caffe_gpu_rng_gaussian(device, n, 1.0f, 2.0f, g.out());
  double sum = 0, sum_sq = 0;
  for (float v : u.Values()) {
    ASSERT_GT(v, -2.0f);
    ASSERT_LE(v, 3.0f);
  }
  for (float v : g.Values()) {
    sum += v;
    sum_sq += v * v;
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  EXPECT_NEAR(1.0, mean, 0.1);  // 5 standard errors (2 / sqrt(10001) = 0.02)
  EXPECT_NEAR(4.0, var, 0.4);
  EXPECT_NE(-100.0f, g.Values().back());
  EXPECT_TRUE(device->TakeError().ok());
}

// Every solver type and regularization, three steps on the device and on the
// host from the same state: SGD and Nesterov bit for bit; the adaptive
// solvers within 4 ulp relative per step (CUDA's powf), 1e-6 after three.
TEST(GpuSolverStepTest, EverySolverMatchesTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  for (pb::SolverType type : test::kEverySolverType) {
    for (const char* reg : {"L2", "L1", "none"}) {
      const pb::SgdConfig c = test::EveryTermSettings(type, reg);
      const int n = 1031;
      std::vector<float> data = Random(n, 20), h(n, 0.0f), h2(n, 0.0f);
      DeviceArray ddata(data), dh(h), dh2(h2);
      for (int iter = 0; iter < 3; ++iter) {
        const std::vector<float> diff = Random(n, 30 + iter, -0.1f, 0.1f);
        DeviceArray ddiff(diff);
        SolverStep(c, iter, 0.01f, 1.0f, 1.0f, diff.data(), data.data(), h.data(), h2.data(), n);
        gpu::SolverStepGpu(device, PlanSolverStep(c, iter, 0.01f, 1.0f, 1.0f), ddiff.in(), ddata.out(), dh.out(),
                           dh2.out(), n);
      }
      const std::string what = std::string(SolverTypeName(type)) + " " + reg;
      if (type == pb::SOLVER_SGD || type == pb::SOLVER_NESTEROV) {
        ExpectBitwise(data, ddata.Values(), what + " weights");
        ExpectBitwise(h, dh.Values(), what + " history");
      } else {
        ExpectNear(data, ddata.Values(), 1e-6f, 1e-8f, what + " weights");
        ExpectNear(h, dh.Values(), 1e-6f, 1e-12f, what + " history");
        ExpectNear(h2, dh2.Values(), 1e-6f, 1e-12f, what + " history 2");
      }
    }
  }
  EXPECT_TRUE(device->TakeError().ok());
}

TEST(GpuErrorTest, AFailedCublasCallNamesTheCall) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  DeviceArray a(std::vector<float>(4)), c(std::vector<float>(4));
  caffe_gpu_gemm(device, CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, a.in(), a.in(), 0.0f, c.out());
  const Status s = device->TakeError();
  EXPECT_EQ(StatusCode::kInternal, s.code());
  EXPECT_EQ("cublasSgemm: CUBLAS_STATUS_INVALID_VALUE", s.message());
  // Nothing is queued while an error is pending; taking it clears it.
  EXPECT_TRUE(device->ok());
}

// A layer whose GPU code makes a bad cuBLAS call.
class BrokenGpuLayer : public Layer {
 public:
  using Layer::Layer;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }
  bool HasGpuCode() const override { return true; }

 protected:
  void Forward_cpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {}
  void Backward_cpu(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override {}
  // M = -1, the call AFailedCublasCallNamesTheCall makes. (A gemv with a
  // negative dimension is no test of this: cuBLAS 13 returned success for
  // one on an H200, scripts/gpu_check.sh, 2026-11-27.)
  void Forward_gpu(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    caffe_gpu_gemm(device(), CblasNoTrans, CblasNoTrans, -1, 2, 2, 1.0f, bottom[0]->gpu_data(), bottom[0]->gpu_data(),
                   0.0f, top[0]->mutable_gpu_data());
  }
};

TEST(GpuErrorTest, ANetReportsAFailedCallWithTheNetAndTheLayer) {
  NEREUS_GPU_OR_SKIP(device);
  LayerRegistry registry = DefaultLayerRegistry();
  registry.Register<BrokenGpuLayer>("Broken");
  caffe::NetParameter param;
  ASSERT_TRUE(ParseNetParameter(R"(name: "broken_net"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "bad" type: "Broken" bottom: "x" top: "y" })",
                                "broken.prototxt", &param)
                  .ok());
  NetOptions options;
  options.device = device;
  auto net = Net::Create(param, registry, options);
  ASSERT_TRUE(net.ok()) << net.status();
  auto loss = (*net)->Forward();
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ("net \"broken_net\", layer \"bad\" (Broken), forward: cublasSgemm: CUBLAS_STATUS_INVALID_VALUE",
            loss.status().message());
}

TEST(GpuErrorTest, OutOfDeviceMemoryWhileBuildingNamesNetLayerAndBytes) {
  NEREUS_GPU_OR_SKIP(shared);
  gpu::DeviceOptions options;
  options.memory_limit_bytes = 100;
  auto device = gpu::Device::Create(options);
  ASSERT_TRUE(device.ok()) << device.status();
  test::ExpectTinyIpNetRunsOutOfMemory(device->get(), "CUDA device 0");
}

TEST(GpuErrorTest, ALabelOutOfRangeIsAnErrorNamingTheLayer) {
  NEREUS_GPU_OR_SKIP(device);
  caffe::NetParameter param;
  ASSERT_TRUE(ParseNetParameter(R"(name: "labels"
layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 3 dim: 4 } shape { dim: 3 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "x" bottom: "label" top: "loss" })",
                                "labels.prototxt", &param)
                  .ok());
  NetOptions options;
  options.device = device;
  auto net = Net::Create(param, DefaultLayerRegistry(), options);
  ASSERT_TRUE(net.ok()) << net.status();
  float* label = (*net)->blob_by_name("label")->mutable_cpu_data();
  label[0] = 1;
  label[1] = 7;
  label[2] = 2;
  auto loss = (*net)->Forward();
  ASSERT_FALSE(loss.ok());
  EXPECT_EQ("net \"labels\", layer \"loss\" (SoftmaxWithLoss), forward: label 7 at position 1 is out of range [0, 4)",
            loss.status().message());
}

// --- Whole solvers on the GPU ---------------------------------------------

class GpuSolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/gpu_solver_test";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    test::WriteTinyLmdb(dir_ + "/lmdb");
    test::WriteText(dir_ + "/net.prototxt", test::TinyNet(dir_ + "/lmdb", 16));
  }

  // The tiny conv net's solver, on the GPU (gpu >= 0) or the CPU; the loss
  // of every iteration into *losses.
  std::unique_ptr<Solver> Make(int gpu, const std::string& update, std::vector<float>* losses,
                               const std::string& extra = "") {
    caffe::SolverParameter param;
    std::string text = test::TinySolver(dir_ + "/net.prototxt", 100, update) + extra;
    text.replace(text.find("display: 5"), 10, "display: 1");
    EXPECT_TRUE(ParseSolverParameter(text, "tiny_solver.prototxt", &param).ok());
    SolverOptions options;
    options.gpu = gpu >= 0 ? gpu : SolverOptions::kCpu;
    options.on_display = [losses](const TrainProgress& p) {
      if (losses != nullptr) losses->push_back(p.loss);
    };
    auto solver = Solver::Create(param, DefaultLayerRegistry(), nullptr, options);
    EXPECT_TRUE(solver.ok()) << solver.status();
    return solver.ok() ? std::move(solver).value() : nullptr;
  }

  std::string dir_;
};

// The CPU and the GPU train the conv net from the same weights on the same
// batches (the GPU's through page-locked buffers and the copy stream): the
// first iteration's losses agree within 1e-5 relative (one forward: GEMMs of
// at most 144 terms), the next ones within 1e-3 relative over 10 iterations
// (the rounding differences feed back through the updates and grow slowly).
TEST_F(GpuSolverTest, TrainsAsTheCpuDoes) {
  NEREUS_GPU_OR_SKIP(device);
  std::vector<float> cpu_losses, gpu_losses;
  auto cpu = Make(-1, test::kTinySgd, &cpu_losses);
  auto gpu = Make(0, test::kTinySgd, &gpu_losses);
  ASSERT_NE(nullptr, cpu);
  ASSERT_NE(nullptr, gpu);
  ASSERT_NE(nullptr, gpu->device());
  ExpectBitwise(test::LearnableWeights(*cpu), test::LearnableWeights(*gpu), "initial weights");
  ASSERT_TRUE(cpu->Step(10).ok());
  const Status s = gpu->Step(10);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(10u, gpu_losses.size());
  EXPECT_NEAR(cpu_losses[0], gpu_losses[0], 1e-5f * std::fabs(cpu_losses[0]));
  ExpectNear(cpu_losses, gpu_losses, 1e-3f, 1e-5f, "loss per iteration");
  EXPECT_LT(gpu_losses.back(), gpu_losses.front());  // It learns.
}

// Every solver type trains on the GPU as on the CPU: the losses of 5
// iterations within 1e-3 relative. (Not the weights: an adaptive solver moves
// a weight whose gradient is rounding noise by about its learning rate, in a
// direction the noise decides.)
TEST_F(GpuSolverTest, EverySolverTypeTrainsAsOnTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* update :
       {"type: \"Nesterov\" base_lr: 0.05 momentum: 0.9 lr_policy: \"fixed\"\n",
        "type: \"AdaGrad\" base_lr: 0.05 lr_policy: \"fixed\" delta: 1e-6\n",
        "type: \"RMSProp\" base_lr: 0.01 lr_policy: \"fixed\" rms_decay: 0.98 delta: 1e-6\n",
        "type: \"AdaDelta\" base_lr: 1 momentum: 0.95 lr_policy: \"fixed\" delta: 1e-6\n",
        "type: \"Adam\" base_lr: 0.01 momentum: 0.9 momentum2: 0.999 lr_policy: \"fixed\" delta: 1e-8\n"}) {
    std::vector<float> cpu_losses, gpu_losses;
    auto cpu = Make(-1, update, &cpu_losses);
    auto gpu = Make(0, update, &gpu_losses);
    ASSERT_TRUE(cpu->Step(5).ok());
    const Status s = gpu->Step(5);
    ASSERT_TRUE(s.ok()) << s;
    ExpectNear(cpu_losses, gpu_losses, 1e-3f, 1e-5f, update);
  }
}

// Snapshots read the device's weights and histories; a restored GPU solver
// continues exactly as one that never stopped (the same GPU, the same cuBLAS:
// the same bits), in both formats.
TEST_F(GpuSolverTest, SnapshotAndRestoreResumeBitwise) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* format : {"BINARYPROTO", "HDF5"}) {
    const std::string extra =
        std::string("snapshot_prefix: \"") + dir_ + "/snap_" + format + "\"\nsnapshot_format: " + format + "\n";
    auto straight = Make(0, test::kTinySgd, nullptr, extra);
    ASSERT_TRUE(straight->Step(6).ok());
    auto first = Make(0, test::kTinySgd, nullptr, extra);
    ASSERT_TRUE(first->Step(3).ok());
    std::string model, state;
    ASSERT_TRUE(first->Snapshot(&model, &state).ok());
    // The history written is the device's.
    const Blob* h = first->history()[0].get();
    caffe::SolverState saved;
    if (std::string(format) == "HDF5") {
      ASSERT_TRUE(ReadSolverStateFromHdf5(state, &saved).ok());
    } else {
      ASSERT_TRUE(ReadProtoFromBinaryFile(state, &saved).ok());
    }
    ASSERT_EQ(h->count(), saved.history(0).data_size());
    for (int i = 0; i < h->count(); ++i) ASSERT_EQ(h->cpu_data()[i], saved.history(0).data(i)) << format;
    auto resumed = Make(0, test::kTinySgd, nullptr, extra);
    ASSERT_TRUE(resumed->Restore(state).ok());
    EXPECT_EQ(3, resumed->iter());
    // The data layer of a fresh solver starts at the first batch: skip the
    // three the first run read, as --snapshot's resume does.
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(resumed->net()->ForwardFromTo(0, 0).ok());
    ASSERT_TRUE(resumed->Step(3).ok());
    ExpectBitwise(test::LearnableWeights(*straight), test::LearnableWeights(*resumed),
                  std::string(format) + " weights after 3 + 3");
  }
}

// --weights: a .caffemodel (written by a CPU run) loaded into a GPU net gives
// the CPU net's forward.
TEST_F(GpuSolverTest, WeightsFromACaffemodelGiveTheCpuForward) {
  NEREUS_GPU_OR_SKIP(device);
  auto cpu = Make(-1, test::kTinySgd, nullptr);
  ASSERT_TRUE(cpu->Step(4).ok());
  caffe::NetParameter weights;
  cpu->net()->ToProto(&weights);
  const std::string path = dir_ + "/w.caffemodel";
  ASSERT_TRUE(WriteProtoToBinaryFile(weights, path).ok());
  auto gpu = Make(0, test::kTinySgd, nullptr);
  auto cpu2 = Make(-1, test::kTinySgd, nullptr);
  ASSERT_TRUE(CopyTrainedLayersFromFile(path, gpu->net()).ok());
  ASSERT_TRUE(CopyTrainedLayersFromFile(path, cpu2->net()).ok());
  auto gpu_loss = gpu->net()->Forward();
  auto cpu_loss = cpu2->net()->Forward();
  ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
  ASSERT_TRUE(cpu_loss.ok());
  EXPECT_NEAR(*cpu_loss, *gpu_loss, 1e-5f * std::fabs(*cpu_loss));
}

}  // namespace
}  // namespace nereus

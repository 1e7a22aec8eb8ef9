// CudaStaging on a real GPU (label gpu; skipped with "no CUDA device"
// elsewhere, a failure under NEREUS_REQUIRE_GPU=1): a layer's gradients reach
// the pinned mirror after the compute stream's work before them, the hand-over
// runs on the staging's thread after the copy, the compute stream sees
// uploaded weights, and a failed copy names the layer and the call. The
// ordering itself is checked everywhere against HostStaging
// (device_staging_test). And the sufficient factors behind it
// (StagedFactors): rebuilt on the device as on the CPU, within the GEMM
// bound, and HybComm's choice at the rates measured there.
#include "worker/bridge/cuda_staging.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "common/update/hybcomm.h"
#include "tests/support/fixtures.h"
#include "tests/support/layer_test.h"
#include "worker/bridge/staged_factors.h"
#include "worker/trainer/gpu/host_buffer.h"

namespace nereus {
namespace {

constexpr size_t kCount = 1 << 20;  // 4 MiB: long enough a copy to lose a race.

TEST(CudaStagingTest, GradientsLeaveAfterTheComputeBeforeThemAndAreHandedOverAfterTheCopy) {
  NEREUS_GPU_OR_SKIP(device);
  auto staging = NewCudaStaging(device);
  ASSERT_TRUE(staging.ok()) << staging.status();
  auto grad = device->memory()->Allocate(kCount * sizeof(float));
  ASSERT_TRUE(grad.ok()) << grad.status();
  gpu::HostBuffer mirror(kCount, device->memory()), produced(kCount, device->memory());
  ASSERT_TRUE(mirror.pinned());
  for (size_t i = 0; i < kCount; ++i) produced.data()[i] = static_cast<float>(i % 1000) + 0.25f;
  // "The backward": the compute stream writes the gradient, asynchronously.
  ASSERT_EQ(
      cudaMemcpyAsync(*grad, produced.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, device->compute_stream()),
      cudaSuccess);
  std::atomic<bool> handed{false};
  std::thread::id handed_on;
  std::vector<float> at_hand_over;
  ASSERT_TRUE((*staging)
                  ->StageGradients(3, "fc6", {{mirror.data(), *grad, kCount * sizeof(float)}},
                                   [&](const Status& st) {
                                     EXPECT_TRUE(st.ok()) << st;
                                     handed_on = std::this_thread::get_id();
                                     at_hand_over.assign(mirror.data(), mirror.data() + kCount);
                                     handed = true;
                                   })
                  .ok());
  ASSERT_TRUE((*staging)->Drain().ok());
  EXPECT_TRUE(handed.load());
  EXPECT_NE(handed_on, std::this_thread::get_id());
  ASSERT_EQ(at_hand_over.size(), kCount);
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(at_hand_over[i], produced.data()[i]) << "element " << i;
  EXPECT_TRUE((*staging)->Shutdown().ok());
  device->memory()->Free(*grad, kCount * sizeof(float));
}

TEST(CudaStagingTest, TheComputeStreamSeesTheUploadedWeights) {
  NEREUS_GPU_OR_SKIP(device);
  auto staging = NewCudaStaging(device);
  ASSERT_TRUE(staging.ok()) << staging.status();
  auto weights = device->memory()->Allocate(kCount * sizeof(float));
  ASSERT_TRUE(weights.ok()) << weights.status();
  gpu::HostBuffer mirror(kCount, device->memory()), seen(kCount, device->memory());
  for (size_t i = 0; i < kCount; ++i) mirror.data()[i] = static_cast<float>(i % 777) - 0.5f;
  ASSERT_TRUE((*staging)->StageWeights(1, "conv1", {{*weights, mirror.data(), kCount * sizeof(float)}}).ok());
  // "The forward": reads the weights on the compute stream.
  ASSERT_EQ(
      cudaMemcpyAsync(seen.data(), *weights, kCount * sizeof(float), cudaMemcpyDeviceToHost, device->compute_stream()),
      cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(device->compute_stream()), cudaSuccess);
  for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(seen.data()[i], mirror.data()[i]) << "element " << i;
  EXPECT_TRUE((*staging)->Shutdown().ok());
  device->memory()->Free(*weights, kCount * sizeof(float));
}

TEST(CudaStagingTest, AFailedCopyNamesTheLayerAndTheCall) {
  NEREUS_GPU_OR_SKIP(device);
  auto staging = NewCudaStaging(device);
  ASSERT_TRUE(staging.ok()) << staging.status();
  gpu::HostBuffer mirror(4, device->memory());
  const Status st = (*staging)->StageWeights(2, "ip1", {{nullptr, mirror.data(), 4 * sizeof(float)}});
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("copying the weights of layer \"ip1\" to the device: cudaMemcpyAsync", 0), 0u) << st;
  EXPECT_EQ((*staging)->StageGradients(2, "ip1", {}, [](const Status&) {}).message(), st.message());
  cudaGetLastError();  // Leave no error behind for the next test.
}

// StagedFactors on the device (the CPU half: staged_factors_test): the
// update rebuilt with cuBLAS and the solver step on the compute stream
// against the same factors rebuilt on the CPU (OpenBLAS, common/update/sgd.h).
// Bound, per element, derived here: the two GEMMs sum the same n = 64
// products in other orders, so each gradient differs by at most
// (2n + 2) u scale sum|l r| (u = 2^-24; the 2 for alpha's rounding); SGD
// with momentum m and rate r carries it as dh' <= m dh + r dg, dw' <= dw +
// dh' (the step's own rounding on nearly equal inputs: 1e-6 absolute, the
// weights being O(1)).
TEST(CudaStagedFactorsTest, TheDeviceRebuildIsTheCpusWithinTheGemmBound) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  constexpr int kK = 32, kRows = 64, kCols = 96, kWorkers = 2, kClocks = 3;
  const pb::SgdConfig sgd = test::FixedMomentumSgd();  // base_lr 0.1, momentum 0.5, fixed.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  // Each instance's own factor blobs (naming them moves their memory) and weights.
  Blob top_gpu({kK, kRows}), bottom_gpu({kK, kCols}), top_cpu({kK, kRows}), bottom_cpu({kK, kCols});
  Blob w_gpu({kRows, kCols}), w_cpu({kRows, kCols});
  for (int i = 0; i < w_cpu.count(); ++i) w_cpu.mutable_cpu_data()[i] = w_gpu.mutable_cpu_data()[i] = normal(rng);
  Layer::GradientFactors on_device, on_host;
  on_device.rows = on_host.rows = kK;
  on_device.left = {&top_gpu, true};
  on_device.right = {&bottom_gpu, false};
  on_host.left = {&top_cpu, true};
  on_host.right = {&bottom_cpu, false};
  StagedFactors gpu_side(device, sgd, kWorkers), cpu_side(nullptr, sgd, kWorkers);
  gpu_side.Add(0, "fc/0", on_device, &w_gpu, 1.0f, 0.0f);
  cpu_side.Add(0, "fc/0", on_host, &w_cpu, 1.0f, 0.0f);
  ASSERT_TRUE(gpu_side.MeasureRates().ok());
  EXPECT_GT(gpu_side.rebuild_gflops(), 0.0);
  EXPECT_EQ(gpu_side.rebuild_on(), device->description() + " (cuBLAS)");
  ASSERT_TRUE(gpu_side.Choose({5}, {5}).ok());
  ASSERT_TRUE(cpu_side.Choose({5}, {5}).ok());
  auto copies = gpu_side.FactorCopies(0, on_device);
  ASSERT_TRUE(copies.ok()) << copies.status();
  EXPECT_EQ((*copies)[0].src, top_gpu.gpu_diff());
  EXPECT_EQ((*copies)[1].src, bottom_gpu.gpu_data());

  const double u = std::ldexp(1.0, -24), rate = 0.1, momentum = 0.5, scale = 1.0 / kWorkers;
  std::vector<double> dh(kRows * kCols, 0.0), dw(kRows * kCols, 0.0);
  std::vector<float> w_before(w_cpu.cpu_data(), w_cpu.cpu_data() + kRows * kCols);
  for (int64_t clock = 0; clock < kClocks; ++clock) {
    std::vector<std::vector<float>> l(kWorkers, std::vector<float>(kK * kRows)),
        r(kWorkers, std::vector<float>(kK * kCols));
    std::vector<FactorApplier::RankFactors> by_rank;
    for (int w = 0; w < kWorkers; ++w) {
      for (float& x : l[w]) x = normal(rng);
      for (float& x : r[w]) x = normal(rng);
      by_rank.push_back({kK, l[w].data(), r[w].data()});
    }
    ASSERT_TRUE(gpu_side.ApplyFactors(5, clock, by_rank).ok());
    ASSERT_TRUE(cpu_side.ApplyFactors(5, clock, by_rank).ok());
    ASSERT_TRUE(gpu_side.Rebuild(0, clock + 1).ok());
    ASSERT_TRUE(cpu_side.Rebuild(0, clock + 1).ok());
    ASSERT_TRUE(device->Synchronize().ok());
    for (int i = 0; i < kRows; ++i) {
      for (int j = 0; j < kCols; ++j) {
        double sum = 0;
        for (int w = 0; w < kWorkers; ++w)
          for (int s = 0; s < kK; ++s) sum += std::fabs(double(l[w][s * kRows + i]) * r[w][s * kCols + j]);
        const double dg = (2.0 * kK * kWorkers + 2) * u * scale * sum;
        const int e = i * kCols + j;
        dh[e] = momentum * dh[e] + rate * dg;
        dw[e] += dh[e];
      }
    }
    const float* a = w_gpu.cpu_data();
    const float* b = w_cpu.cpu_data();
    double moved = 0;
    for (int e = 0; e < kRows * kCols; ++e) {
      ASSERT_LE(std::fabs(double(a[e]) - b[e]), dw[e] + 1e-6) << "clock " << clock << ", element " << e;
      moved = std::max(moved, std::fabs(double(a[e]) - w_before[e]));
    }
    // The update happened (the weights move by about rate x |g|, g ~ 4).
    EXPECT_GT(moved, 0.1) << "clock " << clock;
    w_before.assign(b, b + kRows * kCols);
  }
  EXPECT_EQ(gpu_side.rebuilds(), kClocks);
  EXPECT_TRUE(device->TakeError().ok());
}

// HybComm at the rates StagedFactors measures on this GPU: VGG-19's fc6
// (K = 32, 4 workers x 4 servers, links and server apply at 5 GB/s, the case
// hybcomm_test prices with a CPU's rebuild) goes as factors, where at the CPU rates measured there
// (36.9 GFLOP/s, bench/results/hybcomm) it stays on the servers
// (hybcomm_test, BytesFavourSfbButACpuRebuildMakesItSlower).
TEST(CudaStagedFactorsTest, AtTheMeasuredGpuRatesVgg19Fc6GoesAsFactors) {
  NEREUS_GPU_OR_SKIP(device);
  gpu::ScopedDevice scope(device);
  Blob top({32, 4096}), bottom({32, 25088}), weights({4096, 25088});
  Layer::GradientFactors fc6;
  fc6.rows = 32;
  fc6.left = {&top, true};
  fc6.right = {&bottom, false};
  StagedFactors staged(device, test::FixedMomentumSgd(), 4);
  staged.Add(0, "fc6/0", fc6, &weights, 1.0f, 1.0f);
  ASSERT_TRUE(staged.MeasureRates().ok());
  // Far above any CPU's (GPU.md: fc6's GEMM at 40 TFLOP/s on an H200).
  EXPECT_GT(staged.rebuild_gflops(), 1000.0);
  EXPECT_GT(staged.update_gbytes(), 20.0);
  HybCommRates rates;
  rates.link_bytes_per_s = 5e9;
  rates.apply_bytes_per_s = 5e9;
  rates.rebuild_flops_per_s = staged.rebuild_gflops() * 1e9;
  rates.update_bytes_per_s = staged.update_gbytes() * 1e9;
  rates.rebuild_on = staged.rebuild_on();
  auto choice = DecideHybComm(SfbMode::kAuto, 4, 4, pb::BSP, rates, {{"fc6", 4096, 25088, 32}});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_TRUE((*choice)[0].sfb) << FormatHybCommTable(SfbMode::kAuto, 4, 4, rates, *choice);
  EXPECT_EQ((*choice)[0].reason, "auto: SFB costs less");
  EXPECT_TRUE(device->TakeError().ok());
}

}  // namespace
}  // namespace nereus

// CudaStaging on a real GPU (label gpu; skipped with "no CUDA device"
// elsewhere, a failure under NEREUS_REQUIRE_GPU=1): a layer's gradients reach
// the pinned mirror after the compute stream's work before them, the hand-over
// runs on the staging's thread after the copy, the compute stream sees
// uploaded weights, and a failed copy names the layer and the call. The
// ordering itself is checked everywhere against HostStaging
// (device_staging_test).
#include "worker/param_sync/cuda_staging.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/support/layer_test.h"
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

}  // namespace
}  // namespace nereus

// What layer tests share (Caffe's MultiDeviceTest/GPUDeviceTest idea): a
// fixture typed over the device a layer runs on, the GPU a test may use, and
// a CPU-against-GPU comparison of one layer.
//
//   template <typename TypeParam>
//   class ReLUTest : public test::LayerTest<TypeParam> {};
//   TYPED_TEST_SUITE(ReLUTest, test::TestDevices, test::DeviceNames);
//   TYPED_TEST(ReLUTest, Forward) {
//     auto layer = this->MakeLayer("name: 'r' type: 'ReLU'");
//     ...   // layer runs on the CPU, or on the GPU (the test then skips
//   }       // where there is none)
//
// Test names end in /Cpu or /Gpu, and tests/CMakeLists.txt's
// nereus_add_device_test registers one binary as two ctest tests: NAME runs
// the /Cpu tests (label layers), NAME_gpu the /Gpu ones and every test whose
// name has "Gpu" in it (label gpu).
//
// No GPU: a GPU test calls GTEST_SKIP() with "no CUDA device" (ctest reports
// the test skipped); with NEREUS_REQUIRE_GPU=1 in the environment (set by
// scripts/gpu_check.sh on GPU machines) it fails instead, so a GPU test never
// passes by skipping where a GPU is expected.
#ifndef NEREUS_TESTS_SUPPORT_LAYER_TEST_H_
#define NEREUS_TESTS_SUPPORT_LAYER_TEST_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/support/gradient_checker.h"
#include "worker/trainer/blob.h"
#include "worker/trainer/gpu/device.h"
#include "worker/trainer/layer.h"
#include "worker/trainer/layer_registry.h"

namespace nereus {
namespace test {

struct CpuDevice {
  static constexpr bool kGpu = false;
};
struct GpuDevice {
  static constexpr bool kGpu = true;
};
using TestDevices = ::testing::Types<CpuDevice, GpuDevice>;
struct DeviceNames {
  template <typename T>
  static std::string GetName(int) {
    return T::kGpu ? "Gpu" : "Cpu";
  }
};

// Whether NEREUS_REQUIRE_GPU=1: a missing GPU is then a failure, not a skip.
inline bool GpuRequired() {
  const char* v = std::getenv("NEREUS_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// The test binary's GPU (device 0, created once and kept for the binary's
// life: creating cuBLAS handles per test would cost seconds), or nullptr
// where there is none.
inline gpu::Device* TestGpu() {
  static gpu::Device* device = [] {
    if (gpu::DeviceCount() == 0) return static_cast<gpu::Device*>(nullptr);
    auto created = gpu::Device::Create(gpu::DeviceOptions());
    CHECK(created.ok()) << "a CUDA device is present but could not be set up: " << created.status();
    return std::move(created).value().release();
  }();
  return device;
}

// Why there is no GPU, for skip and failure messages: "no CUDA device (<the
// runtime's words>)", or "no CUDA device: Nereus was built without CUDA ...".
inline std::string NoGpuReason() {
  const std::string why = gpu::CheckDeviceId(0).message();
  return why.rfind("no CUDA device", 0) == 0 ? why : "no CUDA device: " + why;
}

}  // namespace test
}  // namespace nereus

// In a TEST body: `device_var` = the test GPU, or skip ("no CUDA device") /
// fail under NEREUS_REQUIRE_GPU=1.
#define NEREUS_GPU_OR_SKIP(device_var)                                                                         \
  ::nereus::gpu::Device* device_var = ::nereus::test::TestGpu();                                               \
  if (device_var == nullptr) {                                                                                 \
    if (::nereus::test::GpuRequired()) FAIL() << "NEREUS_REQUIRE_GPU=1 but " << ::nereus::test::NoGpuReason(); \
    GTEST_SKIP() << ::nereus::test::NoGpuReason();                                                             \
  }

namespace nereus {
namespace test {

template <typename TypeParam>
class LayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TypeParam::kGpu) return;
    device_ = TestGpu();
    if (device_ == nullptr) {
      if (GpuRequired()) FAIL() << "NEREUS_REQUIRE_GPU=1 but " << NoGpuReason();
      GTEST_SKIP() << NoGpuReason();
    }
    scope_ = std::make_unique<gpu::ScopedDevice>(device_);
  }
  void TearDown() override {
    if (device_ != nullptr) {
      const Status s = device_->Synchronize();
      EXPECT_TRUE(s.ok()) << "the GPU reported: " << s;
    }
  }

  // nullptr on the CPU.
  gpu::Device* device() const { return device_; }
  bool on_gpu() const { return device_ != nullptr; }

  // A layer of any registered type from prototxt text, with this fixture's
  // random engine and device, not yet set up.
  std::unique_ptr<Layer> MakeLayer(const std::string& text) {
    auto created = DefaultLayerRegistry().Create(ParseLayerParameter(text));
    CHECK(created.ok()) << created.status();
    std::unique_ptr<Layer> layer = std::move(created).value();
    layer->set_rng(&rng_);
    layer->set_device(device_);
    return layer;
  }

  // A gradient check of the layer `text` on one bottom of `shape`, filled
  // from this fixture's engine (the layer's fillers draw from it next).
  void ExpectLayerGradient(const std::string& text, const std::vector<int>& shape, const CheckerSettings& settings,
                           BottomFill fill = BottomFill::kGaussian) {
    ExpectLayerGradient(text, std::vector<std::vector<int>>{shape}, settings, fill);
  }
  // The same with a bottom of each of `shapes`, filled in turn.
  void ExpectLayerGradient(const std::string& text, const std::vector<std::vector<int>>& shapes,
                           const CheckerSettings& settings, BottomFill fill = BottomFill::kGaussian) {
    FilledBottoms bottoms(shapes, fill, &rng_);
    Blob top;
    std::unique_ptr<Layer> layer = MakeLayer(text);
    ExpectGradient(layer.get(), bottoms.bottom, {&top}, settings);
  }

  std::mt19937 rng_{1701};

 private:
  gpu::Device* device_ = nullptr;
  std::unique_ptr<gpu::ScopedDevice> scope_;
};

// |actual - expected| <= atol + rtol * |expected|, element by element.
struct Tolerance {
  float rtol = 0.0f;
  float atol = 0.0f;
};

// Fills bottom `index` of a comparison (its blob given); the default fills
// N(0, 1) draws from the comparison's engine.
using BottomFiller = std::function<void(int index, Blob* blob, std::mt19937* rng)>;

// Runs the layer `param` on the CPU and on `device` from the same weights
// (two layers built with engines of the same seed), the same bottoms and the
// same top gradients, and compares the tops, then (when `backward`) the
// bottoms' and the parameters' gradients within `tolerance` (exactly when it
// is {0, 0}). Returns the number of elements compared.
inline long ExpectGpuMatchesCpu(gpu::Device* device, const std::string& param_text,
                                const std::vector<std::vector<int>>& bottom_shapes, Tolerance tolerance,
                                bool backward = true, BottomFiller fill = nullptr,
                                std::vector<bool> propagate_down = {}) {
  const caffe::LayerParameter param = ParseLayerParameter(param_text);
  LayerRegistry registry = DefaultLayerRegistry();
  std::mt19937 cpu_rng(1701), gpu_rng(1701), data_rng(7);
  auto cpu_created = registry.Create(param);
  auto gpu_created = registry.Create(param);
  CHECK(cpu_created.ok() && gpu_created.ok()) << cpu_created.status();
  std::unique_ptr<Layer> cpu_layer = std::move(cpu_created).value();
  std::unique_ptr<Layer> gpu_layer = std::move(gpu_created).value();
  cpu_layer->set_rng(&cpu_rng);
  gpu_layer->set_rng(&gpu_rng);
  gpu_layer->set_device(device);
  gpu::ScopedDevice scope(device);

  std::vector<std::unique_ptr<Blob>> cpu_bottoms, gpu_bottoms;
  std::vector<Blob*> cpu_bottom, gpu_bottom;
  for (size_t i = 0; i < bottom_shapes.size(); ++i) {
    cpu_bottoms.push_back(std::make_unique<Blob>(bottom_shapes[i]));
    if (fill) {
      fill(static_cast<int>(i), cpu_bottoms.back().get(), &data_rng);
    } else {
      FillGaussian(cpu_bottoms.back().get(), &data_rng);
    }
    gpu_bottoms.push_back(std::make_unique<Blob>(bottom_shapes[i]));
    gpu_bottoms.back()->CopyFrom(*cpu_bottoms.back());
    cpu_bottom.push_back(cpu_bottoms.back().get());
    gpu_bottom.push_back(gpu_bottoms.back().get());
  }
  const int num_tops = std::max({cpu_layer->ExactNumTopBlobs(), cpu_layer->MinTopBlobs(), param.top_size(), 1});
  std::vector<std::unique_ptr<Blob>> tops;
  std::vector<Blob*> cpu_top, gpu_top;
  for (int i = 0; i < 2 * num_tops; ++i) tops.push_back(std::make_unique<Blob>());
  for (int i = 0; i < num_tops; ++i) {
    cpu_top.push_back(tops[i].get());
    gpu_top.push_back(tops[num_tops + i].get());
  }
  Status s = cpu_layer->SetUp(cpu_bottom, cpu_top);
  EXPECT_TRUE(s.ok()) << s;
  s = gpu_layer->SetUp(gpu_bottom, gpu_top);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return 0;

  long compared = 0;
  auto compare = [&](const char* what, int index, const float* expected, const float* actual, int count) {
    for (int k = 0; k < count; ++k) {
      const float bound = tolerance.atol + tolerance.rtol * std::fabs(expected[k]);
      ++compared;
      if (!(std::fabs(actual[k] - expected[k]) <= bound) && !(actual[k] == expected[k])) {
        ADD_FAILURE() << param.type() << " " << what << " " << index << "[" << k << "]: GPU " << actual[k] << ", CPU "
                      << expected[k] << " (difference " << actual[k] - expected[k] << ", bound " << bound << ")";
        return;  // One message per blob.
      }
    }
  };
  cpu_layer->Forward(cpu_bottom, cpu_top);
  gpu_layer->Forward(gpu_bottom, gpu_top);
  s = device->TakeError();
  EXPECT_TRUE(s.ok()) << "GPU forward: " << s;
  for (int i = 0; i < num_tops; ++i) {
    EXPECT_EQ(cpu_top[i]->shape(), gpu_top[i]->shape());
    compare("top", i, cpu_top[i]->cpu_data(), gpu_top[i]->cpu_data(), cpu_top[i]->count());
  }
  if (!backward) return compared;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < num_tops; ++i) {
    float* cpu_diff = cpu_top[i]->mutable_cpu_diff();
    for (int k = 0; k < cpu_top[i]->count(); ++k) cpu_diff[k] = normal(data_rng);
    gpu_top[i]->CopyFrom(*cpu_top[i], /*copy_diff=*/true);
  }
  if (propagate_down.empty()) propagate_down.assign(cpu_bottom.size(), true);
  for (size_t p = 0; p < cpu_layer->blobs().size(); ++p) {
    caffe_set(cpu_layer->blobs()[p]->count(), 0.0f, cpu_layer->blobs()[p]->mutable_cpu_diff());
    caffe_set(gpu_layer->blobs()[p]->count(), 0.0f, gpu_layer->blobs()[p]->mutable_cpu_diff());
  }
  cpu_layer->Backward(cpu_top, propagate_down, cpu_bottom);
  gpu_layer->Backward(gpu_top, propagate_down, gpu_bottom);
  s = device->TakeError();
  EXPECT_TRUE(s.ok()) << "GPU backward: " << s;
  for (size_t i = 0; i < cpu_bottom.size(); ++i) {
    if (!propagate_down[i]) continue;
    compare("bottom diff", static_cast<int>(i), cpu_bottom[i]->cpu_diff(), gpu_bottom[i]->cpu_diff(),
            cpu_bottom[i]->count());
  }
  for (size_t p = 0; p < cpu_layer->blobs().size(); ++p) {
    compare("param diff", static_cast<int>(p), cpu_layer->blobs()[p]->cpu_diff(), gpu_layer->blobs()[p]->cpu_diff(),
            cpu_layer->blobs()[p]->count());
  }
  return compared;
}

}  // namespace test
}  // namespace nereus

#endif  // NEREUS_TESTS_SUPPORT_LAYER_TEST_H_

// Every layer with GPU code, on the GPU against the CPU from the same weights,
// bottoms and top gradients (test::ExpectGpuMatchesCpu), at sizes a real net
// has in miniature; and the prefetching data layers' GPU path (page-locked
// batches, the copy stream; Data, and HDF5Data with three tops) against
// their CPU path. Label gpu: skipped ("no CUDA device")
// where there is none, a failure under NEREUS_REQUIRE_GPU=1.
//
// The tolerance of each comparison, and why:
//   exact ({0, 0})  the GPU runs the CPU's element functions in the CPU's
//                   order, built with --fmad=false: ReLU, pooling (forward,
//                   and backward gathered in the order the CPU scatters),
//                   Eltwise PROD/MAX, Scale's forward, Accuracy, Split,
//                   im2col/col2im, AbsVal, Threshold, PReLU (its slope
//                   gradient gathered per slope in the CPU's order), Power
//                   without pow (power 1), Concat, Slice, Clip;
//   4e-6 relative   CUDA's tanhf/expf/powf are within 2 ulp of glibc's, and
//                   one or two such results feed the rest (Sigmoid, TanH,
//                   Softmax, LRN);
//   4e-6 relative   the same for BNLL, ELU, Exp, Log, Power and Swish, whose
//   + 3e-7 abs.     results near 0 come from a cancellation (ELU's exp(x) - 1,
//                   BNLL's log(1 + exp(x)) for x << 0): 2 ulp of a value near
//                   1 is up to 1.2e-7 absolute, twice that once scaled (alpha,
//                   the top gradient);
//   1e-4 relative   cuBLAS sums (GEMM, GEMV, dot) in another order than
//   + 1e-4 abs.     OpenBLAS, with fused multiply-adds: K * 2^-24 relative to
//                   the sum of |terms| (K <= 600 here); the absolute floor
//                   covers results that cancel to near zero (convolution,
//                   deconvolution, inner product, BatchNorm's, Scale's and
//                   Bias's sums, SoftmaxWithLoss's mean, Eltwise SUM's axpy);
//                   EuclideanLoss's and SigmoidCrossEntropyLoss's sums too
//                   (the GPU sums in double, the CPU in float: n * 2^-24
//                   relative, n <= 160 here, of terms of one sign).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <hdf5_hl.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/layer_test.h"
#include "tests/support/process_util.h"
#include "tests/support/tiny_train_job.h"
#include "worker/trainer/data/data_layer.h"
#include "worker/trainer/data/hdf5_data_layer.h"

namespace nereus {
namespace {

using test::ExpectGpuMatchesCpu;
using test::Tolerance;

constexpr Tolerance kExact{0.0f, 0.0f};
constexpr Tolerance kUlps{4e-6f, 1e-7f};
constexpr Tolerance kSums{1e-4f, 1e-4f};
constexpr Tolerance kCancelling{4e-6f, 3e-7f};

// Bottom 0 Gaussian (standard deviation `stddev`); the others, labels or
// indices, hold (i * step) % modulo at element i.
test::BottomFiller GaussianThenModulo(float stddev, int step, int modulo) {
  return [=](int index, Blob* blob, std::mt19937* rng) {
    if (index == 0) {
      test::FillGaussian(blob, rng, stddev);
      return;
    }
    for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>((i * step) % modulo);
  };
}

TEST(LayerGpuTest, Convolution) {
  NEREUS_GPU_OR_SKIP(device);
  const char* configs[] = {
      "num_output: 8 kernel_size: 3 pad: 1",
      "num_output: 6 kernel_size: 3 stride: 2 group: 2",
      "num_output: 4 kernel_size: 1",  // 1x1: the GPU skips im2col
      "num_output: 4 kernel_h: 3 kernel_w: 2 pad_h: 1 pad_w: 0 stride_h: 1 stride_w: 2 dilation: 2",
      "num_output: 5 kernel_size: 5 stride: 4 pad: 2 bias_term: false",
  };
  for (const char* config : configs) {
    const long n = ExpectGpuMatchesCpu(
        device,
        std::string("name: 'c' type: 'Convolution' convolution_param { ") + config +
            " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' std: 0.1 } }",
        {{3, 4, 11, 9}}, kSums);
    EXPECT_GT(n, 0) << config;
  }
}

TEST(LayerGpuTest, ConvolutionBatchLargerThanOneColumnChunk) {
  NEREUS_GPU_OR_SKIP(device);
  // 40 images of 3x64x64, kernel 3: 27 x 3844 floats of columns each, so the
  // GPU's 256 MiB column budget holds them all; still one chunk, many images.
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 'c' type: 'Convolution' convolution_param { num_output: 8 kernel_size: 3 "
                                "weight_filler { type: 'gaussian' std: 0.1 } }",
                                {{40, 3, 64, 64}}, kSums),
            0);
}

TEST(LayerGpuTest, Deconvolution) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* config : {"num_output: 3 kernel_size: 4 stride: 2 pad: 1", "num_output: 4 kernel_size: 1"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device,
                                  std::string("name: 'd' type: 'Deconvolution' convolution_param { ") + config +
                                      " weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'gaussian' "
                                      "std: 0.1 } }",
                                  {{2, 6, 7, 5}}, kSums),
              0)
        << config;
  }
}

TEST(LayerGpuTest, InnerProduct) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* transpose : {"false", "true"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device,
                                  std::string("name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 37 "
                                              "transpose: ") +
                                      transpose +
                                      " weight_filler { type: 'gaussian' std: 0.05 } bias_filler { type: 'gaussian' "
                                      "std: 0.1 } }",
                                  {{16, 6, 10, 10}}, kSums),
              0);
  }
}

TEST(LayerGpuTest, PoolingIsBitwiseTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  const char* configs[] = {"pool: MAX kernel_size: 3 stride: 2", "pool: MAX kernel_size: 2 stride: 2 pad: 1",
                           "pool: AVE kernel_size: 3 stride: 2", "pool: AVE kernel_size: 3 stride: 1 pad: 1",
                           "pool: AVE global_pooling: true"};
  for (const char* config : configs) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, std::string("name: 'p' type: 'Pooling' pooling_param { ") + config + " }",
                                  {{3, 5, 13, 12}}, kExact),
              0)
        << config;
  }
  // MAX with its argmax as a second top.
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 'p' type: 'Pooling' top: 'p' top: 'mask' "
                                "pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }",
                                {{2, 3, 9, 9}}, kExact),
            0);
}

TEST(LayerGpuTest, NeuronLayers) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'r' type: 'ReLU'", {{4, 3, 8, 8}}, kExact), 0);
  EXPECT_GT(
      ExpectGpuMatchesCpu(device, "name: 'r' type: 'ReLU' relu_param { negative_slope: 0.1 }", {{4, 3, 8, 8}}, kExact),
      0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Sigmoid'", {{4, 3, 8, 8}}, kUlps), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 't' type: 'TanH'", {{4, 3, 8, 8}}, kUlps), 0);
  // TEST-phase dropout passes the data through (with scale_train: false, scaled).
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'd' type: 'Dropout' phase: TEST", {{4, 100}}, kExact), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 'd' type: 'Dropout' phase: TEST dropout_param { dropout_ratio: 0.3 "
                                "scale_train: false }",
                                {{4, 100}}, kUlps),
            0);
}

TEST(LayerGpuTest, ElementwiseLayers) {
  NEREUS_GPU_OR_SKIP(device);
  const std::vector<std::vector<int>> shape = {{4, 3, 8, 8}};
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'a' type: 'AbsVal'", shape, kExact), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 't' type: 'Threshold' threshold_param { threshold: 0.25 }", shape,
                                kExact, /*backward=*/false),
            0);
  EXPECT_GT(
      ExpectGpuMatchesCpu(device, "name: 'r' type: 'PReLU' prelu_param { filler { type: 'gaussian' } }", shape, kExact),
      0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'r' type: 'PReLU' prelu_param { channel_shared: true }", shape, kExact),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'p' type: 'Power' power_param { scale: 2 shift: 1 }", shape, kExact), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'c' type: 'Clip' clip_param { min: -0.5 max: 0.75 }", shape, kExact), 0);
  for (const char* text : {"name: 'b' type: 'BNLL'", "name: 'e' type: 'ELU' elu_param { alpha: 0.5 }",
                           "name: 'x' type: 'Exp'", "name: 'x' type: 'Exp' exp_param { base: 2 scale: 0.5 shift: 1 }",
                           "name: 'l' type: 'Log' log_param { shift: 5 }",
                           "name: 'l' type: 'Log' log_param { base: 10 scale: 0.5 shift: 4 }",
                           "name: 'p' type: 'Power' power_param { power: 1.5 scale: 0.5 shift: 4 }",
                           "name: 'p' type: 'Power' power_param { power: 2 scale: 0.5 shift: 1 }",
                           "name: 's' type: 'Swish'", "name: 's' type: 'Swish' swish_param { beta: -1.5 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, shape, kCancelling), 0) << text;
  }
}

TEST(LayerGpuTest, Losses) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'l' type: 'EuclideanLoss'", {{16, 10}, {16, 10}}, kSums), 0);
  auto targets = [](int index, Blob* blob, std::mt19937* rng) {
    if (index == 0) {
      test::FillGaussian(blob, rng, 3.0f);
      return;
    }
    for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = 0.25f * static_cast<float>((i * 7) % 5);
  };
  for (const char* loss_param :
       {"", "loss_param { ignore_label: 1 normalization: VALID }", "loss_param { normalization: FULL }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, std::string("name: 'l' type: 'SigmoidCrossEntropyLoss' ") + loss_param,
                                  {{16, 10}, {16, 10}}, kSums, true, targets, {true, false}),
              0)
        << loss_param;
  }
}

TEST(LayerGpuTest, ConcatAndSliceAreBitwiseTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'c' type: 'Concat'", {{2, 3, 4, 5}, {2, 1, 4, 5}, {2, 2, 4, 5}}, kExact),
            0);
  EXPECT_GT(
      ExpectGpuMatchesCpu(device, "name: 'c' type: 'Concat' concat_param { axis: 0 }", {{2, 3, 4}, {1, 3, 4}}, kExact),
      0);
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 's' type: 'Slice' top: 'a' top: 'b' top: 'c' "
                                "slice_param { slice_point: 1 slice_point: 4 }",
                                {{2, 6, 4, 5}}, kExact),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Slice' top: 'a' top: 'b' slice_param { axis: -1 }",
                                {{3, 4, 6}}, kExact),
            0);
}

TEST(LayerGpuTest, ArgMaxIsBitwiseTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  auto with_ties = [](int, Blob* blob, std::mt19937* rng) {
    test::FillGaussian(blob, rng);
    for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = std::round(2.0f * blob->cpu_data()[i]);
  };
  for (const char* param :
       {"top_k: 1", "top_k: 3 out_max_val: true", "top_k: 2 axis: 1 out_max_val: true", "axis: -1"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, std::string("name: 'a' type: 'ArgMax' argmax_param { ") + param + " }",
                                  {{8, 6, 5}}, kExact, /*backward=*/false, with_ties),
              0)
        << param;
  }
}

TEST(LayerGpuTest, Lrn) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* region : {"ACROSS_CHANNELS", "WITHIN_CHANNEL"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device,
                                  std::string("name: 'n' type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: "
                                              "0.75 norm_region: ") +
                                      region + " }",
                                  {{3, 16, 9, 9}}, Tolerance{1e-5f, 1e-6f}),
              0)
        << region;
  }
}

TEST(LayerGpuTest, BatchNormTrainTestAndScale) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'bn' type: 'BatchNorm' phase: TRAIN", {{8, 16, 7, 7}}, kSums), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 'bn' type: 'BatchNorm' phase: TEST batch_norm_param { use_global_stats: false }",
                                {{8, 16, 7, 7}}, kSums),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 's' type: 'Scale' scale_param { bias_term: true filler { type: 'gaussian' } "
                                "bias_filler { type: 'gaussian' } }",
                                {{8, 16, 7, 7}}, kSums),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Scale' scale_param { axis: 1 num_axes: 1 }", {{8, 16, 7, 7}},
                                kSums),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Scale'", {{8, 16, 7, 7}, {16}}, kSums), 0);
}

TEST(LayerGpuTest, Bias) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'b' type: 'Bias' bias_param { filler { type: 'gaussian' } }",
                                {{8, 16, 7, 7}}, kSums),
            0);
  EXPECT_GT(
      ExpectGpuMatchesCpu(device, "name: 'b' type: 'Bias' bias_param { axis: 0 num_axes: -1 }", {{4, 6, 5}}, kSums), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'b' type: 'Bias'", {{8, 16, 7, 7}, {16, 7}}, kSums), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'b' type: 'Bias'", {{8, 16, 7}, {}}, kSums), 0);
}

TEST(LayerGpuTest, BatchNormGlobalStatisticsAfterTraining) {
  NEREUS_GPU_OR_SKIP(device);
  // use_global_stats reads the running statistics: zero at first (factor 0).
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'bn' type: 'BatchNorm' phase: TEST", {{4, 6, 5, 5}}, kSums), 0);
}

TEST(LayerGpuTest, Eltwise) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'e' type: 'Eltwise' eltwise_param { operation: PROD }",
                                {{2, 3, 5, 5}, {2, 3, 5, 5}, {2, 3, 5, 5}}, kExact),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'e' type: 'Eltwise' eltwise_param { operation: MAX }",
                                {{2, 3, 5, 5}, {2, 3, 5, 5}, {2, 3, 5, 5}}, kExact),
            0);
  EXPECT_GT(
      ExpectGpuMatchesCpu(device, "name: 'e' type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -0.5 }",
                          {{2, 3, 5, 5}, {2, 3, 5, 5}}, kUlps),
      0);
}

TEST(LayerGpuTest, SoftmaxAndLoss) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Softmax'", {{8, 1000}}, Tolerance{1e-5f, 1e-9f}), 0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Softmax' softmax_param { axis: 1 }", {{2, 5, 4, 3}},
                                Tolerance{1e-5f, 1e-7f}),
            0);
  const test::BottomFiller labels = GaussianThenModulo(3.0f, 7, 10);
  for (const char* loss_param : {"", "loss_param { ignore_label: 3 }", "loss_param { normalization: BATCH_SIZE }",
                                 "loss_param { normalization: FULL ignore_label: 0 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(
                  device, std::string("name: 'l' type: 'SoftmaxWithLoss' top: 'loss' top: 'prob' ") + loss_param,
                  {{32, 10}, {32}}, Tolerance{1e-5f, 1e-6f}, true, labels, {true, false}),
              0)
        << loss_param;
  }
}

TEST(LayerGpuTest, AccuracyIsBitwiseTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  const test::BottomFiller labels = GaussianThenModulo(1.0f, 3, 10);
  for (const char* param : {"", "accuracy_param { top_k: 3 }", "accuracy_param { ignore_label: 4 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, std::string("name: 'a' type: 'Accuracy' top: 'a' top: 'per_class' ") + param,
                                  {{64, 10}, {64}}, kExact, /*backward=*/false, labels),
              0)
        << param;
  }
}

TEST(LayerGpuTest, SplitIsBitwiseTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 's' type: 'Split' top: 'a' top: 'b' top: 'c'", {{3, 4, 5}}, kExact), 0);
}

// A prefetching data layer (`layer`, its rng seeded `seed`) on the CPU and
// on `device`: `iterations` batches of its `tops` tops, each made on the
// device and the CPU's bytes.
template <typename DataLayerT>
void ExpectGpuBatchesAreTheCpus(gpu::Device* device, const std::string& layer, uint32_t seed, int tops,
                                int iterations) {
  const caffe::LayerParameter param = test::ParseLayerParameter(layer);
  std::mt19937 cpu_rng(seed), gpu_rng(seed);
  DataLayerT cpu(param), on_gpu(param);
  cpu.set_rng(&cpu_rng);
  on_gpu.set_rng(&gpu_rng);
  on_gpu.set_device(device);
  gpu::ScopedDevice scope(device);
  std::vector<Blob> cpu_tops(tops), gpu_tops(tops);
  std::vector<Blob*> cpu_top, gpu_top;
  for (int t = 0; t < tops; ++t) {
    cpu_top.push_back(&cpu_tops[t]);
    gpu_top.push_back(&gpu_tops[t]);
  }
  ASSERT_TRUE(cpu.SetUp({}, cpu_top).ok());
  ASSERT_TRUE(on_gpu.SetUp({}, gpu_top).ok());
  for (int iter = 0; iter < iterations; ++iter) {
    cpu.Forward({}, cpu_top);
    on_gpu.Forward({}, gpu_top);
    const Status s = device->TakeError();
    ASSERT_TRUE(s.ok()) << s;
    for (int t = 0; t < tops; ++t) {
      ASSERT_EQ(cpu_tops[t].shape(), gpu_tops[t].shape());
      ASSERT_EQ(SyncedMemory::Head::kAtGpu, gpu_tops[t].data()->head()) << "top " << t << " made on the device";
      ASSERT_EQ(0, std::memcmp(cpu_tops[t].cpu_data(), gpu_tops[t].cpu_data(), sizeof(float) * cpu_tops[t].count()))
          << "iteration " << iter << ", top " << t;
    }
  }
}

// The Data layer on the GPU gives the CPU's batches, in the CPU's order
// (through page-locked buffers and the copy stream, one batch ahead).
TEST(LayerGpuTest, DataLayerGivesTheCpuBatches) {
  NEREUS_GPU_OR_SKIP(device);
  const test::TempDir temp;
  const std::string& dir = temp.path();
  test::WriteTinyLmdb(dir + "/lmdb");
  // 256 records, 24 a batch: 13 batches wrap around the database once.
  ExpectGpuBatchesAreTheCpus<data::DataLayer>(
      device,
      "name: 'data' type: 'Data' top: 'data' top: 'label' phase: TRAIN transform_param { scale: 0.00390625 } "
      "data_param { source: '" +
          dir + "/lmdb' batch_size: 24 backend: LMDB prefetch: 2 }",
      3, 2, 13);
}

// HDF5Data's three tops (any number, any shape) go through the same
// staging, shuffled, wrapping around its file: the CPU's batches.
TEST(LayerGpuTest, Hdf5DataWithThreeTopsGivesTheCpuBatches) {
  NEREUS_GPU_OR_SKIP(device);
  const test::TempDir temp;
  const std::string& dir = temp.path();
  const hid_t file = H5Fcreate((dir + "/rows.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  std::vector<float> a(10 * 3 * 2), b(10 * 4), c(10);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.5f * static_cast<float>(i);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 3);
  const hsize_t a_dims[] = {10, 3, 2}, b_dims[] = {10, 4}, c_dims[] = {10};
  ASSERT_GE(H5LTmake_dataset_float(file, "a", 3, a_dims, a.data()), 0);
  ASSERT_GE(H5LTmake_dataset_float(file, "b", 2, b_dims, b.data()), 0);
  ASSERT_GE(H5LTmake_dataset_float(file, "c", 1, c_dims, c.data()), 0);
  H5Fclose(file);
  {
    std::ofstream list(dir + "/list.txt");
    list << dir << "/rows.h5\n";
  }
  // 32 rows: three passes over the file, reshuffled.
  ExpectGpuBatchesAreTheCpus<data::Hdf5DataLayer>(
      device,
      "name: 'h5' type: 'HDF5Data' top: 'a' top: 'b' top: 'c' phase: TRAIN data_param { prefetch: 2 } "
      "hdf5_data_param { source: '" +
          dir + "/list.txt' batch_size: 4 shuffle: true }",
      5, 3, 8);
}

// Issue 31's Caffe layers, part B. The losses sum their positions in double
// in another order than the CPU (kSums); each position's term and every
// gradient run the CPU's element functions in its order. BatchReindex,
// Filter, Embed (no atomics) and Parameter are bitwise the CPU.
TEST(LayerGpuTest, CaffeLabelAndContrastiveLosses) {
  NEREUS_GPU_OR_SKIP(device);
  // Bottom 0 scores or probabilities in (0.05, 1), bottom 1 labels of 10
  // classes, bottom 2 an infogain matrix in [0, 2).
  auto fill = [](int index, Blob* blob, std::mt19937* rng) {
    std::uniform_real_distribution<float> unit(0.05f, 1.0f);
    for (int i = 0; i < blob->count(); ++i) {
      blob->mutable_cpu_data()[i] = index == 1 ? static_cast<float>((i * 7) % 10) : (index == 2 ? 2 : 1) * unit(*rng);
    }
  };
  for (const char* text : {"name: 'h' type: 'HingeLoss'", "name: 'h' type: 'HingeLoss' hinge_loss_param { norm: L2 }",
                           "name: 'm' type: 'MultinomialLogisticLoss'"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, {{16, 10}, {16}}, kSums, true, fill, {true, false}), 0) << text;
  }
  for (const char* param : {"", "loss_param { ignore_label: 3 normalization: FULL }"}) {
    EXPECT_GT(
        ExpectGpuMatchesCpu(device, std::string("name: 'i' type: 'InfogainLoss' top: 'loss' top: 'prob' ") + param,
                            {{16, 10}, {16}, {10, 10}}, Tolerance{1e-5f, 1e-6f}, true, fill, {true, false, false}),
        0)
        << param;
  }
  auto pairs = [](int index, Blob* blob, std::mt19937* rng) {
    if (index == 2) {
      for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>(i % 2);
      return;
    }
    test::FillGaussian(blob, rng, 0.5f);
  };
  for (const char* param : {"", "contrastive_loss_param { margin: 2 legacy_version: true }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, std::string("name: 'c' type: 'ContrastiveLoss' ") + param,
                                  {{32, 8}, {32, 8}, {32}}, kSums, true, pairs, {true, true, false}),
              0)
        << param;
  }
}

TEST(LayerGpuTest, BatchReindexFilterEmbedParameterAreBitwiseTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  const test::BottomFiller indices = GaussianThenModulo(1.0f, 5, 6);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'r' type: 'BatchReindex'", {{6, 3, 4}, {9}}, kExact, true, indices,
                                {true, false}),
            0);
  auto selected = [](int index, Blob* blob, std::mt19937* rng) {
    if (index < 2) {
      test::FillGaussian(blob, rng);
      return;
    }
    for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = i % 3 == 0 ? 0.0f : 1.0f;
  };
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'f' type: 'Filter' top: 'a' top: 'b'", {{6, 3, 4}, {6, 2}, {6}}, kExact,
                                true, selected, {true, true, false}),
            0);
  auto words = [](int, Blob* blob, std::mt19937*) {
    for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>((i * 3) % 7);
  };
  EXPECT_GT(ExpectGpuMatchesCpu(device,
                                "name: 'e' type: 'Embed' embed_param { num_output: 6 input_dim: 7 "
                                "weight_filler { type: 'gaussian' } bias_filler { type: 'gaussian' } }",
                                {{5, 4}}, kExact, true, words, {false}),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'p' type: 'Parameter' parameter_param { shape { dim: 3 dim: 4 } }", {},
                                kExact),
            0);
}

// Tile copies values and adds its tiles in the CPU's order: the CPU's bits.
TEST(LayerGpuTest, Tile) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* text :
       {"name: 't' type: 'Tile' tile_param { tiles: 3 }", "name: 't' type: 'Tile' tile_param { axis: 0 tiles: 2 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, {{4, 6, 9, 11}}, kExact), 0) << text;
  }
}

// Reduction adds each item's entries in the CPU's order, a thread an item:
// the CPU's bits.
TEST(LayerGpuTest, Reduction) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* text : {"name: 'r' type: 'Reduction'",
                           "name: 'r' type: 'Reduction' reduction_param { operation: ASUM axis: 1 coeff: -2 }",
                           "name: 'r' type: 'Reduction' reduction_param { operation: SUMSQ axis: 2 }",
                           "name: 'r' type: 'Reduction' reduction_param { operation: MEAN axis: -1 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, {{4, 6, 9, 11}}, kExact), 0) << text;
  }
}

// Crop copies values: the CPU's bits (bottom 1's gradient: zeros).
TEST(LayerGpuTest, Crop) {
  NEREUS_GPU_OR_SKIP(device);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'c' type: 'Crop' crop_param { offset: 1 offset: 2 }",
                                {{4, 6, 9, 11}, {4, 6, 5, 7}}, kExact),
            0);
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'c' type: 'Crop' crop_param { axis: 1 offset: 2 }",
                                {{4, 6, 9, 11}, {4, 3, 5, 7}}, kExact, true, nullptr, {true, false}),
            0);
}

// MVN's sums run a thread a group in the CPU's order, and sqrtf and the
// division are correctly rounded: the CPU's bits.
TEST(LayerGpuTest, MVN) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* text : {"name: 'm' type: 'MVN'", "name: 'm' type: 'MVN' mvn_param { across_channels: true }",
                           "name: 'm' type: 'MVN' mvn_param { normalize_variance: false }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, {{4, 6, 9, 11}}, kExact), 0) << text;
  }
}

// Im2col runs im2col.h's kernels (the convolution's): the CPU's bits.
TEST(LayerGpuTest, Im2col) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* text : {"name: 'i' type: 'Im2col' convolution_param { kernel_size: 3 pad: 1 stride: 2 }",
                           "name: 'i' type: 'Im2col' convolution_param { kernel_h: 2 kernel_w: 3 dilation: 2 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, {{4, 6, 9, 11}}, kExact), 0) << text;
  }
}

// SPP's levels are Poolings (bitwise the CPU) and its sum of their
// gradients adds in the CPU's order: the CPU's bits.
TEST(LayerGpuTest, SPP) {
  NEREUS_GPU_OR_SKIP(device);
  for (const char* text : {"name: 's' type: 'SPP' spp_param { pyramid_height: 3 }",
                           "name: 's' type: 'SPP' spp_param { pyramid_height: 3 pool: AVE }",
                           "name: 's' type: 'SPP' spp_param { pyramid_height: 1 }"}) {
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, {{4, 6, 9, 11}}, kExact), 0) << text;
  }
}

// LSTMUnit: CUDA's tanhf is within 2 ulp of glibc's, and a gradient chains up
// to four such factors, one of them 1 - tanh(c)^2 (a cancellation near
// |c| >> 1): 1e-5 relative, 1e-6 absolute.
TEST(LayerGpuTest, LSTMUnit) {
  NEREUS_GPU_OR_SKIP(device);
  const test::BottomFiller fill = [](int index, Blob* blob, std::mt19937* rng) {
    if (index == 2) {
      for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>(i % 3 != 0);
    } else {
      test::FillGaussian(blob, rng);
    }
  };
  EXPECT_GT(ExpectGpuMatchesCpu(device, "name: 'u' type: 'LSTMUnit'", {{1, 16, 20}, {1, 16, 80}, {1, 16}},
                                Tolerance{1e-5f, 1e-6f}, true, fill, {true, true, false}),
            0);
}

// LSTM and RNN (`type`, with `hidden_blobs` blobs of initial state when
// exposed): x (5 steps x 8 streams x 12), cont (0 at the first step, then
// mostly 1) and x_static (8 x 6), the hidden state hidden and exposed.
void ExpectRecurrentGpuMatchesCpu(gpu::Device* device, const std::string& name_and_type, int hidden_blobs) {
  const test::BottomFiller fill = [](int index, Blob* blob, std::mt19937* rng) {
    if (index == 1) {  // cont: 0 at the first step, then mostly 1
      for (int i = 0; i < blob->count(); ++i) blob->mutable_cpu_data()[i] = static_cast<float>(i >= 8 && i % 5 != 0);
    } else {
      test::FillGaussian(blob, rng);
    }
  };
  for (const char* exposed : {"", "expose_hidden: true"}) {
    const std::string text = name_and_type + " recurrent_param { num_output: 16 " + exposed +
                             " weight_filler { type: 'uniform' min: -0.2 max: 0.2 } bias_filler { type: 'uniform' "
                             "min: -0.2 max: 0.2 } }";
    std::vector<std::vector<int>> shapes = {{5, 8, 12}, {5, 8}, {8, 6}};  // x, cont, x_static
    std::vector<bool> down = {true, false, true};
    if (*exposed != '\0') {
      for (int h = 0; h < hidden_blobs; ++h) shapes.push_back({1, 8, 16});
      for (int h = 0; h < hidden_blobs; ++h) down.push_back(true);
    }
    EXPECT_GT(ExpectGpuMatchesCpu(device, text, shapes, kSums, true, fill, down), 0) << exposed;
  }
}

// LSTM: cuBLAS's products (the GEMM bound) feed tanhf and the LSTM steps.
TEST(LayerGpuTest, LSTM) {
  NEREUS_GPU_OR_SKIP(device);
  ExpectRecurrentGpuMatchesCpu(device, "name: 'l' type: 'LSTM'", 2);
}

// RNN: cuBLAS's products (the GEMM bound) feed tanhf step after step.
TEST(LayerGpuTest, RNN) {
  NEREUS_GPU_OR_SKIP(device);
  ExpectRecurrentGpuMatchesCpu(device, "name: 'r' type: 'RNN'", 1);
}

}  // namespace
}  // namespace nereus

// A parameter-server job whose workers train on a GPU (label gpu; skipped
// with "no CUDA device" elsewhere, a failure under NEREUS_REQUIRE_GPU=1):
// nereus_worker --gpu=0 as 2 workers of the tiny conv net, with 2 servers,
// both workers on the one GPU, against the same job on the CPU. Their
// gradients leave the device through the CudaStaging that the runner makes
// (worker/bridge/trainer_runner.h) and their weights come back through it.
//
// Tolerance: the servers apply the same SGD to the gradients of both jobs
// (on their CPUs, the same code), and the staging moves bytes unchanged, so
// the jobs differ only where the GPU's forward and backward round
// differently from the CPU's: cuBLAS sums the GEMMs in another order (each
// within K * 2^-24 of the sum of |terms|, K <= 36 here), CUDA's expf is
// within 2 ulp of glibc's (the softmax), and the loss is summed in double on
// the device where the CPU sums in float. So iteration 0's loss (one forward
// from the same weights: worker 0's, on the servers) agrees within 1e-5
// relative, and the later ones, where these differences feed back through
// the updates, within 1e-3 relative + 1e-5 over 10 iterations: the bound
// GpuSolverTest.TrainsAsTheCpuDoes (tests/worker/trainer/gpu/gpu_test.cc)
// uses for this net trained standalone on the GPU, which also rounds the
// update on the device (here the servers' is the CPU's). The displayed
// losses are printed with 6 significant digits (5e-6 relative), within both.
//
// Under BSP both workers of a job pull the same weights every clock, so each
// job's two final weights files are equal bit for bit.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/bytes_equal.h"
#include "tests/support/layer_test.h"
#include "tests/support/process_util.h"
#include "tests/support/tiny_train_job.h"
#include "tests/support/train_test_util.h"

namespace nereus {
namespace test {
namespace {

constexpr int kIterations = 10;

// The job of 2 workers (batch 32) x 2 servers on the tiny data in `dir`,
// every worker with `worker_flags` as well; every iteration displayed.
// `solver`: a solver file of its own (the tiny one when empty).
void RunJob(const TempDir& dir, const std::vector<std::string>& worker_flags, std::string solver_file = "") {
  if (solver_file.empty()) {
    WriteTinyLmdb(dir.File("tiny_lmdb"));
    WriteText(dir.File("net.prototxt"), TinyNet(dir.File("tiny_lmdb"), 32));
    std::string solver = TinySolver(dir.File("net.prototxt"), kIterations);
    solver.replace(solver.find("display: 5"), 10, "display: 1");
    WriteText(dir.File("solver.prototxt"), solver);
    solver_file = dir.File("solver.prototxt");
  }
  ClusterSpec spec = TwoWorkerTrainJob(dir, solver_file, {"--partition_bytes=128"});
  spec.worker_flags.insert(spec.worker_flags.end(), worker_flags.begin(), worker_flags.end());
  LocalCluster cluster(spec, dir);
  std::string report;
  ASSERT_TRUE(cluster.WaitAll(std::chrono::seconds(90), &report)) << report;
  for (auto code : cluster.codes()) ASSERT_EQ(code, 0) << report;
}

// Worker `rank`'s displayed loss of each iteration ("worker R: Iteration N,
// loss = X, ..."), in order.
std::vector<float> Losses(const TempDir& dir, int rank) {
  const std::string log = ReadFile(dir.File("worker" + std::to_string(rank) + ".log"));
  const std::regex line("worker " + std::to_string(rank) + R"(: Iteration (\d+), loss = ([-+0-9.eE]+),)");
  std::vector<float> losses;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), static_cast<int>(losses.size())) << log;
    losses.push_back(std::stof((*it)[2]));
  }
  return losses;
}

// Both workers' losses of job `a` and job `b` (named so in messages):
// `iterations` of each; iteration 0 within `first` relative (no update yet),
// every one within 1e-3 relative + 1e-5 (the bound the tests derive); and
// job `b` learned.
void ExpectLossesAgree(const TempDir& a, const char* a_name, const TempDir& b, const char* b_name, int iterations,
                       float first) {
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<float> la = Losses(a, rank), lb = Losses(b, rank);
    ASSERT_EQ(la.size(), static_cast<size_t>(iterations));
    ASSERT_EQ(lb.size(), static_cast<size_t>(iterations));
    EXPECT_NEAR(la[0], lb[0], first * std::fabs(la[0])) << "worker " << rank << ", iteration 0";
    for (int i = 0; i < iterations; ++i) {
      EXPECT_LE(std::fabs(la[i] - lb[i]), 1e-5f + 1e-3f * std::fabs(la[i]))
          << "worker " << rank << ", iteration " << i << ": " << a_name << " " << la[i] << ", " << b_name << " "
          << lb[i];
    }
    EXPECT_LT(lb.back(), lb.front()) << "worker " << rank << " did not learn";
  }
}

TEST(GpuJobTest, TwoGpuWorkersAndTwoServersTrainAsTheCpuJobDoes) {
  NEREUS_GPU_OR_SKIP(device);
  TempDir cpu, gpu;
  ASSERT_NO_FATAL_FAILURE(RunJob(cpu, {}));
  ASSERT_NO_FATAL_FAILURE(RunJob(gpu, {"--gpu=" + std::to_string(device->device_id())}));
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadFile(gpu.File("worker" + std::to_string(rank) + ".log"));
    EXPECT_NE(log.find("are staged through pinned host memory"), std::string::npos) << log;
    EXPECT_EQ(ReadFile(cpu.File("worker" + std::to_string(rank) + ".log")).find("staged through"), std::string::npos);
  }
  ExpectLossesAgree(cpu, "CPU", gpu, "GPU", kIterations, 1e-5f);
  for (const TempDir* dir : {&cpu, &gpu}) {
    const auto w0 = ReadWeights(dir->File("w0.caffemodel")), w1 = ReadWeights(dir->File("w1.caffemodel"));
    ASSERT_EQ(w0.size(), 6u);  // conv1, ip1, ip2: weights and biases.
    EXPECT_TRUE(test::BytesEqual(w0, w1)) << dir->path();
  }
}

// LeNet (worker/trainer/models/, batch 64) on MNIST as a job of 2 GPU
// workers x 2 servers on the one GPU, against the same job on the CPU, 20
// iterations. The bound is the tiny net's (above), for the same reasons:
// LeNet's GEMMs sum up to 800 terms (ip1), where the tiny net's sum 36, but
// the per-element error bound K * 2^-24 of the sum of |terms| is still below
// 5e-5 relative of that sum, and the standalone LeNet trained on this GPU
// stays within 1.2e-4 relative of the CPU's losses over 30 iterations
// (bench/results/gpu/, lenet.json). The MNIST LMDBs come from
// $NEREUS_SOURCE_DIR/data/mnist (scripts/get_mnist.sh; gpu_check.sh packs them).
TEST(GpuJobTest, LeNetOnTwoGpuWorkersTrainsAsOnTheCpu) {
  NEREUS_GPU_OR_SKIP(device);
  const char* source = std::getenv("NEREUS_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "NEREUS_SOURCE_DIR is not set";
  const std::string mnist = std::string(source) + "/data/mnist/mnist_train_lmdb";
  ASSERT_TRUE(std::ifstream(mnist + "/data.mdb").good()) << "no MNIST LMDB at " << mnist << " (scripts/get_mnist.sh)";
  constexpr int kLeNetIterations = 20;
  TempDir cpu, gpu;
  std::string net = ReadFile(std::string(source) + "/worker/trainer/models/lenet_train_test.prototxt");
  net.replace(net.find("data/mnist/mnist_train_lmdb"), 27, mnist);
  net.replace(net.find("data/mnist/mnist_test_lmdb"), 26, std::string(source) + "/data/mnist/mnist_test_lmdb");
  for (const TempDir* dir : {&cpu, &gpu}) {
    WriteText(dir->File("lenet.prototxt"), net);
    WriteText(dir->File("solver.prototxt"),
              "net: \"" + dir->File("lenet.prototxt") +
                  "\"\nbase_lr: 0.01\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: \"inv\"\ngamma: 0.0001\n"
                  "power: 0.75\ndisplay: 1\nmax_iter: " +
                  std::to_string(kLeNetIterations) + "\nsnapshot_after_train: false\nrandom_seed: 1\n");
  }
  ASSERT_NO_FATAL_FAILURE(RunJob(cpu, {}, cpu.File("solver.prototxt")));
  ASSERT_NO_FATAL_FAILURE(RunJob(gpu, {"--gpu=" + std::to_string(device->device_id())}, gpu.File("solver.prototxt")));
  ExpectLossesAgree(cpu, "CPU", gpu, "GPU", kLeNetIterations, 1e-5f);
}

// Sufficient factors from GPU workers (StagedFactors): with --sfb=on the
// weights of ip1 and ip2 leave each worker as their factors (32 rows of top
// diff and bottom data, copied off the device) and every worker rebuilds the
// update on the GPU (one cuBLAS GEMM over both workers' 64 rows, then the SGD
// step on the device); with --sfb=off they go through the servers. Tolerance:
// the two paths differ only in how the averaged gradient of ip1 and ip2 is
// summed (one GEMM of 64 rows against two of 32 whose results the servers
// average in float): per element within (2 * 64 + 2) * 2^-24 of the sum of
// |terms|, the size of the differences the test above bounds (GEMMs summed
// in another order), fed through 10 updates: so iteration 0 (no update yet)
// agrees exactly and the rest within the same 1e-3 relative + 1e-5. Under BSP
// both workers rebuild the same stacked factors with the same GEMM on the
// same GPU, so their final weights are equal bit for bit.
TEST(GpuJobTest, SufficientFactorsRebuiltOnTheGpuTrainAsTheServersDo) {
  NEREUS_GPU_OR_SKIP(device);
  TempDir off, on;
  const std::string gpu = "--gpu=" + std::to_string(device->device_id());
  ASSERT_NO_FATAL_FAILURE(RunJob(off, {gpu, "--sfb=off"}));
  ASSERT_NO_FATAL_FAILURE(RunJob(on, {gpu, "--sfb=on"}));
  const std::string log0 = ReadFile(on.File("worker0.log"));
  EXPECT_NE(log0.find("sufficient factors are rebuilt on " + device->description() + " (cuBLAS)"), std::string::npos)
      << log0;
  ExpectLossesAgree(off, "servers", on, "SFB", kIterations, 0.0f);  // Iteration 0: equal.
  const auto w0 = ReadWeights(on.File("w0.caffemodel")), w1 = ReadWeights(on.File("w1.caffemodel"));
  ASSERT_EQ(w0.size(), 6u);
  EXPECT_TRUE(test::BytesEqual(w0, w1));
  EXPECT_GT(MaxAbsDiff(w0, ReadWeights(off.File("w0.caffemodel"))), 0.0) << "the SFB job did not use factors";
}

}  // namespace
}  // namespace test
}  // namespace nereus

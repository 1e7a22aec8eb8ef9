// The staging between a device and the client's host memory
// (worker/bridge/device_staging.h), against its CPU implementation
// (HostStaging: host threads stand in for the compute and copy streams), so
// that CI checks the ordering the CUDA implementation must keep: a layer's
// gradient copy starts only after its backward, the hand-over (`done`, where
// the bridge calls Client::GradientsReady) only after the copy, a forward
// waits for its weights' upload, copies complete in the order staged, a
// failed copy names the layer and stops everything after it, and Shutdown
// runs what is pending and joins.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "tests/support/fixtures.h"
#include "worker/bridge/cuda_staging.h"
#include "worker/bridge/host_staging.h"
#include "worker/bridge/trainer_runner.h"
#include "worker/trainer/gpu/device.h"

namespace nereus {
namespace {

using test::Gate;

// What happened, in order, from any thread.
class Log {
 public:
  void Add(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(what);
  }
  std::vector<std::string> entries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }
  // The entries that start with one of `prefixes`, in order.
  std::vector<std::string> Only(const std::vector<std::string>& prefixes) const {
    std::vector<std::string> out;
    for (const std::string& e : entries()) {
      for (const std::string& p : prefixes) {
        if (e.rfind(p, 0) == 0) {
          out.push_back(e);
          break;
        }
      }
    }
    return out;
  }
  // Position of `what` (fails the test when absent).
  size_t Index(const std::string& what) const {
    const auto all = entries();
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == what) return i;
    ADD_FAILURE() << "\"" << what << "\" never happened";
    return all.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> entries_;
};

HostStagingOptions StreamsOnThreads(Log* log) {
  HostStagingOptions o;
  o.host_computes = false;
  o.trace = [log](const std::string& what) { log->Add(what); };
  return o;
}

StagingCopy CopyOf(std::vector<float>* dst, const std::vector<float>& src) {
  return {dst->data(), src.data(), src.size() * sizeof(float)};
}

TEST(HostStagingTest, TheGradientCopyStartsOnlyAfterTheLayersBackward) {
  Log log;
  HostStaging staging(StreamsOnThreads(&log));
  Gate backward_may_end;
  std::vector<float> grad(4, 0.0f), mirror(4, -1.0f);
  staging.EnqueueCompute([&] {
    log.Add("backward 2 begin");
    backward_may_end.Wait();
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.5f + static_cast<float>(i);  // The layer's gradient.
    log.Add("backward 2 end");
  });
  ASSERT_TRUE(staging
                  .StageGradients(2, "ip2", {CopyOf(&mirror, grad)},
                                  [&](const Status& st) { log.Add("done 2 " + st.ToString()); })
                  .ok());
  // The copy stream has nothing it may run while the backward is running.
  staging.WaitUntilSettled(HostStaging::Stream::kCopy);
  EXPECT_TRUE(log.Only({"d2h", "done"}).empty()) << "the copy ran before the backward ended";
  backward_may_end.Open();
  ASSERT_TRUE(staging.Drain().ok());
  EXPECT_EQ(log.entries(),
            (std::vector<std::string>{"backward 2 begin", "backward 2 end", "d2h 2 begin", "d2h 2 end", "done 2 OK"}));
  EXPECT_EQ(mirror, (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
}

TEST(HostStagingTest, LayersAreHandedOverInBackwardOrderEachAfterItsCopy) {
  Log log;
  HostStaging staging(StreamsOnThreads(&log));
  std::vector<std::vector<float>> grads(4, std::vector<float>(3, 0.0f)), mirrors(4, std::vector<float>(3, 0.0f));
  for (int layer = 3; layer >= 1; --layer) {
    staging.EnqueueCompute([&, layer] {
      for (float& g : grads[layer]) g = static_cast<float>(layer);
      log.Add("backward " + std::to_string(layer));
    });
    ASSERT_TRUE(staging
                    .StageGradients(layer, "l" + std::to_string(layer), {CopyOf(&mirrors[layer], grads[layer])},
                                    [&, layer](const Status& st) {
                                      // The bytes are on the host when the layer is handed over.
                                      EXPECT_EQ(mirrors[layer], std::vector<float>(3, static_cast<float>(layer)));
                                      log.Add("done " + std::to_string(layer) + " " + st.ToString());
                                    })
                    .ok());
  }
  ASSERT_TRUE(staging.Drain().ok());
  // The copy stream: each layer's copy, then its hand-over, in the order staged.
  EXPECT_EQ(log.Only({"d2h", "done"}),
            (std::vector<std::string>{"d2h 3 begin", "d2h 3 end", "done 3 OK", "d2h 2 begin", "d2h 2 end", "done 2 OK",
                                      "d2h 1 begin", "d2h 1 end", "done 1 OK"}));
  EXPECT_EQ(log.Only({"backward"}), (std::vector<std::string>{"backward 3", "backward 2", "backward 1"}));
  for (int layer = 3; layer >= 1; --layer) {
    const std::string l = std::to_string(layer);
    EXPECT_LT(log.Index("backward " + l), log.Index("d2h " + l + " begin"));
  }
}

TEST(HostStagingTest, EachLayersCopiesAreReportedAsASpanBeforeItsHandOver) {
  Log log;
  HostStaging staging(StreamsOnThreads(&log));
  staging.set_span_sink([&](int layer, bool to_host, int64_t begin_us, int64_t end_us) {
    EXPECT_LE(begin_us, end_us);
    log.Add(std::string(to_host ? "span d2h " : "span h2d ") + std::to_string(layer));
  });
  std::vector<float> grad = {1.0f}, mirror = {0.0f};
  ASSERT_TRUE(staging.StageGradients(2, "ip", {CopyOf(&mirror, grad)}, [&](const Status&) { log.Add("done 2"); }).ok());
  ASSERT_TRUE(staging.StageGradients(1, "relu", {}, [&](const Status&) { log.Add("done 1"); }).ok());  // No copies.
  ASSERT_TRUE(staging.StageWeights(2, "ip", {CopyOf(&grad, mirror)}).ok());
  ASSERT_TRUE(staging.Drain().ok());
  EXPECT_EQ(log.Only({"span", "done"}), (std::vector<std::string>{"span d2h 2", "done 2", "done 1", "span h2d 2"}));
}

TEST(HostStagingTest, TheForwardWaitsForItsWeightsUpload) {
  Log log;
  Gate upload_may_run;
  HostStagingOptions options = StreamsOnThreads(&log);
  options.before_copy = [&](int layer, bool to_host) {
    if (!to_host) upload_may_run.Wait();
    return Status::OK();
  };
  HostStaging staging(options);
  std::vector<float> mirror = {1.0f, 2.0f}, weights = {0.0f, 0.0f}, seen;
  ASSERT_TRUE(staging.StageWeights(1, "conv1", {CopyOf(&weights, mirror)}).ok());
  staging.EnqueueCompute([&] {
    seen = weights;
    log.Add("forward 1");
  });
  // The compute stream has nothing it may run while the upload is held back.
  staging.WaitUntilSettled(HostStaging::Stream::kCompute);
  EXPECT_TRUE(log.Only({"forward"}).empty()) << "the forward ran before its weights arrived";
  upload_may_run.Open();
  ASSERT_TRUE(staging.Drain().ok());
  EXPECT_EQ(log.entries(), (std::vector<std::string>{"h2d 1 begin", "h2d 1 end", "forward 1"}));
  EXPECT_EQ(seen, mirror);
}

TEST(HostStagingTest, UploadsCompleteInTheOrderStagedBeforeTheForwardsThatNeedThem) {
  Log log;
  HostStaging staging(StreamsOnThreads(&log));
  std::vector<float> mirror = {7.0f}, weights0 = {0.0f}, weights1 = {0.0f};
  ASSERT_TRUE(staging.StageWeights(0, "a", {CopyOf(&weights0, mirror)}).ok());
  staging.EnqueueCompute([&] { log.Add("forward 0"); });
  ASSERT_TRUE(staging.StageWeights(1, "b", {CopyOf(&weights1, mirror)}).ok());
  staging.EnqueueCompute([&] { log.Add("forward 1"); });
  ASSERT_TRUE(staging.Drain().ok());
  EXPECT_EQ(log.Only({"h2d"}), (std::vector<std::string>{"h2d 0 begin", "h2d 0 end", "h2d 1 begin", "h2d 1 end"}));
  EXPECT_LT(log.Index("h2d 0 end"), log.Index("forward 0"));
  EXPECT_LT(log.Index("h2d 1 end"), log.Index("forward 1"));
  EXPECT_LT(log.Index("forward 0"), log.Index("forward 1"));
}

TEST(HostStagingTest, WhenTheCallerComputesStageWeightsReturnsWithTheWeightsInPlace) {
  HostStaging staging;  // host_computes: a CPU net.
  std::vector<float> mirror = {3.0f, 4.0f}, weights = {0.0f, 0.0f};
  ASSERT_TRUE(staging.StageWeights(0, "ip", {CopyOf(&weights, mirror)}).ok());
  EXPECT_EQ(weights, mirror);  // Without waiting for anything else.
  std::vector<float> grad = {5.0f}, grad_mirror = {0.0f};
  Status handed = InternalError("not handed over");
  ASSERT_TRUE(
      staging.StageGradients(0, "ip", {CopyOf(&grad_mirror, grad)}, [&](const Status& st) { handed = st; }).ok());
  ASSERT_TRUE(staging.Drain().ok());
  EXPECT_TRUE(handed.ok()) << handed;
  EXPECT_EQ(grad_mirror, grad);
}

TEST(HostStagingTest, AFailedCopyNamesTheLayerAndNothingAfterItMoves) {
  Log log;
  HostStagingOptions options = StreamsOnThreads(&log);
  Gate all_staged;  // The copies start once the three layers are staged.
  options.before_copy = [&](int layer, bool to_host) {
    if (layer == 3) all_staged.Wait();
    return layer == 2 && to_host ? InternalError("cudaMemcpyAsync: cudaErrorLaunchFailure: unspecified launch failure")
                                 : Status::OK();
  };
  HostStaging staging(options);
  std::vector<std::vector<float>> grads(4, std::vector<float>(2, 1.0f)), mirrors(4, std::vector<float>(2, 0.0f));
  std::vector<Status> handed(4, InternalError("not handed over"));
  const std::vector<std::string> names = {"data", "conv1", "ip1", "ip2"};
  for (int layer = 3; layer >= 1; --layer) {
    ASSERT_TRUE(staging
                    .StageGradients(layer, names[layer], {CopyOf(&mirrors[layer], grads[layer])},
                                    [&, layer](const Status& st) { handed[layer] = st; })
                    .ok());
  }
  all_staged.Open();
  const Status drained = staging.Drain();
  const std::string expected =
      "copying the gradients of layer \"ip1\" to the host: cudaMemcpyAsync: cudaErrorLaunchFailure: unspecified "
      "launch failure";
  EXPECT_EQ(drained.message(), expected);
  EXPECT_EQ(drained.code(), StatusCode::kInternal);
  EXPECT_TRUE(handed[3].ok()) << handed[3];
  EXPECT_EQ(handed[2].message(), expected);
  EXPECT_EQ(handed[1].message(), expected);  // Staged after the failure: never copied.
  EXPECT_EQ(mirrors[3], grads[3]);
  EXPECT_EQ(mirrors[1], std::vector<float>(2, 0.0f));
  EXPECT_EQ(log.Only({"d2h"}), (std::vector<std::string>{"d2h 3 begin", "d2h 3 end", "d2h 2 begin", "d2h 2 end"}));
  // Every later call returns the error.
  std::vector<float> w = {0.0f}, m = {1.0f};
  EXPECT_EQ(staging.StageWeights(0, "data", {CopyOf(&w, m)}).message(), expected);
  bool called = false;
  EXPECT_EQ(staging.StageGradients(0, "data", {}, [&](const Status&) { called = true; }).message(), expected);
  EXPECT_FALSE(called);
  EXPECT_EQ(w, std::vector<float>{0.0f});
}

TEST(HostStagingTest, ShutdownRunsWhatIsPendingAndJoins) {
  Log log;
  HostStaging staging(StreamsOnThreads(&log));
  Gate backward_may_end;
  std::vector<float> grad = {2.0f}, mirror = {0.0f};
  staging.EnqueueCompute([&] {
    backward_may_end.Wait();
    log.Add("backward 0");
  });
  int handed = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(staging
                    .StageGradients(0, "ip", {CopyOf(&mirror, grad)},
                                    [&](const Status& st) {
                                      EXPECT_TRUE(st.ok()) << st;
                                      ++handed;  // On the copy stream's thread, one at a time.
                                    })
                    .ok());
  }
  backward_may_end.Open();
  ASSERT_TRUE(staging.Shutdown().ok());
  EXPECT_EQ(handed, 3);
  EXPECT_EQ(log.Only({"backward", "d2h 0 begin"}),
            (std::vector<std::string>{"backward 0", "d2h 0 begin", "d2h 0 begin", "d2h 0 begin"}));
  bool called = false;
  const Status after = staging.StageGradients(0, "ip", {}, [&](const Status&) { called = true; });
  EXPECT_EQ(after.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(after.message(), "the device staging was shut down");
  EXPECT_FALSE(called);
  EXPECT_TRUE(staging.Shutdown().ok());  // Again: nothing to do.
}

TEST(CudaStagingTest, NeedsACudaDevice) {
  auto stand_in = gpu::Device::CreateStandIn();
#ifdef NEREUS_HAVE_CUDA
  EXPECT_EQ(NewCudaStaging(nullptr).status().code(), StatusCode::kInvalidArgument);
  const Status st = NewCudaStaging(stand_in.get()).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "a device staging needs a CUDA device, not a host stand-in");
#else
  // Without CUDA there is no CudaStaging: the default staging of a device net
  // says why.
  const Status st = StagingForDevice(stand_in.get(), nullptr).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "a device staging needs CUDA: Nereus was built without it");
#endif
}

}  // namespace
}  // namespace nereus

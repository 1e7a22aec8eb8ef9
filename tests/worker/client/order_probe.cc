// nereus_order_probe: one server and one worker in this process; layer 0 is
// small, layers 1..3 are big. Backward hands over layers 3, 2, 1, 0 at once;
// prints when each layer's fresh weights arrived, as JSON:
//   {"schedule": "...", "order": [layers by arrival], "ms": [per layer]}
// Run inside a bandwidth-shaped namespace by order_test.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "bench/harness/local_job.h"

DEFINE_string(schedule, "priority", "Client schedule.");
DEFINE_uint64(small_bytes, 64 << 10, "Bytes of layer 0.");
DEFINE_uint64(big_bytes, 2 << 20, "Bytes of layers 1..3.");
DEFINE_uint64(credit_bytes, 512 << 10, "Client credit.");
DEFINE_uint64(partition_bytes, 256 << 10, "Partition (partition) size.");

int main(int argc, char** argv) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  using namespace nereus;
  auto schedule = ParseSchedule(FLAGS_schedule);
  if (!schedule.ok()) {
    LOG(ERROR) << schedule.status();
    return 2;
  }
  bench::LocalJobOptions o;
  o.job.set_partition_bytes(FLAGS_partition_bytes);
  o.client.schedule = *schedule;
  o.client.credit_bytes = FLAGS_credit_bytes;
  o.client.merge = false;
  auto job = bench::LocalJob::Start(o);
  if (!job.ok()) {
    LOG(ERROR) << job.status();
    return 1;
  }
  Client& c = (*job)->worker(0);
  const int L = 4;
  std::vector<std::vector<float>> w(L), g(L);
  std::vector<const float*> init;
  for (int l = 0; l < L; ++l) {
    const size_t n = (l == 0 ? FLAGS_small_bytes : FLAGS_big_bytes) / sizeof(float);
    w[l].assign(n, 1.0f);
    g[l].assign(n, 0.5f);
    init.push_back(w[l].data());
    TensorSpec spec{"layer" + std::to_string(l), {static_cast<int64_t>(n)}};
    spec.layer = l;
    spec.data = w[l].data();
    spec.diff = g[l].data();
    CHECK(c.RegisterTensor(spec).ok());
  }
  SgdConfig sgd;
  sgd.base_lr = 0.1f;
  CHECK(c.Init(sgd, init).ok());
  for (int l = 0; l < L; ++l) CHECK(c.WaitWeights(l, 0).ok());
  // Backward: the last layer's gradients first, then the others at once.
  const auto t0 = std::chrono::steady_clock::now();
  std::mutex mu;
  std::vector<int> order;
  std::vector<double> ms(L);
  std::vector<std::thread> waiters;
  for (int l = L - 1; l >= 0; --l) CHECK(c.GradientsReady(l, 0).ok());
  for (int l = 0; l < L; ++l) {
    waiters.emplace_back([&, l] {
      CHECK(c.WaitWeights(l, 1).ok());
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(l);
      ms[l] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : waiters) t.join();
  // The update really happened: w = 1 - 0.1 * 0.5.
  for (int l = 0; l < L; ++l) CHECK_EQ(w[l][0], 0.95f) << "layer " << l;
  std::printf("{\"schedule\": \"%s\", \"order\": [%d, %d, %d, %d], \"ms\": [%.1f, %.1f, %.1f, %.1f]}\n",
              FLAGS_schedule.c_str(), order[0], order[1], order[2], order[3], ms[0], ms[1], ms[2], ms[3]);
  return (*job)->Finish().ok() ? 0 : 1;
}

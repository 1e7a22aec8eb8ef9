// nereus_order_probe: one server and one worker in this process; layer 0 is
// small, layers 1..3 are big. Backward hands over layers 3, 2, 1, 0 at once;
// prints when each layer's fresh weights arrived, as JSON:
//   {"schedule": "...", "arrival_us": [per layer], "order": [layers by arrival]}
// A layer's arrival is when the client's receive thread took the PULL_REPLY
// that completed it (its timeline's pull spans: one clock reading per
// reply), so layers whose last parts came in one reply arrive at the same
// microsecond: no waiting thread's wake-up decides an order. Run inside a
// bandwidth-shaped namespace by order_test.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/harness/local_job.h"

DEFINE_string(schedule, "priority", "Client schedule.");
DEFINE_uint64(small_bytes, 64 << 10, "Bytes of layer 0.");
DEFINE_uint64(big_bytes, 2 << 20, "Bytes of layers 1..3.");
DEFINE_uint64(credit_bytes, 512 << 10, "Client credit.");
DEFINE_uint64(partition_bytes, 256 << 10, "Partition (partition) size.");
DEFINE_string(timeline, "", "Where the worker's timeline goes (required).");

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
  o.client.timeline = FLAGS_timeline;
  CHECK(!FLAGS_timeline.empty()) << "--timeline is required";
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
  for (int l = L - 1; l >= 0; --l) CHECK(c.GradientsReady(l, 0).ok());
  for (int l = 0; l < L; ++l) CHECK(c.WaitWeights(l, 1).ok());
  // The update really happened: w = 1 - 0.1 * 0.5.
  for (int l = 0; l < L; ++l) CHECK_EQ(w[l][0], 0.95f) << "layer " << l;
  if (!(*job)->Finish().ok()) return 1;  // Writes the timeline.
  std::ifstream in(FLAGS_timeline);
  std::stringstream text;
  text << in.rdbuf();
  const std::string trace = text.str();
  // Pull spans (lane 5) of clock 1: "weights of tensor \"layerN\" partition K".
  const std::regex span(
      R"re("name": "weights of tensor \\"layer(\d)\\" partition \d+", "ph": "X", "pid": \d+, "tid": 5, "ts": (\d+), "dur": (\d+), "args": \{"clock": 1\})re");
  std::vector<long long> arrival(L, -1);
  for (auto it = std::sregex_iterator(trace.begin(), trace.end(), span); it != std::sregex_iterator(); ++it) {
    const int l = std::stoi((*it)[1]);
    arrival[l] = std::max(arrival[l], std::stoll((*it)[2]) + std::stoll((*it)[3]));
  }
  for (int l = 0; l < L; ++l) CHECK_GE(arrival[l], 0) << "no pull span of layer " << l << " in " << FLAGS_timeline;
  std::vector<int> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return arrival[a] < arrival[b]; });
  std::printf("{\"schedule\": \"%s\", \"arrival_us\": [%lld, %lld, %lld, %lld], \"order\": [%d, %d, %d, %d]}\n",
              FLAGS_schedule.c_str(), arrival[0], arrival[1], arrival[2], arrival[3], order[0], order[1], order[2],
              order[3]);
  return 0;
}

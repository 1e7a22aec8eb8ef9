// The C interface (nereus/c_api.h, libnereus_c.so) against real servers: a
// coordinator and servers as processes on 127.0.0.1, the test joining as
// every worker through the C calls. Checks the codes and the last-error
// texts, the setters' parsing, push and pull with handles, the layer-wise
// calls with their bounded waits (what a timed-out wait names), sufficient
// factors, broadcast, and that the header compiles as C
// (c_api_from_c.c).
//
// The test links nothing of the client's own code (nereus_common,
// nereus_proto): libnereus_c.so carries its copy, and a second copy of
// nereus.proto's generated code in one process makes protobuf abort at
// start-up ("File already exists in database"). So the servers' arithmetic
// is written out here: Caffe's SGD with momentum on the average, element by
// element in the servers' order (common/update/sgd.h; -ffp-contract=off
// keeps the roundings).
#include "nereus/c_api.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/support/bytes_equal.h"
#include "tests/support/process_util.h"

extern "C" int nereus_c_api_from_c(char* error, size_t error_size);

namespace nereus {
namespace {

using test::JobOf;
using test::LocalCluster;
using test::TempDir;

std::string LastError() { return nereus_last_error(); }

// Runs `fn(rank)` on one thread per worker and joins them: nereus_connect
// and nereus_init block until every worker has called them.
void OnEveryWorker(int workers, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(fn, w);
  for (auto& t : threads) t.join();
}

// A client of `cluster` as worker `rank`, with `options` (name, value) set.
nereus_client_t* Connect(const LocalCluster& cluster, int rank,
                         const std::vector<std::pair<std::string, std::string>>& options = {}) {
  nereus_options_t* o = nereus_options_create();
  EXPECT_EQ(nereus_options_set(o, "coordinator", cluster.coordinator_address().c_str()), NEREUS_OK) << LastError();
  EXPECT_EQ(nereus_options_set(o, "rank", std::to_string(rank).c_str()), NEREUS_OK) << LastError();
  EXPECT_EQ(nereus_options_set(o, "startup_timeout_s", "30"), NEREUS_OK) << LastError();
  for (const auto& [name, value] : options)
    EXPECT_EQ(nereus_options_set(o, name.c_str(), value.c_str()), NEREUS_OK) << name << ": " << LastError();
  nereus_client_t* client = nullptr;
  EXPECT_EQ(nereus_connect(o, &client), NEREUS_OK) << LastError();
  nereus_options_destroy(o);
  return client;
}

nereus_solver_t* MomentumSgd() {
  nereus_solver_t* s = nereus_solver_create();
  EXPECT_EQ(nereus_solver_set(s, "type", "SGD"), NEREUS_OK);
  EXPECT_EQ(nereus_solver_set(s, "base_lr", "0.1"), NEREUS_OK);
  EXPECT_EQ(nereus_solver_set(s, "momentum", "0.9"), NEREUS_OK);
  return s;
}

// One step of Caffe's SGD at rate 0.1, momentum 0.9, no decay, on the
// average of `grads` summed in rank order (AverageInOrder, then SgdStep).
void MomentumSgdStep(const std::vector<std::vector<float>>& grads, std::vector<float>* w, std::vector<float>* h) {
  const float scale = 1.0f / static_cast<float>(grads.size());
  for (size_t i = 0; i < w->size(); ++i) {
    float sum = grads[0][i];
    for (size_t k = 1; k < grads.size(); ++k) sum += grads[k][i];
    const float g = sum * scale;
    (*h)[i] = 0.1f * g + 0.9f * (*h)[i];
    (*w)[i] = (*w)[i] - (*h)[i];
  }
}

int Register(nereus_client_t* client, const std::string& name, std::vector<int64_t> shape, int layer = -1,
             float* data = nullptr, const float* diff = nullptr) {
  nereus_tensor_t* t = nereus_tensor_create(name.c_str(), shape.data(), shape.size());
  if (data != nullptr) nereus_tensor_set_layer(t, layer, data, diff);
  int id = -1;
  EXPECT_EQ(nereus_register_tensor(client, t, &id), NEREUS_OK) << LastError();
  nereus_tensor_destroy(t);
  return id;
}

TEST(CApi, VersionStatusNamesAndTheCalledFromC) {
  EXPECT_EQ(nereus_c_api_version(), NEREUS_C_API_VERSION);
  EXPECT_STREQ(nereus_status_name(NEREUS_OK), "OK");
  EXPECT_STREQ(nereus_status_name(NEREUS_DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
  EXPECT_STREQ(nereus_status_name(NEREUS_ROLLBACK), "ROLLBACK");
  EXPECT_STREQ(nereus_status_name(99), "UNKNOWN");
  char error[256] = {0};
  EXPECT_EQ(nereus_c_api_from_c(error, sizeof(error)), 0) << error;
}

// A setter (nereus_options_set or nereus_solver_set on one object).
using Setter = std::function<int(const char* name, const char* value)>;

// `set` takes each (name, value) of `taken`.
void ExpectTaken(const Setter& set, const std::vector<std::pair<const char*, const char*>>& taken) {
  for (const auto& [name, value] : taken) EXPECT_EQ(set(name, value), NEREUS_OK) << name << ": " << LastError();
}

// `set` refuses each (name, value) of `refused`, and the error is its text.
struct Refused {
  const char* name;
  const char* value;
  const char* error;
};
void ExpectRefused(const Setter& set, const std::vector<Refused>& refused) {
  for (const Refused& r : refused) {
    EXPECT_EQ(set(r.name, r.value), NEREUS_INVALID_ARGUMENT) << r.name;
    EXPECT_EQ(LastError(), r.error);
  }
}

TEST(CApi, SettersParseWholeValuesAndNameWhatIsWrong) {
  nereus_options_t* o = nereus_options_create();
  const Setter set_option = [o](const char* name, const char* value) { return nereus_options_set(o, name, value); };
  ExpectTaken(set_option, {{"schedule", "wfbp"},
                           {"merge", "false"},
                           {"wait_timeout_ms", "2500"},
                           {"sfb_link_gbit", "10.5"},
                           {"sfb_trial_clocks", "0"},
                           {"sfb_trial_trust_ratio", "4.5"},
                           {"sfb_schedule", "fc:4:ps"}});
  ExpectRefused(
      set_option,
      {{"sfb_trial_clocks", "-1", "nereus_options_set: sfb_trial_clocks must be an integer, got \"-1\""},
       {"rank", "3x", "nereus_options_set: rank must be an integer, got \"3x\""},
       {"sfb_trial_trust_ratio", "ten", "nereus_options_set: sfb_trial_trust_ratio must be a number, got \"ten\""},
       {"schedule", "fast", "nereus_options_set: schedule must be sequential, wfbp, priority or full, got \"fast\""},
       {"merge", "yes", "nereus_options_set: merge must be true or false, got \"yes\""},
       {"streams", "0", "nereus_options_set: streams must be an integer, got \"0\""}});
  EXPECT_EQ(nereus_options_set(o, "colour", "blue"), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError().rfind("nereus_options_set: unknown name \"colour\" (known: batch_bytes, bind_host, ", 0), 0u)
      << LastError();
  EXPECT_EQ(nereus_options_set(nullptr, "rank", "1"), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "nereus_options_set: the object is NULL");
  // A failure on another thread leaves this thread's text alone.
  std::thread([] { EXPECT_EQ(nereus_options_set(nullptr, "x", "y"), NEREUS_INVALID_ARGUMENT); }).join();
  EXPECT_EQ(LastError(), "nereus_options_set: the object is NULL");
  nereus_options_destroy(o);
  nereus_options_destroy(nullptr);
  EXPECT_EQ(nereus_fail(nullptr, "why"), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "nereus_fail: the client is NULL");

  nereus_solver_t* s = nereus_solver_create();
  const Setter set_solver = [s](const char* name, const char* value) { return nereus_solver_set(s, name, value); };
  ExpectTaken(set_solver, {{"type", "Average"}, {"type", "Adam"}, {"stepvalue", "10,20,30"}});
  ExpectRefused(
      set_solver,
      {{"stepvalue", "10,,30", "nereus_solver_set: stepvalue must be comma-separated integers, got \"10,,30\""},
       {"type", "AdamW",
        "nereus_solver_set: type must be SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam or Average, got \"AdamW\""},
       {"base_lr", "0.1.2", "nereus_solver_set: base_lr must be a number, got \"0.1.2\""}});
  nereus_solver_destroy(s);
}

TEST(CApi, ConnectToNobodyFailsNamingTheCoordinator) {
  nereus_options_t* o = nereus_options_create();
  const std::string where = "127.0.0.1:" + std::to_string(test::FreePort());
  ASSERT_EQ(nereus_options_set(o, "coordinator", where.c_str()), NEREUS_OK);
  ASSERT_EQ(nereus_options_set(o, "startup_timeout_s", "1"), NEREUS_OK);
  nereus_client_t* client = reinterpret_cast<nereus_client_t*>(1);
  EXPECT_NE(nereus_connect(o, &client), NEREUS_OK);
  EXPECT_EQ(client, nullptr);
  EXPECT_NE(LastError().find(where), std::string::npos) << LastError();
  nereus_options_destroy(o);
}

// Push and pull with handles, 2 workers x 1 server: a bounded wait on a pull
// that cannot be answered yet names what it waits for; broadcast; barrier;
// counters; the arithmetic is the servers' (Caffe's SGD on the average).
TEST(CApi, PushPullHandlesBroadcastAndCounters) {
  TempDir dir;
  auto spec = JobOf(1, 2);
  spec.external_workers = {0, 1};
  LocalCluster cluster(spec, dir);
  nereus_client_t* clients[2] = {nullptr, nullptr};
  std::vector<float> initial = {1, 2, 3, 4, 5, 6};
  OnEveryWorker(2, [&](int w) {
    clients[w] = Connect(cluster, w);
    ASSERT_NE(clients[w], nullptr);
    EXPECT_EQ(Register(clients[w], "w", {2, 3}), 0);
    nereus_solver_t* sgd = MomentumSgd();
    const float* values[1] = {initial.data()};
    EXPECT_EQ(nereus_init(clients[w], sgd, values, 1), NEREUS_OK) << LastError();
    nereus_solver_destroy(sgd);
  });
  ASSERT_TRUE(clients[0] && clients[1]);
  EXPECT_EQ(nereus_rank(clients[1]), 1);
  EXPECT_EQ(nereus_num_workers(clients[0]), 2);
  EXPECT_EQ(nereus_num_servers(clients[0]), 1);
  EXPECT_EQ(nereus_consistency(clients[0]), 0);
  EXPECT_EQ(nereus_start_clock(clients[0]), 0);

  std::vector<float> g0 = {1, 1, 1, 1, 1, 1}, g1 = {3, 1, -1, 0, 2, 4};
  nereus_handle_t* push0 = nullptr;
  ASSERT_EQ(nereus_push(clients[0], 0, g0.data(), 0, &push0), NEREUS_OK);
  std::vector<float> got(6, 0);
  nereus_handle_t* pull = nullptr;
  ASSERT_EQ(nereus_pull(clients[0], 0, got.data(), 1, &pull), NEREUS_OK);
  // Worker 1 has not pushed: the server cannot answer clock 1 yet.
  EXPECT_EQ(nereus_handle_wait(pull, 200), NEREUS_DEADLINE_EXCEEDED);
  EXPECT_EQ(LastError(),
            "PULL of tensor 0 for clock 1 not done after 200 ms, still waiting for server 0 (PULL of tensor \"w\" "
            "partition 0 of clock 1, sent)");
  EXPECT_EQ(nereus_handle_done(pull), 0);
  nereus_handle_t* push1 = nullptr;
  ASSERT_EQ(nereus_push(clients[1], 0, g1.data(), 0, &push1), NEREUS_OK);
  EXPECT_EQ(nereus_handle_wait(pull, -1), NEREUS_OK) << LastError();
  EXPECT_EQ(nereus_handle_done(pull), 1);
  EXPECT_EQ(nereus_handle_version(pull), 1);
  EXPECT_EQ(nereus_handle_wait(push0, 10000), NEREUS_OK);
  EXPECT_EQ(nereus_handle_wait(push1, 10000), NEREUS_OK);
  std::vector<float> want = initial, history(6, 0);
  MomentumSgdStep({g0, g1}, &want, &history);
  EXPECT_TRUE(test::BytesEqual(got, want));
  for (nereus_handle_t* h : {push0, push1, pull}) nereus_handle_destroy(h);

  uint64_t pushes = 0;
  EXPECT_EQ(nereus_stat(clients[0], "push_messages", &pushes), NEREUS_OK);
  EXPECT_EQ(pushes, 1u);
  // Both workers share a host (host-local aggregation, --host_aggregation=auto):
  // worker 1's push went to worker 0, which summed its 6 floats into its own.
  uint64_t counter = 7;
  EXPECT_EQ(nereus_stat(clients[1], "push_messages", &counter), NEREUS_OK);
  EXPECT_EQ(counter, 0u);
  EXPECT_EQ(nereus_stat(clients[1], "host_push_messages", &counter), NEREUS_OK);
  EXPECT_EQ(counter, 1u);
  EXPECT_EQ(nereus_stat(clients[1], "host_push_bytes", &counter), NEREUS_OK);
  EXPECT_EQ(counter, 24u);
  EXPECT_EQ(nereus_stat(clients[0], "host_summed_bytes", &counter), NEREUS_OK);
  EXPECT_EQ(counter, 24u);
  EXPECT_EQ(nereus_stat(clients[0], "host_relayed_bytes", &counter), NEREUS_OK);
  EXPECT_EQ(counter, 0u);  // Explicit pulls go to the servers.
  EXPECT_EQ(nereus_stat(clients[0], "pushes", &pushes), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "nereus_stat: unknown counter \"pushes\"");

  std::vector<float> b0 = {7, -0.5f, 1e30f}, b1 = {0, 0, 0};
  OnEveryWorker(2, [&](int w) {
    EXPECT_EQ(nereus_broadcast(clients[w], "buffers", w == 0 ? b0.data() : b1.data(), 3, 0), NEREUS_OK) << LastError();
    EXPECT_EQ(nereus_barrier(clients[w], "end"), NEREUS_OK) << LastError();
  });
  EXPECT_EQ(b1, b0);
  EXPECT_EQ(nereus_broadcast(clients[0], "x", b0.data(), 3, 2), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "Broadcast \"x\" from worker 2: the job has 2 worker(s)");

  OnEveryWorker(2, [&](int w) { EXPECT_EQ(nereus_finish(clients[w]), NEREUS_OK) << LastError(); });
  for (nereus_client_t* c : clients) nereus_client_destroy(c);
  std::string report;
  EXPECT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
}

// The layer-wise calls, 2 workers x 2 servers: layer 0 ("fc", a 3 x 4
// weight with factors and sfb=on, and its bias), layer 1 ("out", 2 floats).
// A bounded wait names the layer, the clock and the server; the factor
// weight is rebuilt from both workers' factors, the rest by the servers, and
// both workers end with the same bytes.
TEST(CApi, LayerwiseCallsBoundedWaitsAndFactors) {
  TempDir dir;
  auto spec = JobOf(2, 2, {"--partition_bytes=16"});
  spec.external_workers = {0, 1};
  LocalCluster cluster(spec, dir);
  struct Worker {
    nereus_client_t* client = nullptr;
    std::vector<float> w = std::vector<float>(12), w_diff = std::vector<float>(12);
    std::vector<float> b = std::vector<float>(3), b_diff = std::vector<float>(3);
    std::vector<float> o = std::vector<float>(2), o_diff = std::vector<float>(2);
    std::vector<float> left = std::vector<float>(2 * 3), right = std::vector<float>(2 * 4);  // K = 2.
    // The client first (it may still be writing into the buffers above
    // when a failed assertion leaves the test early).
    ~Worker() { nereus_client_destroy(client); }
  };
  Worker workers[2];
  OnEveryWorker(2, [&](int r) {
    Worker& W = workers[r];
    W.client = Connect(cluster, r, {{"wait_timeout_ms", "3000"}, {"sfb", "on"}, {"schedule", "full"}});
    ASSERT_NE(W.client, nullptr);
    const int64_t wshape[2] = {3, 4};
    nereus_tensor_t* t = nereus_tensor_create("fc.weight", wshape, 2);
    nereus_tensor_set_layer(t, 0, W.w.data(), W.w_diff.data());
    nereus_tensor_set_factors(t, 2, W.left.data(), W.right.data());
    nereus_tensor_set_mults(t, 1, 1);
    int id = -1;
    EXPECT_EQ(nereus_register_tensor(W.client, t, &id), NEREUS_OK) << LastError();
    EXPECT_EQ(id, 0);
    nereus_tensor_destroy(t);
    EXPECT_EQ(Register(W.client, "fc.bias", {3}, 0, W.b.data(), W.b_diff.data()), 1);
    EXPECT_EQ(Register(W.client, "out.bias", {2}, 1, W.o.data(), W.o_diff.data()), 2);
    std::vector<float> w0(12), b0 = {0.5f, -0.5f, 1}, o0 = {2, 3};
    for (int i = 0; i < 12; ++i) w0[i] = 0.1f * static_cast<float>(i) - 0.3f;
    const float* values[3] = {w0.data(), b0.data(), o0.data()};
    nereus_solver_t* sgd = MomentumSgd();
    EXPECT_EQ(nereus_init(W.client, sgd, values, 3), NEREUS_OK) << LastError();
    nereus_solver_destroy(sgd);
  });
  ASSERT_TRUE(workers[0].client && workers[1].client);
  int ids[4] = {-1, -1, -1, -1};
  size_t count = 0;
  EXPECT_EQ(nereus_sfb_tensors(workers[0].client, ids, 4, &count), NEREUS_OK);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(ids[0], 0);
  int at = -1;
  EXPECT_EQ(nereus_sfb_at(workers[0].client, 0, 0, &at), NEREUS_OK);
  EXPECT_EQ(at, 1);  // fc.weight: as factors (sfb=on).
  EXPECT_EQ(nereus_sfb_at(workers[0].client, 1, 0, &at), NEREUS_OK);
  EXPECT_EQ(at, 0);  // fc.bias: no factors.
  EXPECT_EQ(nereus_sfb_at(workers[0].client, 7, 0, &at), NEREUS_OK);
  EXPECT_EQ(at, 0);  // No such tensor.
  EXPECT_EQ(nereus_sfb_at(workers[0].client, 0, 0, nullptr), NEREUS_INVALID_ARGUMENT);

  for (int64_t clock = 0; clock < 3; ++clock) {
    for (int r = 0; r < 2; ++r) {
      Worker& W = workers[r];
      for (int l = 0; l < 2; ++l) ASSERT_EQ(nereus_wait_weights(W.client, l, clock), NEREUS_OK) << LastError();
      for (int i = 0; i < 6; ++i) W.left[i] = 0.01f * static_cast<float>((i + 1) * (r + 1) + clock);
      for (int i = 0; i < 8; ++i) W.right[i] = 0.02f * static_cast<float>(i - r) - 0.01f * static_cast<float>(clock);
      for (int i = 0; i < 3; ++i) W.b_diff[i] = 0.1f * static_cast<float>(i + r + clock);
      for (int i = 0; i < 2; ++i) W.o_diff[i] = -0.2f * static_cast<float>(i + r);
    }
    // Worker 0 hands its gradients over; worker 1 has not: worker 0's wait
    // for the next clock's weights runs out, naming what it waits for. The
    // two share a host (host-local aggregation): worker 0's push waits for
    // worker 1's gradients, and its pull rides on it.
    ASSERT_EQ(nereus_gradients_ready(workers[0].client, 1, clock), NEREUS_OK) << LastError();
    ASSERT_EQ(nereus_gradients_ready(workers[0].client, 0, clock), NEREUS_OK) << LastError();
    if (clock == 1) {
      EXPECT_EQ(nereus_wait_weights(workers[0].client, 1, clock + 1), NEREUS_DEADLINE_EXCEEDED);
      EXPECT_EQ(LastError(),
                "WaitWeights(layer 1, clock 2) gave up after 3000 ms (wait_timeout_ms), still waiting for the weights "
                "from server 1 (weights of tensor \"out.bias\" partition 0 of clock 2, held here for the gradients "
                "of this host's other workers (host-local aggregation)); a server answers once "
                "every worker's gradients of clock 1 are in, so a worker that has not pushed them (slow, stopped or "
                "stuck) holds it up");
      EXPECT_EQ(nereus_wait_weights(workers[0].client, 0, clock + 1), NEREUS_DEADLINE_EXCEEDED);
      EXPECT_NE(LastError().find("WaitWeights(layer 0, clock 2) gave up after 3000 ms"), std::string::npos)
          << LastError();
    }
    ASSERT_EQ(nereus_gradients_ready(workers[1].client, 1, clock), NEREUS_OK) << LastError();
    ASSERT_EQ(nereus_gradients_ready(workers[1].client, 0, clock), NEREUS_OK) << LastError();
  }
  for (int r = 0; r < 2; ++r)
    for (int l = 0; l < 2; ++l) ASSERT_EQ(nereus_wait_weights(workers[r].client, l, 3), NEREUS_OK) << LastError();
  EXPECT_TRUE(test::BytesEqual(workers[0].w, workers[1].w));
  EXPECT_TRUE(test::BytesEqual(workers[0].b, workers[1].b));
  EXPECT_TRUE(test::BytesEqual(workers[0].o, workers[1].o));
  // The factor weight against Caffe's SGD on the average of left^T right
  // (the rebuild's GEMM sums in its own order: within float rounding).
  std::vector<float> w(12), h(12, 0);
  for (int i = 0; i < 12; ++i) w[i] = 0.1f * static_cast<float>(i) - 0.3f;
  for (int64_t clock = 0; clock < 3; ++clock) {
    std::vector<std::vector<float>> g(2, std::vector<float>(12, 0));
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 2; ++k)
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 4; ++j) {
            const float left = 0.01f * static_cast<float>((k * 3 + i + 1) * (r + 1) + clock);
            const float right = 0.02f * static_cast<float>(k * 4 + j - r) - 0.01f * static_cast<float>(clock);
            g[r][i * 4 + j] += left * right;
          }
    MomentumSgdStep(g, &w, &h);
  }
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(workers[0].w[i], w[i], 1e-6f) << i;

  OnEveryWorker(2, [&](int r) { EXPECT_EQ(nereus_finish(workers[r].client), NEREUS_OK) << LastError(); });
  std::string report;
  EXPECT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
}

TEST(CApi, RegisterAndInitErrorsNameTheTensor) {
  TempDir dir;
  auto spec = JobOf(1, 1);
  spec.external_workers = {0};
  LocalCluster cluster(spec, dir);
  nereus_client_t* client = Connect(cluster, 0);
  ASSERT_NE(client, nullptr);
  const int64_t bad[2] = {3, 0};
  nereus_tensor_t* t = nereus_tensor_create("fc.weight", bad, 2);
  int id = -1;
  EXPECT_EQ(nereus_register_tensor(client, t, &id), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "tensor \"fc.weight\" has a non-positive dimension");
  nereus_tensor_destroy(t);
  const int64_t shape[1] = {4};
  t = nereus_tensor_create("b", shape, 1);
  std::vector<float> data(4);
  nereus_tensor_set_factors(t, 2, data.data(), nullptr);
  EXPECT_EQ(nereus_register_tensor(client, t, &id), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "tensor \"b\": sufficient factors need factor_rows > 0 and both factor_left and factor_right");
  nereus_tensor_destroy(t);
  EXPECT_EQ(Register(client, "b", {4}), 0);
  nereus_solver_t* sgd = MomentumSgd();
  EXPECT_EQ(nereus_init(client, sgd, nullptr, 1), NEREUS_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "nereus_init: initial_values is NULL");
  const float* values[1] = {data.data()};
  EXPECT_EQ(nereus_gradients_ready(client, 0, 0), NEREUS_FAILED_PRECONDITION);
  EXPECT_EQ(LastError(), "GradientsReady before Init");
  EXPECT_EQ(nereus_init(client, sgd, values, 1), NEREUS_OK) << LastError();
  EXPECT_EQ(nereus_init(client, sgd, values, 1), NEREUS_FAILED_PRECONDITION);
  EXPECT_EQ(LastError(), "Init called twice");
  nereus_solver_destroy(sgd);
  EXPECT_EQ(nereus_finish(client), NEREUS_OK) << LastError();
  nereus_client_destroy(client);
  std::string report;
  EXPECT_TRUE(cluster.WaitAll(std::chrono::seconds(30), &report)) << report;
}

}  // namespace
}  // namespace nereus

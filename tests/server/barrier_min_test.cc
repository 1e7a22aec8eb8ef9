// Barriers that reduce values (Node::Barrier's min_values, the coordinator's
// BARRIER_RELEASE): every node of the group gets the element-wise minimum of
// what each sent, NaNs ignored; nodes that send different numbers of values
// fail the job with an error naming them. A real coordinator and nodes on
// 127.0.0.1, in one process (HybComm's rates at Client::Init use this).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "common/net/node.h"
#include "server/coordinator.h"

namespace nereus {
namespace {

constexpr int kWorkers = 3;

// A coordinator, one server node and kWorkers worker nodes, started; the
// destructor finishes them and joins the coordinator.
class Job {
 public:
  Job() {
    CoordinatorOptions co;
    co.bind = "127.0.0.1:0";
    co.startup_timeout_s = 30;
    co.job.set_num_servers(1);
    co.job.set_num_workers(kWorkers);
    co.job.set_consistency(pb::BSP);
    co.job.set_partition_bytes(1 << 20);
    co.job.set_heartbeat_interval_ms(1000);
    co.job.set_heartbeat_timeout_ms(20000);
    coordinator_ = std::make_unique<Coordinator>(co);
    Status st = coordinator_->Start();
    EXPECT_TRUE(st.ok()) << st;
    run_ = std::thread([this] { result_ = coordinator_->Run(); });
    std::vector<std::thread> starts;
    for (int i = 0; i <= kWorkers; ++i) {
      NodeOptions no;
      no.coordinator = coordinator_->endpoint();
      no.role = i == 0 ? pb::SERVER : pb::WORKER;
      no.rank = i == 0 ? 0 : i - 1;
      no.startup_timeout_s = 30;
      nodes_.push_back(std::make_unique<Node>(no));
    }
    std::vector<Status> started(nodes_.size());
    for (size_t i = 0; i < nodes_.size(); ++i)
      starts.emplace_back([&, i] {
        started[i] =
            nodes_[i]->Start([](const Endpoint&, StatusOr<Message>, const pb::Header&) {}, [](const Status&) {});
      });
    for (auto& t : starts) t.join();
    for (const Status& s : started) EXPECT_TRUE(s.ok()) << s;
  }
  ~Job() {
    // Workers done, the server told to shut down; then everything joined.
    std::vector<std::thread> finish;
    for (auto& n : nodes_) finish.emplace_back([&n] { (void)n->Finish(); });
    for (auto& t : finish) t.join();
    run_.join();
  }
  Node& worker(int w) { return *nodes_.at(w + 1); }

  // Runs a barrier named `name` on every worker at once with its `values`
  // (nullptr: no reduction); returns each worker's status, `values` reduced in place.
  std::vector<Status> Barrier(const std::string& name, std::vector<std::vector<double>>* values) {
    std::vector<Status> out(kWorkers);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w)
      threads.emplace_back(
          [&, w] { out[w] = worker(w).Barrier(name, pb::WORKER, 0, values ? &(*values)[w] : nullptr); });
    for (auto& t : threads) t.join();
    return out;
  }

 private:
  std::unique_ptr<Coordinator> coordinator_;
  std::thread run_;
  Status result_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST(BarrierMinTest, EveryWorkerGetsTheElementWiseMinimumNansIgnored) {
  Job job;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> values = {{3, 1, nan, 8}, {2, 5, 4, 8}, {9, 0.5, 7, 8}};
  for (const Status& s : job.Barrier("rates", &values)) ASSERT_TRUE(s.ok()) << s;
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(values[w], (std::vector<double>{2, 0.5, 4, 8})) << "worker " << w;
  // The next barrier of the same name starts afresh, and one without values still works.
  values = {{10}, {11}, {12}};
  for (const Status& s : job.Barrier("rates", &values)) ASSERT_TRUE(s.ok()) << s;
  for (int w = 0; w < kWorkers; ++w) EXPECT_EQ(values[w], std::vector<double>{10}) << "worker " << w;
  for (const Status& s : job.Barrier("plain", nullptr)) EXPECT_TRUE(s.ok()) << s;
  // Zero values each: nothing to reduce, nothing returned.
  values = {{}, {}, {}};
  for (const Status& s : job.Barrier("empty", &values)) ASSERT_TRUE(s.ok()) << s;
  for (int w = 0; w < kWorkers; ++w) EXPECT_TRUE(values[w].empty());
}

TEST(BarrierMinTest, DifferentNumbersOfValuesFailTheJobNamingTheNodes) {
  Job job;
  std::vector<std::vector<double>> values = {{1, 2}, {}, {3, 4}};
  for (const Status& s : job.Barrier("rates", &values)) {
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("nodes sent different numbers of values to reduce at barrier \"rates\": {worker 1} "
                               "sent 0; {"),
              std::string::npos)
        << s;
    EXPECT_NE(s.message().find("} sent 2;"), std::string::npos) << s;
  }
  // What each sent is left as it was.
  EXPECT_EQ(values[0], (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace nereus

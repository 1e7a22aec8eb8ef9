#include "bench/harness/local_job.h"

#include "common/net/curve_keys.h"

namespace nereus {
namespace bench {

StatusOr<std::unique_ptr<LocalJob>> LocalJob::Start(LocalJobOptions o) {
  std::unique_ptr<LocalJob> job(new LocalJob());
  CoordinatorOptions co;
  co.bind = "127.0.0.1:0";
  co.startup_timeout_s = 30;
  co.job = o.job;
  co.host_aggregation = o.host_aggregation;
  co.job.set_num_servers(o.servers);
  co.job.set_num_workers(o.workers);
  if (co.job.consistency() == pb::CONSISTENCY_UNSPECIFIED) co.job.set_consistency(pb::BSP);
  if (co.job.partition_bytes() == 0) co.job.set_partition_bytes(1 << 20);
  if (co.job.heartbeat_interval_ms() == 0) co.job.set_heartbeat_interval_ms(1000);
  if (co.job.heartbeat_timeout_ms() == 0) co.job.set_heartbeat_timeout_ms(10000);
  if (!o.curve_dir.empty()) {
    ASSIGN_OR_RETURN(co.curve, LoadCurveKeys(o.curve_dir, CurveKeyName(pb::COORDINATOR, 0)));
    o.client.curve_dir = o.curve_dir;
  }
  job->coordinator_ = std::make_unique<Coordinator>(co);
  RETURN_IF_ERROR(job->coordinator_->Start());
  const std::string address = job->coordinator_->endpoint();
  job->coordinator_thread_ = std::thread([c = job->coordinator_.get()] {
    Status st = c->Run();
    if (!st.ok()) LOG(ERROR) << st;
  });
  for (int s = 0; s < o.servers; ++s) {
    NodeOptions no;
    no.coordinator = address;
    no.role = pb::SERVER;
    no.rank = s;
    no.transport = o.server_transport;
    if (!o.curve_dir.empty()) {
      ASSIGN_OR_RETURN(no.transport.curve, LoadCurveKeys(o.curve_dir, CurveKeyName(pb::SERVER, s)));
    }
    job->servers_.push_back(std::make_unique<ServerNode>(no, ServerCheckpointOptions{}, o.server_apply_threads));
    job->server_threads_.emplace_back([srv = job->servers_.back().get()] {
      Status st = srv->Run();
      if (!st.ok()) LOG(ERROR) << st;
    });
  }
  std::vector<std::unique_ptr<Client>> clients(o.workers);
  std::vector<Status> results(o.workers);
  std::vector<std::thread> connects;
  for (int w = 0; w < o.workers; ++w) {
    connects.emplace_back([&, w] {
      ClientOptions c = o.client;
      c.coordinator = address;
      c.rank = w;
      auto client = ConnectClient(c, o.client_internals);
      results[w] = client.status();
      if (client.ok()) clients[w] = std::move(client).value();
    });
  }
  for (auto& t : connects) t.join();
  for (int w = 0; w < o.workers; ++w) {
    RETURN_IF_ERROR(results[w]);
    job->clients_.push_back(std::move(clients[w]));
  }
  return job;
}

Status LocalJob::Finish() {
  if (finished_) return Status::OK();
  finished_ = true;
  std::vector<Status> results(clients_.size());
  std::vector<std::thread> finishers;
  for (size_t w = 0; w < clients_.size(); ++w) finishers.emplace_back([&, w] { results[w] = clients_[w]->Finish(); });
  for (auto& t : finishers) t.join();
  for (auto& t : server_threads_) t.join();
  if (coordinator_thread_.joinable()) coordinator_thread_.join();
  for (auto& r : results) RETURN_IF_ERROR(r);
  return Status::OK();
}

LocalJob::~LocalJob() {
  Status st = Finish();
  if (!st.ok()) LOG(ERROR) << "local job: " << st;
  clients_.clear();
  servers_.clear();
}

}  // namespace bench
}  // namespace nereus

// Node: a server's or worker's membership in a job. Registers with the
// coordinator, receives a rank, the job configuration and the address book,
// waits at the start barrier, sends heartbeats, takes part in barriers, and
// turns an ABORT (or a silent coordinator) into an error for its owner. A
// coordinator that falls silent is waited for (and the wait logged) up to the
// job's heartbeat timeout: a restarted one takes the job back with a ROLLBACK.
#ifndef NEREUS_COMMON_NET_NODE_H_
#define NEREUS_COMMON_NET_NODE_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "common/net/message.h"
#include "common/net/refusal_log.h"
#include "common/net/transport.h"

namespace nereus {

struct NodeOptions {
  std::string coordinator;  // "host:port" or "tcp://host:port".
  pb::Role role = pb::WORKER;
  int rank = -1;  // -1: the coordinator picks.
  std::string bind_host = "127.0.0.1";
  int startup_timeout_s = 60;  // For registration and the start barrier.
  ZmqTransportOptions transport;
  // Sent with REGISTER: --resume, and a server's complete checkpoints and
  // --checkpoint_every (the coordinator picks the newest clock every server
  // holds and hands it out as job().start_clock()).
  bool resume = false;
  std::vector<int64_t> checkpoint_clocks;
  int64_t checkpoint_every = 0;
};

// "host:port" -> "tcp://host:port"; endpoints already starting with a scheme
// are returned as they are.
std::string NormalizeEndpoint(const std::string& address);

// 127.x.x.x, ::1 or localhost.
bool IsLoopbackHost(const std::string& host);
// A node's bind host must be an address its peers can answer (not a
// wildcard); a non-loopback one without CURVE (`curve` false) logs a warning
// that the job is open to anyone who can reach it.
Status CheckBindHost(const std::string& host, bool curve);

// Where the kernel keeps its ephemeral port range, the source ports it gives
// outgoing connections.
inline constexpr char kPortRangeFile[] = "/proc/sys/net/ipv4/ip_local_port_range";
// That range, [first, last], or nullopt where the file cannot be read.
std::optional<std::pair<int, int>> EphemeralPortRange();
// The port of "tcp://host:port" or "host:port" as written, or "" if none.
std::string PortOf(const std::string& endpoint);
// The host of "tcp://host:port" or "host:port" as written (what is between
// the scheme and the last ':'), or the whole text without a port.
std::string HostOf(const std::string& endpoint);

// Host-local aggregation (pb::JobConfig.host_aggregation): the ranks of the
// workers at `workers` (endpoints by rank) whose host (HostOf) is worker
// `rank`'s, ascending; the first is the host's aggregating worker.
std::vector<int> HostGroupOf(const std::vector<std::string>& workers, int rank);

class Node {
 public:
  // Called on the receive thread for each PUSH/PULL/INIT/... message (every op
  // that is not membership), and for messages that failed to decode.
  using DataHandler = std::function<void(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial)>;
  // Called once, on an internal thread, when the job is aborted.
  using AbortHandler = std::function<void(const Status& why)>;

  explicit Node(NodeOptions options);
  ~Node();  // Stops the heartbeat thread and the transport.

  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Binds, registers with the coordinator and blocks until every node has
  // registered (the start barrier) or startup_timeout_s passes. `on_data` and
  // `on_abort` must stay valid until Stop() or destruction.
  Status Start(DataHandler on_data, AbortHandler on_abort) NEREUS_LOCKS_EXCLUDED(mu_);

  // Valid after Start() succeeded.
  int rank() const { return rank_; }
  pb::Role role() const { return options_.role; }
  const pb::JobConfig& job() const { return job_; }
  const Endpoint& endpoint() const { return transport_->endpoint(); }
  std::string name() const { return NodeName(options_.role, rank_); }
  // Endpoint of server/worker `rank`.
  const Endpoint& server(int rank) const { return servers_.at(rank); }
  const Endpoint& worker(int rank) const { return workers_.at(rank); }
  // Worker `worker_rank`'s host group (HostGroupOf) when the job aggregates
  // per host (job().host_aggregation()); else {worker_rank} alone.
  std::vector<int> HostGroup(int worker_rank) const;
  // Role and rank of the node at `endpoint`; false if it is not in the job.
  bool Lookup(const Endpoint& endpoint, pb::Role* role, int* rank) const;

  // Sends to a peer, stamping sender role and rank. Thread-safe.
  Status Send(const Endpoint& to, Message msg, int stream = 0);
  Transport* transport() { return transport_.get(); }

  // Blocks until every node of `group` (ROLE_UNSPECIFIED: all servers and
  // workers) has entered barrier `name`, or the job aborts. A nonzero
  // `model_digest` must be equal across the group, or the job aborts with an
  // error naming the nodes that disagree, each group with its `note` (what
  // its digest stands for, in words; may be empty). If `min_values` is set,
  // its values are reduced over the group: on OK it holds the element-wise
  // minimum of every node's (NaNs ignored); nodes that send different numbers
  // of values abort the job with an error naming them.
  Status Barrier(const std::string& name, pb::Role group, uint64_t model_digest = 0,
                 std::vector<double>* min_values = nullptr, const std::string& note = "") NEREUS_LOCKS_EXCLUDED(mu_);

  // Worker: tells the coordinator this worker has finished, then blocks until
  // the job shuts down (OK) or aborts. Server: blocks until shutdown or abort.
  Status Finish() NEREUS_LOCKS_EXCLUDED(mu_);

  // This node cannot go on because of `why` (not a rollback): tells the
  // coordinator, which ends the job at once with an error naming this node
  // and `why` (instead of the others waiting out --heartbeat_timeout_ms for
  // a node that would fall silent), and aborts this node with `why`. Does
  // nothing once the job has ended or aborted. The message leaves when the
  // transport stops (it lingers for queued messages).
  void ReportFailure(const Status& why) NEREUS_LOCKS_EXCLUDED(mu_);

  // The abort status, or OK while the job runs.
  Status aborted() const NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  void OnMessage(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) NEREUS_LOCKS_EXCLUDED(mu_);
  void HeartbeatLoop() NEREUS_LOCKS_EXCLUDED(mu_);
  void Abort(const Status& why) NEREUS_LOCKS_EXCLUDED(mu_);

  const NodeOptions options_;
  std::unique_ptr<Transport> transport_;
  Endpoint coordinator_;
  DataHandler on_data_;
  AbortHandler on_abort_;

  // Written once by the start barrier, then read-only.
  int rank_ = -1;
  pb::JobConfig job_;
  std::vector<Endpoint> servers_, workers_;
  std::map<Endpoint, std::pair<pb::Role, int>> by_endpoint_;
  std::unique_ptr<RefusalLog> refusals_;  // Set by Start() before the transport runs.
  // Data that arrived before this node's REGISTER_REPLY (bounded).
  struct EarlyMessage {
    Endpoint from;
    StatusOr<Message> msg;
    pb::Header partial;
  };
  static constexpr size_t kMaxEarlyMessages = 4096;
  static constexpr std::chrono::seconds kRegisterRepeat{1};  // REGISTER is re-sent this often until answered.
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<EarlyMessage> early_ NEREUS_GUARDED_BY(mu_);
  bool registered_ NEREUS_GUARDED_BY(mu_) = false;
  Status register_error_ NEREUS_GUARDED_BY(mu_);
  // Set by REGISTER_HELD: Start waits for the coordinator until then (the
  // hold, then --startup_timeout_s more), even past the start-up timeout
  // counted from the first REGISTER.
  std::optional<std::chrono::steady_clock::time_point> register_held_until_ NEREUS_GUARDED_BY(mu_);
  Status abort_ NEREUS_GUARDED_BY(mu_);
  bool shutdown_ NEREUS_GUARDED_BY(mu_) = false;
  bool stopping_ NEREUS_GUARDED_BY(mu_) = false;
  std::map<std::string, int> barrier_released_ NEREUS_GUARDED_BY(mu_);             // name -> releases
  std::map<std::string, std::vector<double>> barrier_min_ NEREUS_GUARDED_BY(mu_);  // name -> reduced values released
  std::chrono::steady_clock::time_point last_ack_ NEREUS_GUARDED_BY(mu_);
  bool coordinator_silent_ NEREUS_GUARDED_BY(mu_) = false;  // Said so in the log.
  std::thread heartbeat_;
  std::thread abort_notifier_;
};

}  // namespace nereus

#endif  // NEREUS_COMMON_NET_NODE_H_

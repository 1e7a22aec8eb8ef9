// Coordinator: the well-known rendezvous of a job. Assigns ranks, hands out
// the address book once every node has registered (the start barrier), runs
// barriers, watches heartbeats, and ends the job: cleanly when every worker is
// done, or with an ABORT naming the node that failed.
//
// Rollback (BSP with checkpoints): a node restarted with --resume and the
// rank of a member that has gone silent takes that member's place. The
// coordinator starts a new epoch: it sends ROLLBACK to every other member,
// forgets them, and forms the job again exactly as a --resume start does
// (every node registers again, from a new endpoint; the newest checkpoint
// every server holds is the clock the job goes on from). See
// docs/RELIABILITY.md.
//
// Restart: with a state directory, the coordinator keeps what it knows (the
// job, the members and their endpoints, the epoch, each server's checkpoints)
// in DIR/coordinator.state, written before it acts on a change. A coordinator
// killed and restarted with --resume at the same address reads it and takes
// the job back the same way: a new epoch, ROLLBACK to every member of the last
// formation (and to any of them whose heartbeat arrives first), and the job
// forms again from the newest checkpoint every server holds. The nodes keep
// sending heartbeats meanwhile and wait for it up to --heartbeat_timeout_ms.
#ifndef NEREUS_SERVER_COORDINATOR_H_
#define NEREUS_SERVER_COORDINATOR_H_

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/base/mutex.h"
#include "common/base/status.h"
#include "common/net/message.h"
#include "common/net/refusal_log.h"
#include "common/net/transport.h"
#include "proto/checkpoint.pb.h"

namespace nereus {

// --host_aggregation (pb::JobConfig.host_aggregation, docs/HOSTAGG.md).
enum class HostAggregation {
  kAuto,  // On when some host runs more than one worker, under BSP and SSP.
  kOn,    // On (BSP and SSP; refused under async).
  kOff,
};
StatusOr<HostAggregation> ParseHostAggregation(const std::string& text);

struct CoordinatorOptions {
  std::string bind = "127.0.0.1:7000";  // host:port to listen on.
  int startup_timeout_s = 60;           // Every node must register within this.
  pb::JobConfig job;                    // num_servers, num_workers, consistency, ...
  // --resume: every node must say so too; the job starts at the newest clock
  // that every server has a complete checkpoint of.
  bool resume = false;
  std::optional<CurveKeys> curve;  // Set: CURVE with the job's keys (--curve_dir).
  // Where the coordinator keeps its state (coordinator.state; --checkpoint_dir);
  // empty: nowhere, and a restarted coordinator cannot take the job back.
  std::string state_dir;
  HostAggregation host_aggregation = HostAggregation::kAuto;
};

// Checks the job configuration a coordinator would hand out.
Status ValidateJobConfig(const pb::JobConfig& job);

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator();

  // Binds the listening socket. After this, nodes may register. With a
  // state directory: a state of a job that has not ended is taken back with
  // --resume and refused without it; a damaged state file is refused naming
  // it (the coordinator cannot tell whether its job still runs).
  Status Start() NEREUS_LOCKS_EXCLUDED(mu_);
  const Endpoint& endpoint() const { return transport_->endpoint(); }

  // Blocks until the job ends. OK: every worker finished and every node was
  // told to shut down. Otherwise the error names the node that failed (missing
  // at start-up, silent, or refused); every other node has been sent ABORT.
  Status Run() NEREUS_LOCKS_EXCLUDED(mu_);

  // Ends the job as a failure would: every node is sent ABORT with `why`, Run
  // returns it, and the state file says the job ended (nothing to take back).
  // Thread-safe; for a signal (SIGTERM: the operator stops the job).
  void Stop(const std::string& why) NEREUS_LOCKS_EXCLUDED(mu_);

 private:
  struct Member {
    pb::Role role = pb::ROLE_UNSPECIFIED;
    int rank = -1;
    Endpoint endpoint;
    std::chrono::steady_clock::time_point last_seen;
    bool done = false;
    std::vector<int64_t> checkpoint_clocks;  // Servers, from REGISTER.
    int64_t checkpoint_every = 0;            // Servers, from REGISTER.
  };
  struct BarrierState {
    std::set<Endpoint> arrived;
    std::map<uint64_t, std::vector<std::string>> digests;  // digest -> node names
    std::map<uint64_t, std::string> notes;                 // digest -> what it stands for (barrier_note)
    std::map<int, std::vector<std::string>> value_counts;  // barrier_min values sent -> node names
    std::vector<double> min;                               // Element-wise minimum so far (NaNs ignored).
  };

  void OnMessage(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) NEREUS_LOCKS_EXCLUDED(mu_);
  void HandleRegister(const Endpoint& from, const pb::Header& h) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleBarrier(const Endpoint& from, const pb::Header& h) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After started_. A REGISTER naming the rank of `old`, from a new
  // endpoint. Returns true if the job rolled back and `n` is to be registered
  // in the new epoch; false if it was refused or waits (unanswered, so that
  // the node repeats it) for `old` to be found dead (silent for the
  // heartbeat timeout) or alive (answering a probe).
  bool HandleRejoin(const Endpoint& from, const pb::NodeInfo& n, const Member& old)
      NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses the node at `node` that registered in the name of a member that
  // is `alive` (why it is thought alive).
  void RefuseRejoin(const Endpoint& node, const std::string& alive) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why a rejoin of `n` cannot be done in this job, or OK.
  Status CheckRejoin(const pb::NodeInfo& n) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses a REGISTER that cannot join this job: the reason,
  // or OK.
  Status CheckRegistration(const pb::NodeInfo& n) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With --resume, the newest clock every server checkpointed.
  StatusOr<int64_t> ResumeClock() const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendTo(const Endpoint& to, pb::Op op, const std::string& error = "") NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before binding: the state a previous coordinator left in the state
  // directory, if this coordinator is to take its job back (nullopt: a new
  // job); errors say why neither is possible.
  StatusOr<std::optional<pb::CoordinatorState>> PreviousState() const;
  // After binding: takes the job of `previous` back.
  Status TakeBack(const pb::CoordinatorState& previous) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes persisted_ (with a state directory).
  Status Persist() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the job of REGISTER_REPLY `reply` (its address book) aggregates
  // per host (--host_aggregation); logs the hosts' groups when it does.
  bool HostAggregationFor(const pb::Header& reply) const;
  // Persist, failing the job if the state cannot be written
  // (a restart could not take the job back).
  void PersistOrFail() NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The endpoint of a member of the previous formation, which
  // has not registered again.
  bool IsPrevious(const Endpoint& e) const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const Status& why) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingNodes() const NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Member* Find(const Endpoint& e) NEREUS_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  std::unique_ptr<Transport> transport_;
  RefusalLog refusals_;  // Strangers' and bad messages, rate-limited.

  Mutex mu_;
  CondVar cv_;
  std::map<Endpoint, Member> members_ NEREUS_GUARDED_BY(mu_);
  bool started_ NEREUS_GUARDED_BY(mu_) = false;  // Address book sent.
  // The address book as sent, for a node that repeats its REGISTER because
  // the reply (or its first REGISTER) was lost.
  std::optional<Message> register_reply_ NEREUS_GUARDED_BY(mu_);
  int workers_done_ NEREUS_GUARDED_BY(mu_) = 0;
  bool finished_ NEREUS_GUARDED_BY(mu_) = false;
  Status failure_ NEREUS_GUARDED_BY(mu_);
  std::map<std::string, BarrierState> barriers_ NEREUS_GUARDED_BY(mu_);
  // Rollback state.
  uint32_t epoch_ NEREUS_GUARDED_BY(mu_) = 0;   // JobConfig.epoch of the current formation.
  bool resume_ NEREUS_GUARDED_BY(mu_) = false;  // options_.resume, then true after a rollback.
  // Every node registered by then.
  std::chrono::steady_clock::time_point formation_deadline_ NEREUS_GUARDED_BY(mu_);
  // Rejoining nodes waiting for the member of their rank to be found dead
  // (bounded): when each was first heard, and the member probed for it.
  struct RejoinWait {
    std::chrono::steady_clock::time_point since;
    Endpoint member;    // The endpoint of the member it would replace.
    std::string who;    // "server 1".
    pb::NodeInfo info;  // Its REGISTER's description of itself.
  };
  std::map<Endpoint, RejoinWait> rejoin_waiting_ NEREUS_GUARDED_BY(mu_);
  static constexpr size_t kMaxRejoinWaiting = 64;
  // Endpoints of the previous epoch, by (role, rank), still connected; each
  // is disconnected once its node registers again (it has read ROLLBACK).
  std::map<std::pair<int, int>, Endpoint> previous_ NEREUS_GUARDED_BY(mu_);
  // What is kept in the state directory, as last written.
  pb::CoordinatorState persisted_ NEREUS_GUARDED_BY(mu_);
};

}  // namespace nereus

#endif  // NEREUS_SERVER_COORDINATOR_H_

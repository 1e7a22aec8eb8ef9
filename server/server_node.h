// ServerNode: a parameter-server process's body — a Node joined to the job,
// feeding a ParamServer and sending its replies. Used by nereus_server and by
// in-process jobs (benchmarks). It owns the shard's checkpoint writer thread.
#ifndef NEREUS_SERVER_SERVER_NODE_H_
#define NEREUS_SERVER_SERVER_NODE_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>

#include "common/base/mutex.h"
#include "common/net/node.h"
#include "common/net/refusal_log.h"
#include "server/checkpoint.h"
#include "server/param_server.h"

namespace nereus {

struct ServerCheckpointOptions {
  std::string dir;      // Where checkpoints are written and read.
  int64_t every = 0;    // Checkpoint every N clocks (BSP only); 0: never.
  int keep = 2;         // Keep the newest K.
  bool resume = false;  // Offer the checkpoints in `dir` and load the one the job resumes from.
  // Test hook: once every partition reached this clock, wait for the checkpoints
  // already queued to be written, then SIGKILL itself. -1: never.
  int64_t crash_at_clock = -1;
};

// Checks the options (errors name the flag).
Status ValidateServerCheckpointOptions(const ServerCheckpointOptions& options, int rank);

class ServerNode : public ReplySink {
 public:
  // `apply_threads`: ParamServerOptions::apply_threads (0: updates on the
  // receive thread; N: on a pool of N threads).
  explicit ServerNode(NodeOptions options, ServerCheckpointOptions checkpoints = {}, int apply_threads = 0);
  ~ServerNode() override;

  // Joins the job and serves until it shuts down (OK) or aborts (the error).
  // Blocking. With checkpoints.resume, first looks for its complete
  // checkpoints (warning about damaged ones) and offers them when registering.
  Status Run();

  void Reply(const Endpoint& to, Message msg) override;

  // The rank this server was given (after Run registered), else --rank.
  int rank() const { return node_ != nullptr && node_->rank() >= 0 ? node_->rank() : node_options_.rank; }

 private:
  // A data message that came before the ParamServer existed.
  struct Early {
    Endpoint from;
    StatusOr<Message> msg;
    pb::Header partial;
  };
  void OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) NEREUS_LOCKS_EXCLUDED(mu_);
  void Dispatch(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial);
  StatusOr<std::unique_ptr<ParamServer>> MakeParamServer();

  NodeOptions node_options_;
  const ServerCheckpointOptions checkpoints_;
  const int apply_threads_;
  // A worker may send (INIT_PARTITION, PUSH) as soon as it has its own
  // REGISTER_REPLY, before this node has handled its own and built server_
  // (or loaded its checkpoint). Such messages wait in early_, in arrival
  // order, and Run hands them to the ParamServer before any later one; the
  // receive thread never blocks (it must read this node's REGISTER_REPLY).
  Mutex mu_;
  std::unique_ptr<CheckpointWriter> writer_;  // Set before server_; outlives it.
  // Written under mu_ before ready_, then read-only (read without mu_ once
  // ready_ is true): not expressible as NEREUS_GUARDED_BY.
  std::unique_ptr<ParamServer> server_;
  std::deque<Early> early_ NEREUS_GUARDED_BY(mu_);
  bool failed_ NEREUS_GUARDED_BY(mu_) = false;  // Start failed; drop data.
  std::atomic<bool> ready_{false};              // server_ built and early_ drained.
  RefusalLog refusals_{"server"};               // Messages from members that are not workers.
  RefusalLog reply_failures_{"server"};         // Replies the transport did not take.
  std::unique_ptr<Node> node_;                  // Last: stopped before server_ goes away.
  // node_.get(), for the receive thread (OnData, Reply): ~ServerNode's
  // node_.reset() nulls node_ before ~Node has stopped that thread, which may
  // still be in OnData or Reply (a SIGSEGV at shutdown under load).
  Node* live_node_ = nullptr;
};

// A server process's whole life in a job: ServerNode::Run, and each time the
// job rolls back (IsRollback: a node rejoined), a fresh ServerNode with the
// same rank that registers again with resume and loads the checkpoint the
// job rolls back to. Returns the last Run's status.
Status RunServer(const NodeOptions& options, ServerCheckpointOptions checkpoints, int apply_threads = 0);

}  // namespace nereus

#endif  // NEREUS_SERVER_SERVER_NODE_H_

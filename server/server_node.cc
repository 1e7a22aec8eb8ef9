#include "server/server_node.h"

#include <csignal>

namespace nereus {

Status ValidateServerCheckpointOptions(const ServerCheckpointOptions& o, int rank) {
  if (o.every < 0) return InvalidArgumentError("--checkpoint_every must be >= 0, got " + std::to_string(o.every));
  if (o.keep < 1) return InvalidArgumentError("--checkpoint_keep must be >= 1, got " + std::to_string(o.keep));
  if ((o.every > 0 || o.resume) && o.dir.empty())
    return InvalidArgumentError(std::string(o.resume ? "--resume" : "--checkpoint_every") + " needs --checkpoint_dir");
  if (o.resume && rank < 0)
    return InvalidArgumentError("a server with --resume needs its --rank: its checkpoint files are its rank's");
  return Status::OK();
}

ServerNode::ServerNode(NodeOptions options, ServerCheckpointOptions checkpoints, int apply_threads)
    : node_options_(std::move(options)), checkpoints_(std::move(checkpoints)), apply_threads_(apply_threads) {}

ServerNode::~ServerNode() {
  {
    MutexLock lock(&mu_);
    failed_ = true;  // Data still arriving is dropped.
  }
  // The pool's threads send replies through node_: they finish first, and
  // whatever still arrives is updated on the receive thread until it stops.
  if (server_ != nullptr) server_->StopApplyThreads();
  node_.reset();  // No Handle() after this.
}

StatusOr<std::unique_ptr<ParamServer>> ServerNode::MakeParamServer() {
  const pb::JobConfig& job = node_->job();
  ParamServerOptions o;
  o.rank = node_->rank();
  o.num_workers = job.num_workers();
  o.consistency = job.consistency();
  o.staleness = job.staleness();
  o.num_servers = job.num_servers();
  o.partition_bytes = job.partition_bytes();
  o.apply_threads = apply_threads_;
  if (job.host_aggregation())
    for (int w = 0; w < job.num_workers(); ++w) o.host_groups.push_back(node_->HostGroup(w));
  LOG(INFO) << node_->name() << ": updates on "
            << (apply_threads_ > 0 ? std::to_string(apply_threads_) + " apply thread(s)" : "the receive thread");
  if (checkpoints_.every > 0) {
    writer_ = std::make_unique<CheckpointWriter>(checkpoints_.dir, checkpoints_.keep);
    o.checkpoint_every = checkpoints_.every;
    CheckpointWriter* w = writer_.get();
    o.checkpoint_sink = [w](std::unique_ptr<ShardState> s) { w->Submit(std::move(s)); };
  }
  if (checkpoints_.crash_at_clock >= 0) {
    const int64_t crash = checkpoints_.crash_at_clock;
    const std::string name = node_->name();
    CheckpointWriter* w = writer_.get();
    o.on_clock = [crash, name, w](int64_t clock) {
      if (clock != crash) return;
      // The checkpoints of earlier clocks are complete, as they would be with
      // a crash some time after them (the tests expect them); a crash in the
      // middle of a write is checkpoint_test's.
      if (w != nullptr) w->Flush().IgnoreError();
      LOG(ERROR) << name << ": --crash_at_clock=" << crash << " reached; killing myself (SIGKILL)";
      google::FlushLogFiles(google::GLOG_INFO);
      std::raise(SIGKILL);
    };
  }
  auto server = std::make_unique<ParamServer>(o, this);
  if (job.resume()) {
    auto state = ReadCheckpoint(checkpoints_.dir, job.start_clock(), o.rank);
    if (!state.ok()) return state.status().Annotate("loading the checkpoint the job resumes from");
    RETURN_IF_ERROR(server->Restore(std::move(state).value()));
  }
  return server;
}

Status ServerNode::Run() {
  RETURN_IF_ERROR(ValidateServerCheckpointOptions(checkpoints_, node_options_.rank));
  node_options_.resume = checkpoints_.resume;
  node_options_.checkpoint_every = checkpoints_.every;
  if (checkpoints_.resume) {
    node_options_.checkpoint_clocks = ValidCheckpoints(checkpoints_.dir, node_options_.rank);
    std::string list;
    for (int64_t c : node_options_.checkpoint_clocks) list += (list.empty() ? "" : ", ") + std::to_string(c);
    LOG(INFO) << "server " << node_options_.rank << ": complete checkpoints in " << checkpoints_.dir << ": "
              << (list.empty() ? "none" : "clocks " + list);
  }
  node_ = std::make_unique<Node>(node_options_);
  live_node_ = node_.get();
  Status st = node_->Start([this](const Endpoint& from, StatusOr<Message> msg,
                                  const pb::Header& partial) { OnData(from, std::move(msg), partial); },
                           [](const Status&) {});
  std::unique_ptr<ParamServer> server;
  if (st.ok()) {
    auto made = MakeParamServer();
    if (made.ok()) {
      server = std::move(made).value();
    } else {
      st = made.status();
    }
  }
  {
    MutexLock lock(&mu_);
    server_ = std::move(server);
    failed_ = server_ == nullptr;
    if (failed_) {
      early_.clear();
    } else {
      // Under mu_: a message arriving meanwhile queues behind these, so the
      // ParamServer sees everything in arrival order, one call at a time.
      if (!early_.empty())
        LOG(INFO) << node_->name() << ": handling " << early_.size() << " message(s) that came before it was ready";
      for (Early& e : early_) Dispatch(e.from, std::move(e.msg), e.partial);
      early_.clear();
      ready_.store(true, std::memory_order_release);
    }
  }
  if (!st.ok()) return st;
  st = node_->Finish();
  if (writer_ != nullptr) {
    Status written = writer_->Flush();
    if (st.ok() && !written.ok()) st = written.Annotate("checkpoint");
  }
  if (st.ok()) LOG(INFO) << node_->name() << " shut down cleanly";
  return st;
}

Status RunServer(const NodeOptions& options, ServerCheckpointOptions checkpoints, int apply_threads) {
  NodeOptions node = options;
  while (true) {
    auto server = std::make_unique<ServerNode>(node, checkpoints, apply_threads);
    Status st = server->Run();
    if (!IsRollback(st)) return st;
    node.rank = server->rank();
    checkpoints.resume = true;
    server.reset();  // Its connections close before the new one registers.
    LOG(WARNING) << "server " << node.rank << ": joining the job again to roll back to its checkpoint";
  }
}

void ServerNode::Reply(const Endpoint& to, Message msg) {
  // Weights travel over the worker's parallel streams (spread by partition);
  // everything else on the first.
  const int stream = msg.header.op() == pb::PULL_REPLY ? msg.header.priority() : 0;
  Status st = live_node_->Send(to, std::move(msg), stream);
  // Rate-limited: at shutdown every queued request's reply fails.
  if (!st.ok()) reply_failures_.Refuse(to, "could not be answered: " + st.message());
}

void ServerNode::OnData(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
  // Data can arrive between the start barrier and server_ being built (or a
  // checkpoint being loaded): it waits in early_ (see server_node.h).
  if (!ready_.load(std::memory_order_acquire)) {
    MutexLock lock(&mu_);
    if (failed_) return;
    if (!ready_.load(std::memory_order_relaxed)) {
      early_.push_back(Early{from, std::move(msg), partial});
      return;
    }
  }
  Dispatch(from, std::move(msg), partial);
}

void ServerNode::Dispatch(const Endpoint& from, StatusOr<Message> msg, const pb::Header& partial) {
  // Node passes on members only; of those, only workers send requests to a
  // server. Anything else is dropped unanswered: answering a server (or a
  // stranger using its identity) could start an endless exchange of ERRORs.
  pb::Role role;
  int rank = -1;
  if (!live_node_->Lookup(from, &role, &rank) || role != pb::WORKER) {
    refusals_.Refuse(from, "refused a message: only workers send requests to a server");
    return;
  }
  server_->Handle(from, rank, std::move(msg), partial);
}

}  // namespace nereus
